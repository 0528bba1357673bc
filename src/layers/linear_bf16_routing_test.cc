// Where a Linear's reduced-precision products run (AMX tiles, vdpbf16ps, or widened to f32) and what they give:
// the engine bf16_tiles_engine() names is the one the bf16 GEMMs counted, every shape is within the bf16
// tolerance of double accumulation, and a token's result does not depend on the rows beside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#ifdef __linux__
#include <sys/resource.h>
#endif

#include "core/amx.h"
#include "core/batch_invariance.h"
#include "core/bf16_dot.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/dispatch.h"
#include "kernels/common/bf16_dot.h"
#include "kernels/quant/gemv_kernels.h"
#include "layers/linear.h"
#include "layers/matmul_precision.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

// Restores the SIMD target a test forced.
class TargetScope {
 public:
  TargetScope() : saved_(active_target()) {}
  ~TargetScope() { set_target(saved_); }

 private:
  Target saved_;
};

uint64_t gemms_on(const char* engine) {
  const LinearBf16GemmCounts c = linear_bf16_gemm_counts();
  return std::string(engine) == "AMX tiles" ? c.amx : c.vdpbf16ps;
}

// The engine counted for a prefill under "medium" is the one bf16_tiles_engine() names; under a target below
// avx512_bf16 neither runs and the products are f32 (the same bits as "highest").
TEST(LinearBf16Routing, TheNamedEngineRunsThePrefill) {
  HostTensor w(DType::bf16, {96, 160}, 1, 0.5f), x(DType::f32, {65, 160}, 2, 1.f);
  std::vector<float> reduced(65 * 96), exact(65 * 96);
  const auto forward = [&](MatmulPrecision p, std::vector<float>& y) {
    ScopedMatmulPrecision scope(p);
    linear_forward(w.view, nullptr, x.view.ptr<float>(), 65, y.data(), 96);
  };
  const char* engine = bf16_tiles_engine();
  EXPECT_EQ(engine != nullptr, bf16_tiles_enabled());
  if (amx_bf16_enabled()) {
    EXPECT_STREQ(engine, "AMX tiles");  // whatever the vendor rule says of vdpbf16ps
  } else {
    std::printf("no AMX here (%s): the AMX engine is not checked\n", amx_support().reason.c_str());
    if (engine) EXPECT_STREQ(engine, "vdpbf16ps");
  }
  if (engine) {
    const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
    forward(MatmulPrecision::medium, reduced);
    const LinearBf16GemmCounts after = linear_bf16_gemm_counts();
    EXPECT_EQ(after.amx + after.vdpbf16ps - before.amx - before.vdpbf16ps, 1u);
    EXPECT_EQ(gemms_on(engine), std::string(engine) == "AMX tiles" ? after.amx : after.vdpbf16ps);
    EXPECT_GT(gemms_on(engine), std::string(engine) == "AMX tiles" ? before.amx : before.vdpbf16ps);
    forward(MatmulPrecision::highest, exact);
    EXPECT_NE(reduced, exact) << "medium did not round x to bf16";
  }
  const std::vector<Target> targets = supported_targets();
  if (std::find(targets.begin(), targets.end(), Target::avx512) == targets.end())
    GTEST_SKIP() << "no avx512 target to force here";
  const TargetScope restore;
  set_target(Target::avx512);
  EXPECT_FALSE(amx_bf16_enabled());
  EXPECT_EQ(bf16_tiles_engine(), nullptr);
  const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
  forward(MatmulPrecision::medium, reduced);
  forward(MatmulPrecision::highest, exact);
  const LinearBf16GemmCounts after = linear_bf16_gemm_counts();
  EXPECT_EQ(after.amx, before.amx);
  EXPECT_EQ(after.vdpbf16ps, before.vdpbf16ps);
  EXPECT_EQ(reduced, exact) << "widened: f32 products either way";
}

// Max |got - want| over the largest |want| (sums of ~K products of similar size).
double rel_error(const float* got, const float* want, int64_t T, int64_t N, int64_t ldy) {
  double err = 0, scale = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      err = std::max(err, double(std::fabs(got[t * ldy + n] - want[t * N + n])));
      scale = std::max(scale, double(std::fabs(want[t * N + n])));
    }
  return err / scale;
}

// Every token count around the GEMV / few-rows / GEMM boundaries and the tiles' 16 / 32 rows, a reduction that is
// odd (a half-filled last pair) or not a multiple of the tiles' 16 pairs, with and without bias, into rows wider
// than N (what lies between them is left alone): within bf16's rounding of double accumulation.
TEST(LinearBf16Routing, ReducedProductsMatchTheReference) {
  if (!bf16_tiles_enabled()) GTEST_SKIP() << "bf16 products widen to f32 on this CPU / target";
  struct Weights {
    std::string name;
    QuantMatrix w;
    std::vector<uint8_t> raw;
  };
  std::vector<Weights> cases;
  HostTensor dense_odd(DType::bf16, {70, 99}, 3, 0.5f), dense(DType::bf16, {48, 224}, 4, 0.5f);
  cases.push_back({"bf16 K=99", dense_matrix(dense_odd.view), {}});
  cases.push_back({"bf16 K=224", dense_matrix(dense.view), {}});
  for (QuantType t : {QuantType::Q4_0, QuantType::Q8_0}) {
    Weights c{quant_type_name(t), {}, testing::random_quant_rows(t, 70, 96, 5 + uint64_t(t))};
    c.w = make_quant_matrix(c.raw.data(), c.raw.size(), t, 70, 96, "w");
    cases.push_back(std::move(c));
  }
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  for (const Weights& c : cases) {
    const int64_t N = c.w.rows, K = c.w.cols, ldy = N + 5;
    HostTensor b(DType::f32, {N}, 6, 1.f);
    for (int64_t T : {1, 2, 7, 8, 9, 63, 64, 65, 300}) {
      HostTensor x(DType::f32, {T, K}, 7 + uint64_t(T), 1.f);
      for (bool with_bias : {false, true}) {
        const float* bias = with_bias ? b.view.ptr<float>() : nullptr;
        std::vector<float> want(size_t(T * N)), got(size_t(T * ldy), -7.f);
        quant_matmul_reference(c.w, bias, x.view.ptr<float>(), T, want.data(), N);
        linear_forward(c.w, bias, x.view.ptr<float>(), T, got.data(), ldy, /*reduced=*/true);
        EXPECT_LT(rel_error(got.data(), want.data(), T, N, ldy), 2e-2) << c.name << " T=" << T << " bias " << with_bias;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = N; n < ldy; ++n) ASSERT_EQ(got[size_t(t * ldy + n)], -7.f) << c.name << " T=" << T;
      }
    }
  }
}

// Batch-invariant numerics: a token's projection is the same bits whether it is computed alone (a decode), in a
// few rows (the few-rows GEMM) or in a long prefill (the panel GEMM). Dense bf16 weights take the tiles for one
// row too under the mode, since the GEMV's f32 products are not the tiles' bf16 ones.
TEST(LinearBf16Routing, ATokensRowDoesNotDependOnTheRowsBesideIt) {
  if (!bf16_tiles_enabled()) GTEST_SKIP() << "bf16 products widen to f32 on this CPU / target";
  const int64_t N = 80, K = 200, T = 300;
  HostTensor w(DType::bf16, {N, K}, 8, 0.5f), x(DType::f32, {T, K}, 9, 1.f), b(DType::f32, {N}, 10, 1.f);
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  for (bool invariant : {true, false}) {
    const ScopedBatchInvariant mode(invariant);
    std::vector<float> all(size_t(T * N));
    linear_forward(dense_matrix(w.view), b.view.ptr<float>(), x.view.ptr<float>(), T, all.data(), N, true);
    for (int64_t rows : {1, 2, 7, 9, 64, 65}) {
      if (rows == 1 && !invariant) continue;  // a lone decode keeps the f32 GEMV outside the mode
      for (int64_t t0 : {int64_t(0), T - rows}) {
        std::vector<float> part(size_t(rows * N));
        linear_forward(dense_matrix(w.view), b.view.ptr<float>(), x.view.ptr<float>() + t0 * K, rows, part.data(),
                       N, true);
        for (int64_t i = 0; i < rows * N; ++i)
          ASSERT_EQ(part[size_t(i)], all[size_t(t0 * N + i)])
              << "rows " << rows << " from " << t0 << " invariant " << invariant << " at " << i;
      }
    }
  }
}

// x [T, K] times bf16 w [N, K] (+ bias) by bf16_pair_gemm_amx over W transposed to pairs: [T][N rounded to 16].
std::vector<float> pair_gemm_on_amx(const HostTensor& w, const HostTensor& x, const float* bias) {
  const int64_t N = w.view.shape[0], K = w.view.shape[1], T = x.view.shape[0];
  const int64_t K2 = (K + 1) / 2, Np = (N + 15) / 16 * 16;
  std::vector<uint32_t> xp(size_t(T * K2)), wp(size_t(N * K2)), wt(size_t(K2 * Np));
  for (int64_t t = 0; t < T; ++t) pack_f32_to_bf16_pairs(x.view.ptr<float>() + t * K, size_t(K), xp.data() + t * K2);
  std::vector<float> wf(size_t(N * K));
  for (int64_t i = 0; i < N * K; ++i) wf[size_t(i)] = load_as_f32(w.view.data, DType::bf16, i);
  for (int64_t n = 0; n < N; ++n) pack_f32_to_bf16_pairs(wf.data() + n * K, size_t(K), wp.data() + n * K2);
  transpose_pairs(wp.data(), size_t(K2), size_t(N), size_t(K2), wt.data(), size_t(Np));
  std::vector<float> want(size_t(T * Np));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < Np; ++n) want[size_t(t * Np + n)] = n < N && bias ? bias[n] : 0.f;
  bf16_pair_gemm_amx(size_t(T), size_t(Np), size_t(K2), xp.data(), size_t(K2), wt.data(), size_t(Np), want.data(),
                     size_t(Np), /*accumulate=*/true);
  return want;
}

// On AMX the projection keeps C in the tiles over the whole reduction with W as the A operand; bf16_pair_gemm
// (the primitive the vdpbf16ps path and attention use) multiplies x as A against W transposed, a reduction block at
// a time through memory. The same pair products added in the same order: the same bits, ragged shapes included.
TEST(LinearBf16Routing, AmxProjectionEqualsThePairGemm) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "AMX tiles do not run here (" << amx_support().reason << ")";
  for (int64_t K : {int64_t(99), int64_t(256), int64_t(544)}) {
    const int64_t T = 45, N = 37, Np = (N + 15) / 16 * 16;
    HostTensor w(DType::bf16, {N, K}, 11, 0.5f), x(DType::f32, {T, K}, 12, 1.f), b(DType::f32, {N}, 13, 1.f);
    const std::vector<float> want = pair_gemm_on_amx(w, x, b.view.ptr<float>());
    std::vector<float> got(size_t(T * N));
    const ScopedMatmulPrecision medium(MatmulPrecision::medium);
    linear_forward(dense_matrix(w.view), b.view.ptr<float>(), x.view.ptr<float>(), T, got.data(), N, true);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(got[size_t(t * N + n)], want[size_t(t * Np + n)]) << "K=" << K << " t=" << t << " n=" << n;
  }
}

// bf16 rows that do not start on a cache line (a safetensors tensor sits at an 8-byte offset) are copied into
// aligned pairs for a long prompt, since every 64-byte tile row would straddle two lines, and read in place for a
// short one (the copy would not pay for itself); both give the aligned weights' bits, bias, ragged N and T and
// rows wider than N included.
TEST(LinearBf16Routing, AmxRealignsRowsOffACacheLineForLongPrompts) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "AMX tiles do not run here (" << amx_support().reason << ")";
  const int64_t N = 37, K = 256, ldy = N + 3;
  HostTensor w(DType::bf16, {N, K}, 14, 0.5f), b(DType::f32, {N}, 15, 1.f);
  // The same rows twice: on a cache line, and 24 bytes past one.
  const size_t bytes = size_t(N * K * 2);
  std::vector<uint8_t> storage(2 * bytes + 192);
  uint8_t* line = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  uint8_t* off = line + bytes + 64 - bytes % 64 + 24;
  std::memcpy(line, w.view.data, bytes);
  std::memcpy(off, w.view.data, bytes);
  QuantMatrix aligned = dense_matrix(w.view), unaligned = aligned;
  aligned.data = line;
  unaligned.data = off;
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  for (int64_t T : {int64_t(100), int64_t(300)}) {
    HostTensor x(DType::f32, {T, K}, 16 + uint64_t(T), 1.f);
    std::vector<float> want(size_t(T * ldy), -7.f), got(size_t(T * ldy), -7.f);
    linear_forward(aligned, b.view.ptr<float>(), x.view.ptr<float>(), T, want.data(), ldy, true);
    const uint64_t before = linear_bf16_gemm_counts().amx_staged;
    linear_forward(unaligned, b.view.ptr<float>(), x.view.ptr<float>(), T, got.data(), ldy, true);
    EXPECT_EQ(linear_bf16_gemm_counts().amx_staged - before, T >= 256 ? 1u : 0u) << "T=" << T;
    ASSERT_EQ(got, want) << "T=" << T;
  }
  const uint64_t before = linear_bf16_gemm_counts().amx_staged;
  HostTensor x(DType::f32, {300, K}, 17, 1.f);
  std::vector<float> y(size_t(300 * N));
  linear_forward(aligned, nullptr, x.view.ptr<float>(), 300, y.data(), N, true);
  EXPECT_EQ(linear_bf16_gemm_counts().amx_staged, before) << "aligned rows are read in place";
}

// A Linear over bf16 rows off a cache line copies them onto lines once, at load, where the AMX tiles run: its
// prefills then never stage W (amx_staged stays put over repeated long prompts), and give the bits of the rows
// read where they lie (short prompts) or staged per call (long ones). Where AMX does not run (the avx2 target
// here) the rows stay borrowed: the GEMV and the vdpbf16ps GEMM gain nothing from a copy.
TEST(LinearBf16Routing, LinearCopiesRowsOffACacheLineOnceAtLoad) {
  const int64_t N = 40, K = 256;
  HostTensor w(DType::bf16, {N, K}, 18, 0.5f), b(DType::f32, {N}, 19, 1.f);
  const size_t bytes = size_t(N * K * 2);
  std::vector<uint8_t> storage(bytes + 128);
  uint8_t* off = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 + 24;
  std::memcpy(off, w.view.data, bytes);
  const TensorView view = TensorView::contiguous(off, DType::bf16, {N, K});
  {
    TargetScope scope;
    set_target(Target::avx2);
    const Linear borrowed = Linear::from_weights(view, b.view, "w", DType::bf16);
    EXPECT_FALSE(borrowed.owns_weight());
    EXPECT_EQ(borrowed.matrix().data, off);
  }
  if (!amx_bf16_enabled()) GTEST_SKIP() << "AMX tiles do not run here (" << amx_support().reason << ")";
  const Linear l = Linear::from_weights(view, b.view, "w", DType::bf16);
  EXPECT_TRUE(l.owns_weight());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(l.matrix().data) % 64, 0u);
  EXPECT_EQ(std::memcmp(l.matrix().data, off, bytes), 0);
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  for (int64_t T : {int64_t(100), int64_t(300)}) {
    HostTensor x(DType::f32, {T, K}, 20 + uint64_t(T), 1.f);
    std::vector<float> want(size_t(T * N)), got(size_t(T * N));
    linear_forward(dense_matrix(view), b.view.ptr<float>(), x.view.ptr<float>(), T, want.data(), N, true);
    const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
    for (int repeat = 0; repeat < 2; ++repeat) {
      l.forward(x.view.ptr<float>(), T, got.data());
      ASSERT_EQ(got, want) << "T=" << T;
    }
    EXPECT_EQ(linear_bf16_gemm_counts().amx - before.amx, 2u) << "T=" << T;
    EXPECT_EQ(linear_bf16_gemm_counts().amx_staged, before.amx_staged) << "T=" << T;
  }
}

// The activations' bf16 pairs and their transpose live in scratch that the calling thread keeps between calls:
// a prefill's projections stop faulting fresh pages in each call (the observable: the process's minor page
// faults over repeated calls, a small fraction of one call's buffers), and a call after a larger one, whose
// leftovers fill the scratch, still gives the bits of the pair GEMM.
TEST(LinearBf16Routing, PrefillScratchIsReusedAcrossCalls) {
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  const uint64_t before = gemms_on("AMX tiles") + gemms_on("vdpbf16ps");
  {
    HostTensor w(DType::bf16, {8, 64}, 1, 0.5f), x(DType::f32, {80, 64}, 2, 1.f);
    std::vector<float> y(size_t(80 * 8));
    linear_forward(dense_matrix(w.view), nullptr, x.view.ptr<float>(), 80, y.data(), 8, true);
  }
  if (gemms_on("AMX tiles") + gemms_on("vdpbf16ps") == before)
    GTEST_SKIP() << "no bf16 tile GEMM runs on this target";
#ifdef __linux__
  const int64_t T = 512, K = 1024, N = 32;
  HostTensor w(DType::bf16, {N, K}, 3, 0.5f), x(DType::f32, {T, K}, 4, 1.f);
  std::vector<float> y(size_t(T * N));
  const auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return int64_t(u.ru_minflt);
  };
  linear_forward(dense_matrix(w.view), nullptr, x.view.ptr<float>(), T, y.data(), N, true);  // grows the scratch
  const int64_t f0 = minor_faults();
  for (int i = 0; i < 4; ++i) linear_forward(dense_matrix(w.view), nullptr, x.view.ptr<float>(), T, y.data(), N, true);
  const int64_t call_pages = T * K * 2 / 4096;  // the pairs alone, 256 pages; their transpose as many again
  EXPECT_LT(minor_faults() - f0, call_pages / 4) << "4 calls faulted pages in: scratch allocated per call";
#endif
  if (!amx_bf16_enabled()) return;
  for (int64_t Ks : {int64_t(99), int64_t(40)}) {  // K = 99: an odd last pair and padded reductions
    const int64_t Ts = 45, Ns = 37, Np = (Ns + 15) / 16 * 16;
    HostTensor ws(DType::bf16, {Ns, Ks}, 5, 0.5f), xs(DType::f32, {Ts, Ks}, 6, 1.f);
    const std::vector<float> want = pair_gemm_on_amx(ws, xs, nullptr);
    std::vector<float> got(size_t(Ts * Ns));
    linear_forward(dense_matrix(ws.view), nullptr, xs.view.ptr<float>(), Ts, got.data(), Ns, true);
    for (int64_t t = 0; t < Ts; ++t)
      for (int64_t n = 0; n < Ns; ++n)
        ASSERT_EQ(got[size_t(t * Ns + n)], want[size_t(t * Np + n)]) << "K=" << Ks << " t=" << t << " n=" << n;
  }
}

// Projections of one input that all take the bf16 GEMM (q / k / v, gate / up at a prefill) round it to bf16
// pairs once between them, with forward()'s bits one by one: ragged N, a bias, bf16 and f32 weights, a token count
// on the AMX path and one on the few-rows path of vdpbf16ps. One token takes the GEMV: nothing is prepared.
TEST(LinearBf16Routing, SharedInputIsRoundedOnceForItsProjections) {
  const ScopedMatmulPrecision medium(MatmulPrecision::medium);
  const int64_t K = 96;
  HostTensor wq(DType::bf16, {40, K}, 21, 0.5f), wk(DType::f32, {24, K}, 22, 0.5f), wv(DType::bf16, {24, K}, 23, 0.5f),
      bq(DType::f32, {40}, 24, 1.f);
  const Linear q = Linear::from_weights(wq.view, bq.view, "q"), k = Linear::from_weights(wk.view, {}, "k"),
               v = Linear::from_weights(wv.view, {}, "v");
  for (int64_t T : {int64_t(50), int64_t(300)}) {
    HostTensor x(DType::f32, {T, K}, 25 + uint64_t(T), 1.f);
    std::vector<float> want_q(size_t(T * 40)), want_k(size_t(T * 24)), want_v(size_t(T * 24));
    q.forward(x.view.ptr<float>(), T, want_q.data());
    k.forward(x.view.ptr<float>(), T, want_k.data());
    v.forward(x.view.ptr<float>(), T, want_v.data());
    const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
    std::vector<float> got_q(want_q.size(), -7.f), got_k(want_k.size(), -7.f), got_v(want_v.size(), -7.f);
    Linear::forward_shared({{&q, got_q.data()}, {&k, got_k.data()}, {&v, got_v.data()}}, x.view.ptr<float>(), T);
    const LinearBf16GemmCounts after = linear_bf16_gemm_counts();
    if (after.amx + after.vdpbf16ps == before.amx + before.vdpbf16ps)
      GTEST_SKIP() << "no bf16 tile GEMM runs on this target";
    EXPECT_EQ(after.amx + after.vdpbf16ps - before.amx - before.vdpbf16ps, 3u) << "T=" << T;
    EXPECT_EQ(after.prepared - before.prepared, 1u) << "T=" << T;
    ASSERT_EQ(got_q, want_q) << "T=" << T;
    ASSERT_EQ(got_k, want_k) << "T=" << T;
    ASSERT_EQ(got_v, want_v) << "T=" << T;
  }
  HostTensor x(DType::f32, {1, K}, 26, 1.f);
  std::vector<float> want(40), got(40, -7.f), other(24);
  q.forward(x.view.ptr<float>(), 1, want.data());
  const uint64_t before = linear_bf16_gemm_counts().prepared;
  Linear::forward_shared({{&q, got.data()}, {&k, other.data()}}, x.view.ptr<float>(), 1);
  EXPECT_EQ(linear_bf16_gemm_counts().prepared, before);
  ASSERT_EQ(got, want);
}


TEST(LinearBf16Routing, PreparedActivationsOfAnotherWidthAreRefusedByName) {
  if (!bf16_tiles_enabled()) GTEST_SKIP() << "bf16 products widen to f32 on this CPU / target";
  HostTensor w(DType::bf16, {16, 96}, 1, 0.5f), x(DType::f32, {20, 64}, 2, 1.f);
  std::vector<float> y(size_t(20 * 16));
  const Bf16Activations prepared = prepare_bf16_activations(x.view.ptr<float>(), 20, 64);
  try {
    linear_gemm_bf16(dense_matrix(w.view), nullptr, prepared, y.data(), 16, 16);
    FAIL() << "activations prepared for K = 64 multiplied weights of 96 columns";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("x: prepared for K = 64, the weights have 96 columns"), std::string::npos)
        << e.what();
  }
}

// Activations laid out for the AMX tiles are groups of tokens; the vdpbf16ps engine reads plain pairs. Prepared
// under one engine and multiplied after the target changed (a test or a bench switching targets between the two
// calls), they would be read in the wrong layout: refused by name instead.
TEST(LinearBf16Routing, PreparedActivationsOfAnotherEngineAreRefusedByName) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "AMX tiles do not run here (" << amx_support().reason << ")";
  HostTensor w(DType::bf16, {16, 64}, 3, 0.5f), x(DType::f32, {20, 64}, 4, 1.f);
  std::vector<float> y(size_t(20 * 16), -7.f);
  const Bf16Activations prepared = prepare_bf16_activations(x.view.ptr<float>(), 20, 64);
  ASSERT_TRUE(prepared.amx);
  set_target(Target::avx512);  // AMX runs only with the avx512_bf16 target
  testing::expect_refusal([&] { linear_gemm_bf16(dense_matrix(w.view), nullptr, prepared, y.data(), 16, 16); },
                          "x: prepared for another bf16 engine than the one that now runs");
  set_target(supported_targets().front());
  EXPECT_EQ(y, std::vector<float>(size_t(20 * 16), -7.f)) << "refused before writing y";
}

}  // namespace
}  // namespace attnzoo

namespace attnzoo {
namespace {

class PromptInt8Scope {
 public:
  explicit PromptInt8Scope(PromptInt8Rows m) : saved_(linear_prompt_int8_rows()) { set_linear_prompt_int8_rows(m); }
  ~PromptInt8Scope() { set_linear_prompt_int8_rows(saved_); }

 private:
  PromptInt8Rows saved_;
};

// ATTNZOO_PROMPT_INT8: unset, empty or "auto" leave the choice to the CPU, "0" / "1" force it; anything else is an
// ArgumentError naming the variable and the value.
TEST(LinearBf16Routing, PromptInt8RuleReadsAutoZeroOneAndNamesABadValue) {
  for (const char* env : {static_cast<const char*>(nullptr), "", "auto"})
    EXPECT_EQ(prompt_int8_rows_rule(env), PromptInt8Rows::automatic) << (env ? env : "(unset)");
  EXPECT_EQ(prompt_int8_rows_rule("0"), PromptInt8Rows::off);
  EXPECT_EQ(prompt_int8_rows_rule("1"), PromptInt8Rows::on);
  for (const char* bad : {"yes", "on", "2", "AUTO"}) {
    try {
      prompt_int8_rows_rule(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("ATTNZOO_PROMPT_INT8"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

// A prompt over block weights takes the integer rows or the bf16 / f32 panels as the setting says: "on" gives the
// bits of quant_gemv (8-bit activations, each token on its own), "off" runs the panels (on the bf16 GEMM where
// bf16 products run), "auto" whichever of the two prompt_int8_auto_max_tokens names for this target, format and
// length, with that route's bits; each within the reduced products' tolerance of the double reference. On every
// target this CPU runs, so that the AVX2 and portable rules are exercised as well as the VNNI one.
TEST(LinearBf16Routing, PromptsOverBlockWeightsTakeTheRouteTheSettingNames) {
  const int64_t N = 80, K = 256;
  testing::for_each_target([&](Target target) {
    for (QuantType t : {QuantType::Q4_0, QuantType::Q4_K, QuantType::Q5_0, QuantType::Q5_K, QuantType::Q6_K,
                        QuantType::IQ4_XS}) {
      const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 11 + uint64_t(t));
      const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
      const bool regrouped = w.row_group != 0;
      const int64_t auto_max = prompt_int8_auto_max_tokens(prompt_int8_rows_engine(t, regrouped), t,
                                                           amx_bf16_enabled(), bf16_tiles_enabled());
      const std::string what = std::string(quant_type_name(t)) + " on " + target_name(target);
      for (int64_t T : {9, 16, 33, 65}) {
        HostTensor x(DType::f32, {T, K}, 12 + uint64_t(T), 1.f);
        std::vector<float> want(size_t(T * N)), rows(size_t(T * N)), on(size_t(T * N)), off(size_t(T * N)),
            automatic(size_t(T * N));
        quant_matmul_reference(w, nullptr, x.view.ptr<float>(), T, want.data(), N);
        quant_gemv(w, nullptr, x.view.ptr<float>(), T, rows.data(), N);
        {
          const PromptInt8Scope scope(PromptInt8Rows::on);
          EXPECT_TRUE(linear_prompt_takes_int8_rows(t, T, regrouped));
          const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
          linear_forward(w, nullptr, x.view.ptr<float>(), T, on.data(), N, /*reduced=*/true);
          const LinearBf16GemmCounts after = linear_bf16_gemm_counts();
          EXPECT_EQ(after.amx + after.vdpbf16ps, before.amx + before.vdpbf16ps) << what << " T=" << T;
          EXPECT_EQ(on, rows) << what << " T=" << T << ": not the integer rows' bits";
        }
        {
          const PromptInt8Scope scope(PromptInt8Rows::off);
          EXPECT_FALSE(linear_prompt_takes_int8_rows(t, T, regrouped));
          const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
          linear_forward(w, nullptr, x.view.ptr<float>(), T, off.data(), N, /*reduced=*/true);
          const LinearBf16GemmCounts after = linear_bf16_gemm_counts();
          EXPECT_EQ(after.amx + after.vdpbf16ps, before.amx + before.vdpbf16ps + (bf16_tiles_enabled() ? 1 : 0))
              << what << " T=" << T;
        }
        {
          const PromptInt8Scope scope(PromptInt8Rows::automatic);
          const bool int8 = T <= auto_max;
          EXPECT_EQ(linear_prompt_takes_int8_rows(t, T, regrouped), int8) << what << " T=" << T;
          linear_forward(w, nullptr, x.view.ptr<float>(), T, automatic.data(), N, /*reduced=*/true);
          EXPECT_EQ(automatic, int8 ? on : off) << what << " T=" << T << ": auto took another route than its rule";
        }
        EXPECT_LT(rel_error(on.data(), want.data(), T, N, N), 2e-2) << what << " T=" << T;
        EXPECT_LT(rel_error(off.data(), want.data(), T, N, N), 2e-2) << what << " T=" << T;
      }
    }
  });
}

}  // namespace
}  // namespace attnzoo
