#include "layers/linear.h"

#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include "core/amx.h"
#include "core/bf16_dot.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "layers/linear_kernels.h"
#include "layers/mlp.h"
#include "layers/matmul_precision.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct Case {
  int64_t T, N, K;
  DType dtype;
  bool bias;
};

void check_case(const Case& c, int path) {
  HostTensor w(c.dtype, {c.N, c.K}, 1 + uint64_t(c.N * 7 + c.K), 0.5f);
  HostTensor x(DType::f32, {c.T, c.K}, 2 + uint64_t(c.T), 1.f);
  HostTensor b(DType::f32, {c.N}, 3, 1.f);
  const float* bias = c.bias ? b.view.ptr<float>() : nullptr;
  std::vector<float> got(size_t(c.T * c.N), -1.f), want(size_t(c.T * c.N));
  linear_reference(w.view, bias, x.view.ptr<float>(), c.T, want.data(), c.N);
  if (path == 0) linear_gemv(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N);
  if (path == 1) linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N, LinearGemmBackend::openblas);
  if (path == 2) linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N, LinearGemmBackend::tile);
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  EXPECT_LT(err, 2e-4 * std::sqrt(double(c.K))) << "T=" << c.T << " N=" << c.N << " K=" << c.K << " path " << path
                                                << " dtype " << dtype_name(c.dtype);
}

TEST(Linear, GemvMatchesReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (int64_t T : {1, 2, 5, 8, 11})  // 11: split into 8 + 3
        for (auto [N, K] :
             std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 3}, {33, 70}, {33, 100}, {130, 64}, {64, 257}})
          check_case({T, N, K, dt, T % 2 == 1}, 0);
  });
}

// Output rows wider than N (ldy > N, as a fused projection writes into a wider buffer): every token count the
// GEMV serves, each row's N results against the reference and the columns past N left as they were.
TEST(Linear, GemvWritesOnlyItsColumnsOfWiderRows) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (int64_t T = 1; T <= 8; ++T) {
        const int64_t N = 37, K = 150, ldy = N + 5;
        HostTensor w(dt, {N, K}, 11 + uint64_t(T), 0.5f), x(DType::f32, {T, K}, 12 + uint64_t(T), 1.f);
        HostTensor b(DType::f32, {N}, 13, 1.f);
        std::vector<float> got(size_t(T * ldy), -7.f), want(size_t(T * N));
        linear_reference(w.view, b.view.ptr<float>(), x.view.ptr<float>(), T, want.data(), N);
        linear_gemv(w.view, b.view.ptr<float>(), x.view.ptr<float>(), T, got.data(), ldy);
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t n = 0; n < N; ++n)
            EXPECT_NEAR(got[size_t(t * ldy + n)], want[size_t(t * N + n)], 2e-4 * std::sqrt(double(K)))
                << "T=" << T << " t=" << t << " n=" << n << " " << dtype_name(dt);
          for (int64_t n = N; n < ldy; ++n) EXPECT_EQ(got[size_t(t * ldy + n)], -7.f) << "T=" << T << " t=" << t;
        }
      }
  });
}

// A row's result does not depend on the rows its task holds beside it: a task's row count follows the thread
// count, so a GEMV that took rows in groups (tried: pairs sharing each x load) would tie a row's bits to it. Bit
// for bit, each row alone against the same row within the whole range.
TEST(Linear, GemvRowResultIsTheSameAloneOrBesideOthers) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (size_t T = 1; T <= 8; ++T) {
        const size_t N = 9, K = 150;
        HostTensor w(dt, {int64_t(N), int64_t(K)}, 21 + T, 0.5f), x(DType::f32, {int64_t(T), int64_t(K)}, 22 + T, 1.f);
        HostTensor b(DType::f32, {int64_t(N)}, 23, 1.f);
        std::vector<float> whole(T * N), alone(T * N);
        gemv_rows({w.view.data, dt, K, x.view.ptr<float>(), T, 0, N, b.view.ptr<float>(), whole.data(), N});
        for (size_t n = 0; n < N; ++n)
          gemv_rows({w.view.data, dt, K, x.view.ptr<float>(), T, n, n + 1, b.view.ptr<float>(), alone.data(), N});
        for (size_t i = 0; i < T * N; ++i)
          EXPECT_EQ(whole[i], alone[i]) << "T=" << T << " t=" << i / N << " n=" << i % N << " " << dtype_name(dt);
      }
  });
}

TEST(Linear, GemmMatchesReferenceOnEveryTarget) {
  testing::for_each_target([](Target) {
    for (DType dt : {DType::f32, DType::bf16})
      for (int path : {1, 2})
        for (int64_t T : {9, 40, 200})
          for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{7, 3}, {33, 70}, {130, 64}, {250, 129}})
            check_case({T, N, K, dt, N % 2 == 1}, path);
  });
}

TEST(Linear, F16WeightsAreWidenedOnceAndBf16StoreRounds) {
  HostTensor w16(DType::f16, {24, 40}, 5, 0.5f);
  Linear l = Linear::from_weights(w16.view, {}, "w16");
  EXPECT_TRUE(l.owns_weight());
  EXPECT_EQ(l.weight().dtype, DType::f32);
  // The f32 copy (24 x 40 x 4 bytes) stands in for the f16 bytes it came from (24 x 40 x 2), whose pages a
  // loader releases from its mapping: what a model's inspect() subtracts from its checkpoint.
  EXPECT_EQ(l.weight_bytes(), 24u * 40u * 4u);
  EXPECT_EQ(l.replaced_source_bytes(), 24u * 40u * 2u);
  // A copy made beside a Linear (MLA's absorption) replaces nothing: the Linear it came from keeps its weight.
  EXPECT_EQ(l.densified(DType::bf16).replaced_source_bytes(), 0u);
  HostTensor w32(DType::f32, {24, 40}, 6, 0.5f);
  const Linear borrowed = Linear::from_weights(w32.view, {}, "w32");
  EXPECT_FALSE(borrowed.owns_weight());
  EXPECT_EQ(borrowed.replaced_source_bytes(), 0u);
  Linear lb = Linear::from_weights(w32.view, {}, "w32", DType::bf16);
  EXPECT_TRUE(lb.owns_weight());
  EXPECT_EQ(lb.weight().dtype, DType::bf16);
  EXPECT_EQ(lb.replaced_source_bytes(), 24u * 40u * 4u);
  HostTensor x(DType::f32, {3, 40}, 7);
  std::vector<float> got(3 * 24), want(3 * 24);
  l.forward(x.view.ptr<float>(), 3, got.data());
  linear_reference(w16.view, nullptr, x.view.ptr<float>(), 3, want.data(), 24);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4);
}

TEST(Linear, RejectsBadWeightsByName) {
  HostTensor w3(DType::f32, {2, 3, 4}, 1);
  try {
    Linear::from_weights(w3.view, {}, "layer.q_proj");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("layer.q_proj"), std::string::npos);
  }
  HostTensor w(DType::f32, {4, 3}, 1), b(DType::f32, {5}, 2);
  EXPECT_THROW(Linear::from_weights(w.view, b.view, "b"), ArgumentError);
  HostTensor wi(DType::i32, {4, 3}, 1, 0.f);
  EXPECT_THROW(Linear::from_weights(wi.view, {}, "i"), DTypeError);
}

// bf16 products: exact against the reference on bf16-rounded inputs (only f32 summation order differs), and
// close to the f32 result (one bf16 rounding of each input, relative 2^-9).
TEST(Linear, Bf16DotGemmMatchesRoundedReference) {
  // The backend named explicitly: runs where the CPU can, whatever ATTNZOO_BF16_DOT prefers.
  if (!bf16_dot_available()) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  for (const Case& c : {Case{9, 16, 32, DType::bf16, false}, Case{37, 100, 257, DType::bf16, true},
                        Case{200, 300, 640, DType::f32, true}, Case{13, 48, 3, DType::f32, false},
                        Case{400, 64, 130, DType::bf16, true}}) {
    HostTensor w(c.dtype, {c.N, c.K}, 1 + uint64_t(c.N), 0.5f), x(DType::f32, {c.T, c.K}, 2 + uint64_t(c.T), 1.f);
    HostTensor b(DType::f32, {c.N}, 3, 1.f);
    const float* bias = c.bias ? b.view.ptr<float>() : nullptr;
    std::vector<float> xr(size_t(c.T * c.K)), wr(size_t(c.N * c.K));
    for (size_t i = 0; i < xr.size(); ++i) xr[i] = bf16_to_f32(f32_to_bf16(x.view.ptr<float>()[i]));
    for (size_t i = 0; i < wr.size(); ++i) wr[i] = bf16_to_f32(f32_to_bf16(load_as_f32(w.view.data, c.dtype, int64_t(i))));
    const TensorView wrv = TensorView::contiguous(wr.data(), DType::f32, {c.N, c.K});
    std::vector<float> got(size_t(c.T * c.N), -1.f), rounded(got.size()), exact(got.size());
    linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, got.data(), c.N, LinearGemmBackend::bf16_dot);
    linear_reference(wrv, bias, xr.data(), c.T, rounded.data(), c.N);
    linear_reference(w.view, bias, x.view.ptr<float>(), c.T, exact.data(), c.N);
    double err = 0, dev = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, double(std::fabs(got[i] - rounded[i])));
      dev = std::max(dev, double(std::fabs(got[i] - exact[i])));
      scale = std::max(scale, double(std::fabs(exact[i])));
    }
    EXPECT_LT(err, 2e-5 * std::sqrt(double(c.K))) << "T=" << c.T << " N=" << c.N << " K=" << c.K;
    EXPECT_GT(dev, 0.0) << "inputs were not rounded: the test would not see a wrong path";
    EXPECT_LT(dev, 1e-2 * scale) << "T=" << c.T << " N=" << c.N << " K=" << c.K;
  }
}

TEST(Linear, Bf16DotGemmGivesTheSameBitsForFewAndManyRows) {
  // Up to 64 rows W is the tile kernel's A operand (no transpose of W), beyond it its B operand: the same pair
  // products in the same order, so a row's output must not depend on how many rows came with it.
  if (!bf16_dot_available()) GTEST_SKIP() << "no AVX-512-BF16 on this CPU";
  for (const Case& c : {Case{80, 100, 258, DType::bf16, true}, Case{70, 33, 131, DType::bf16, false},
                        Case{65, 48, 64, DType::f32, true}}) {
    HostTensor w(c.dtype, {c.N, c.K}, 11 + uint64_t(c.N), 0.5f), x(DType::f32, {c.T, c.K}, 12, 1.f);
    HostTensor b(DType::f32, {c.N}, 13, 1.f);
    const float* bias = c.bias ? b.view.ptr<float>() : nullptr;
    std::vector<float> many(size_t(c.T * c.N)), few(size_t(c.T * c.N));
    linear_gemm(w.view, bias, x.view.ptr<float>(), c.T, many.data(), c.N, LinearGemmBackend::bf16_dot);
    for (int64_t t0 = 0; t0 < c.T; t0 += 32) {  // chunks of 32 and the rest: the few-rows path
      const int64_t rows = std::min<int64_t>(32, c.T - t0);
      linear_gemm(w.view, bias, x.view.ptr<float>() + t0 * c.K, rows, few.data() + t0 * c.N, c.N,
                  LinearGemmBackend::bf16_dot);
    }
    EXPECT_EQ(few, many) << "T=" << c.T << " N=" << c.N << " K=" << c.K;
  }
}

TEST(Linear, MatmulPrecisionMediumRoutesAllButSingleTokens) {
  if (!bf16_tiles_enabled()) GTEST_SKIP() << "bf16 products widen to f32 on this CPU / target";
  ScopedMatmulPrecision restore(MatmulPrecision::highest);
  HostTensor w(DType::bf16, {64, 96}, 5, 0.5f), x(DType::f32, {32, 96}, 6, 1.f);
  std::vector<float> fast(32 * 64), exact(32 * 64), direct(32 * 64);
  linear_forward(w.view, nullptr, x.view.ptr<float>(), 32, exact.data(), 64);
  set_matmul_precision(MatmulPrecision::medium);
  linear_forward(w.view, nullptr, x.view.ptr<float>(), 32, fast.data(), 64);
  std::vector<float> one(64), one_exact(64);
  linear_forward(w.view, nullptr, x.view.ptr<float>(), 1, one.data(), 64);  // decode: still f32 products
  set_matmul_precision(MatmulPrecision::highest);
  linear_forward(w.view, nullptr, x.view.ptr<float>(), 1, one_exact.data(), 64);
  linear_gemm(w.view, nullptr, x.view.ptr<float>(), 32, direct.data(), 64, LinearGemmBackend::bf16_dot);
  EXPECT_EQ(fast, direct);
  // A batch of 4 decode rows is a product, not a bandwidth-bound GEMV: bf16 tiles too.
  std::vector<float> four(4 * 64), four_direct(4 * 64);
  set_matmul_precision(MatmulPrecision::medium);
  linear_forward(w.view, nullptr, x.view.ptr<float>(), 4, four.data(), 64);
  set_matmul_precision(MatmulPrecision::highest);
  linear_gemm(w.view, nullptr, x.view.ptr<float>(), 4, four_direct.data(), 64, LinearGemmBackend::bf16_dot);
  EXPECT_EQ(four, four_direct);
  EXPECT_NE(fast, exact);
  EXPECT_EQ(one, one_exact);
  EXPECT_EQ(parse_matmul_precision("medium"), MatmulPrecision::medium);
  EXPECT_THROW(parse_matmul_precision("low"), ArgumentError);
}

// The default "auto": a Linear whose weights were stored as bf16 on request multiplies several tokens on the bf16
// tiles; one holding f32 weights, or a bf16 checkpoint kept as it is under an f32 store, keeps f32 products.
TEST(Linear, MatmulPrecisionAutoFollowsTheStore) {
  EXPECT_EQ(parse_matmul_precision("auto"), MatmulPrecision::automatic);
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::automatic), "auto");
  EXPECT_EQ(matmul_precision(), MatmulPrecision::automatic) << "the process default";
  HostTensor wf(DType::f32, {64, 96}, 7, 0.5f), wb(DType::bf16, {64, 96}, 8, 0.5f), x(DType::f32, {32, 96}, 9, 1.f);
  const Linear rounded = Linear::from_weights(wf.view, {}, "rounded", DType::bf16);
  const Linear kept = Linear::from_weights(wb.view, {}, "kept", DType::f32);
  const Linear f32 = Linear::from_weights(wf.view, {}, "f32", DType::f32);
  EXPECT_TRUE(rounded.reduced_weights());
  EXPECT_FALSE(kept.reduced_weights());
  EXPECT_FALSE(f32.reduced_weights());
  for (const Linear* l : {&rounded, &kept, &f32}) {
    std::vector<float> got(32 * 64), exact(32 * 64), tiles(32 * 64);
    l->forward(x.view.ptr<float>(), 32, got.data());
    {
      ScopedMatmulPrecision highest(MatmulPrecision::highest);
      l->forward(x.view.ptr<float>(), 32, exact.data());
    }
    const bool bf16 = l->reduced_weights() && bf16_tiles_enabled();
    if (bf16) linear_gemm(l->weight(), nullptr, x.view.ptr<float>(), 32, tiles.data(), 64, LinearGemmBackend::bf16_dot);
    EXPECT_EQ(got, bf16 ? tiles : exact) << l->name();
  }
}

// A pool of `n` threads for the scope, the previous size back after.
class PoolOf {
 public:
  explicit PoolOf(int n) : previous_(ThreadPool::global().num_threads()) { ThreadPool::set_global_threads(n); }
  ~PoolOf() { ThreadPool::set_global_threads(previous_); }

 private:
  int previous_;
};

template <class Fn>
uint64_t dispatches_in(Fn&& fn) {
  const uint64_t before = ThreadPool::dispatch_count();
  fn();
  return ThreadPool::dispatch_count() - before;
}

// A decode step's fixed cost is its pool dispatches (each wakes the workers and waits for the slowest): SmolLM2's
// 576-wide projections are several tasks each, q / k / v share one dispatch and the whole MLP takes two.
TEST(Linear, DecodeProjectionsShareDispatches) {
  const PoolOf pool(2);
  const int64_t H = 576, KV = 192, I = 1536;
  HostTensor wq(DType::bf16, {H, H}, 1, 0.1f), wk(DType::bf16, {KV, H}, 2, 0.1f), wv(DType::bf16, {KV, H}, 3, 0.1f);
  HostTensor x(DType::f32, {1, H}, 4);
  const Linear q = Linear::from_weights(wq.view, {}, "q"), k = Linear::from_weights(wk.view, {}, "k"),
               v = Linear::from_weights(wv.view, {}, "v");
  std::vector<float> yq(static_cast<size_t>(H)), yk(static_cast<size_t>(KV)), yv(static_cast<size_t>(KV)),
      one(static_cast<size_t>(H));
  EXPECT_EQ(dispatches_in([&] { q.forward(x.view.ptr<float>(), 1, one.data()); }), 1u);  // the counter counts
  EXPECT_EQ(dispatches_in([&] {
              Linear::forward_shared({{&q, yq.data()}, {&k, yk.data()}, {&v, yv.data()}}, x.view.ptr<float>(), 1);
            }),
            1u);
  EXPECT_EQ(yq, one);  // fused, the same numbers

  HostTensor wg(DType::bf16, {I, H}, 5, 0.1f), wu(DType::bf16, {I, H}, 6, 0.1f), wd(DType::bf16, {H, I}, 7, 0.1f);
  const GatedMlp mlp(Linear::from_weights(wg.view, {}, "gate"), Linear::from_weights(wu.view, {}, "up"),
                     Linear::from_weights(wd.view, {}, "down"), Activation::silu, "mlp");
  std::vector<float> out(static_cast<size_t>(H));
  EXPECT_EQ(dispatches_in([&] { mlp.forward(x.view.ptr<float>(), 1, out.data()); }), 2u);
}

// Run by hand: test_layers --gtest_also_run_disabled_tests --gtest_filter='*Bench*' (ATTNZOO_THREADS=1 for one
// thread). Chooses the prefill backend. Times are the calling thread's CPU time (the machine may be shared), medians
// of 7; bf16 products run on AMX tiles where they run, else on vdpbf16ps.
TEST(Linear, DISABLED_BenchPrefillGemmBackends) {
  const auto cpu_seconds = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  for (const auto [T, N, K] : {std::array<int64_t, 3>{256, 2048, 1024}, std::array<int64_t, 3>{512, 4096, 2048}}) {
    HostTensor w(DType::bf16, {N, K}, 1, 0.1f), x(DType::f32, {T, K}, 2);
    std::vector<float> y(size_t(T * N));
    for (auto backend : {LinearGemmBackend::openblas, LinearGemmBackend::bf16_dot}) {
      if (backend == LinearGemmBackend::bf16_dot && !bf16_dot_available()) continue;
      std::vector<double> times;
      linear_gemm(w.view, nullptr, x.view.ptr<float>(), T, y.data(), N, backend);
      for (int r = 0; r < 7; ++r) {
        const double t0 = cpu_seconds();
        linear_gemm(w.view, nullptr, x.view.ptr<float>(), T, y.data(), N, backend);
        times.push_back(cpu_seconds() - t0);
      }
      std::sort(times.begin(), times.end());
      const double s = times[3];
      std::printf("T=%lld N=%lld K=%lld bf16 weights, %s: %.2f ms, %.1f GFLOP/s\n", (long long)T, (long long)N,
                  (long long)K,
                  backend == LinearGemmBackend::openblas ? "f32 products (openblas)"
                  : amx_bf16_enabled()                   ? "bf16 products (AMX tiles)"
                                                         : "bf16 products (vdpbf16ps)",
                  s * 1e3, 2.0 * double(T * N * K) / s * 1e-9);
    }
  }
}

}  // namespace
}  // namespace attnzoo
