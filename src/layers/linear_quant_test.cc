// Linear and Embedding over block-quantized (GGUF) weights: every forward path against double accumulation over
// the reference-dequantized weights, the tied head over a quantized table, and MoE experts that are quantized.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/threads.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/matmul_precision.h"
#include "layers/mlp.h"
#include "layers/moe.h"
#include "kernels/quant/quant.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

// Max |got - want| relative to the largest |want| (the outputs are sums of ~K products of similar size).
double rel_max_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / scale;
}

TEST(LinearQuant, ForwardMatchesReferenceOnEveryPath) {
  const int64_t N = 70, K = 512;
  for (QuantType t : {QuantType::Q4_0, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K, QuantType::Q5_1,
                      QuantType::IQ4_NL, QuantType::IQ4_XS}) {
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 3 + uint64_t(t));
    HostTensor b(DType::f32, {N}, 4);
    const Linear l = Linear::from_quantized(raw.data(), raw.size(), t, N, K, b.view, "blk.0.ffn_up.weight");
    EXPECT_TRUE(l.is_quantized());
    EXPECT_FALSE(l.owns_weight());
    EXPECT_EQ(l.weight_bytes(), raw.size());
    EXPECT_EQ(l.shape_str(), std::string("[70, 512] ") + quant_type_name(t));
    EXPECT_THROW(l.weight(), ArgumentError);
    for (int64_t T : {1, 5, 9, 16, 40, 64}) {  // GEMV and GEMM (dequantized panels)
      HostTensor x(DType::f32, {T, K}, 5 + uint64_t(T));
      std::vector<float> want(size_t(T * N));
      quant_matmul_reference(l.matrix(), b.view.ptr<float>(), x.view.ptr<float>(), T, want.data(), N);
      // highest: f32 activations and panels, as exact as the reference; auto (the default, for block weights)
      // and medium: 8-bit activations in the GEMV, bf16 panels in the GEMM where the CPU has bf16 dots.
      for (MatmulPrecision p : {MatmulPrecision::highest, MatmulPrecision::automatic, MatmulPrecision::medium}) {
        ScopedMatmulPrecision scope(p);
        std::vector<float> got(want.size());
        l.forward(x.view.ptr<float>(), T, got.data());
        const double e = rel_max_error(got, want);
        const bool reduced = p != MatmulPrecision::highest && (T <= kGemvMaxTokens || bf16_tiles_enabled());
        EXPECT_LT(e, reduced ? 2e-2 : 1e-5) << quant_type_name(t) << " T=" << T << " " << matmul_precision_name(p);
        if (reduced) EXPECT_GT(e, 0.0) << matmul_precision_name(p) << " did not round: the reduced path was not taken";
      }
    }
    // A densified copy computes the same product in f32.
    ScopedMatmulPrecision highest(MatmulPrecision::highest);
    const Linear dense = l.densified();
    EXPECT_FALSE(dense.is_quantized());
    HostTensor x(DType::f32, {20, K}, 9);
    std::vector<float> a(20 * N), c(20 * N);
    l.forward(x.view.ptr<float>(), 20, a.data());
    dense.forward(x.view.ptr<float>(), 20, c.data());
    EXPECT_LT(rel_max_error(a, c), 1e-5);
  }
}

TEST(LinearQuant, StridedOutputAndF16Bytes) {
  const int64_t N = 16, K = 64, T = 3, ldy = 40;
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_K, N, 256, 1);
  const Linear l = Linear::from_quantized(raw.data(), raw.size(), QuantType::Q4_K, N, 256, {}, "w");
  HostTensor x(DType::f32, {T, 256}, 2);
  std::vector<float> y(size_t(T * ldy), -5.f), want(size_t(T * N));
  l.forward(x.view.ptr<float>(), T, y.data() + 8, ldy);
  quant_matmul_reference(l.matrix(), nullptr, x.view.ptr<float>(), T, want.data(), N);
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) EXPECT_NEAR(y[size_t(t * ldy + 8 + n)], want[size_t(t * N + n)], 2e-2 * scale);
    EXPECT_EQ(y[size_t(t * ldy)], -5.f);  // columns outside the output untouched
  }
  // F16 bytes through the quantized entry point become an owned f32 copy, as from_weights does.
  const std::vector<uint8_t> h = testing::random_quant_rows(QuantType::F16, N, K, 3);
  const Linear lh = Linear::from_quantized(h.data(), h.size(), QuantType::F16, N, K, {}, "h");
  EXPECT_TRUE(lh.owns_weight());
  EXPECT_EQ(lh.weight().dtype, DType::f32);
  const Linear lb = Linear::from_quantized(h.data(), h.size(), QuantType::F16, N, K, {}, "h", DType::bf16);
  EXPECT_TRUE(lb.owns_weight());
  EXPECT_EQ(lb.weight().dtype, DType::bf16);
}

TEST(LinearQuant, RejectsBadBytesNamingTheTensor) {
  std::vector<uint8_t> raw(18 * 8);
  auto what = [&](QuantType t, int64_t out, int64_t in) {
    try {
      Linear::from_quantized(raw.data(), raw.size(), t, out, in, {}, "blk.3.attn_v.weight");
    } catch (const ArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(what(QuantType::Q4_0, 8, 64).find("blk.3.attn_v.weight"), std::string::npos);  // needs 16 blocks
  EXPECT_NE(what(QuantType::Q4_0, 2, 48).find("whole number"), std::string::npos);
  EXPECT_NE(what(QuantType::IQ2_XXS, 1, 256).find("IQ2_XXS"), std::string::npos);
  EXPECT_EQ(what(QuantType::Q4_0, 4, 64), "no error");
}

TEST(EmbeddingQuant, LookupDequantizesRowsAndTiedHeadReadsTheBlocks) {
  const int64_t V = 40, D = 256;
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q6_K, V, D, 8);
  const Embedding e = Embedding::from_quantized(raw.data(), raw.size(), QuantType::Q6_K, V, D, "token_embd.weight");
  EXPECT_TRUE(e.is_quantized());
  EXPECT_EQ(e.vocab_size(), V);
  EXPECT_THROW(e.table(), ArgumentError);
  const int32_t ids[3] = {39, 0, 17};
  std::vector<float> got(3 * D), want(D);
  e.lookup(ids, 3, got.data(), 2.f);
  for (int i = 0; i < 3; ++i) {
    dequantize_row_reference(QuantType::Q6_K, e.matrix().row(ids[i]), want.data(), D);
    for (int64_t k = 0; k < D; ++k) ASSERT_EQ(got[size_t(i * D + k)], 2.f * want[size_t(k)]);
  }
  // The tied output head: a Linear over the same blocks, nothing copied.
  const Linear head = Linear::from_matrix(e.matrix(), {}, "token_embd.weight");
  EXPECT_EQ(head.matrix().data, raw.data());
  HostTensor x(DType::f32, {2, D}, 9);
  std::vector<float> logits(2 * V), ref(2 * V);
  head.forward(x.view.ptr<float>(), 2, logits.data());
  quant_matmul_reference(e.matrix(), nullptr, x.view.ptr<float>(), 2, ref.data(), V);
  EXPECT_LT(rel_max_error(logits, ref), 2e-2);
  EXPECT_THROW(Embedding::from_quantized(raw.data(), raw.size() - 1, QuantType::Q6_K, V, D, "t"), ArgumentError);
}

// MoE experts are Linears: quantized experts give what their dequantized f32 copies give (up to the 8-bit
// activations of decode).
TEST(MoeQuant, QuantizedExpertsMatchTheirDenseCopies) {
  const int64_t H = 64, I = 96, E = 4;
  std::vector<std::vector<uint8_t>> bytes;
  auto expert = [&](bool dense, int64_t e) {
    auto lin = [&](int idx, int64_t out, int64_t in) {
      const Linear l = Linear::from_quantized(bytes[size_t(3 * e + idx)].data(), bytes[size_t(3 * e + idx)].size(),
                                              QuantType::Q8_0, out, in, {}, "expert");
      return dense ? l.densified() : l;
    };
    return GatedMlp(lin(0, I, H), lin(1, I, H), lin(2, H, I), Activation::silu, "mlp");
  };
  for (int64_t e = 0; e < E; ++e)
    for (int i = 0; i < 3; ++i)
      bytes.push_back(testing::random_quant_rows(QuantType::Q8_0, i < 2 ? I : H, i < 2 ? H : I, 20 + uint64_t(3 * e + i)));
  HostTensor router(DType::f32, {E, H}, 1);
  auto build = [&](bool dense) {
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < E; ++e) experts.push_back(expert(dense, e));
    return SparseMoe({2, MoeRouter::softmax, true}, Linear::from_weights(router.view, {}, "router"), std::move(experts),
                     {}, {}, "moe");
  };
  const SparseMoe quant = build(false), dense = build(true);
  // A prompt's experts on the panels give their dense copies' products; on the integer rows (what "auto" picks on
  // VNNI CPUs without AMX) decode's 8-bit activations.
  const PromptInt8Rows saved = linear_prompt_int8_rows();
  for (PromptInt8Rows mode : {PromptInt8Rows::off, PromptInt8Rows::on}) {
    set_linear_prompt_int8_rows(mode);
    for (int64_t T : {1, 30}) {
      HostTensor x(DType::f32, {T, H}, 2 + uint64_t(T));
      std::vector<float> a(size_t(T * H)), b(a.size());
      quant.forward(x.view.ptr<float>(), T, a.data());
      dense.forward(x.view.ptr<float>(), T, b.data());
      EXPECT_LT(rel_max_error(a, b), T == 1 || mode == PromptInt8Rows::on ? 3e-2 : 1e-5) << "T=" << T;
    }
  }
  set_linear_prompt_int8_rows(saved);
}

// want[i]: projection i's forward() of x [T, in]; got[i] the same size, filled with another value for the shared call.
void forward_one_by_one(const Linear* ls, int n, const float* x, int64_t T, std::vector<float>* want,
                        std::vector<float>* got) {
  for (int i = 0; i < n; ++i) {
    want[i].assign(size_t(T * ls[i].out_features()), -1.f);
    got[i].assign(want[i].size(), -2.f);
    ls[i].forward(x, T, want[i].data());
  }
}

// forward_shared (q / k / v, gate / up in one dispatch) gives exactly what forward() gives one projection at a
// time: block, bf16 and f32 weights mixed, with and without bias, at decode sizes (fused), past them and under
// matmul precision "medium" (both one by one).
TEST(LinearQuant, ForwardSharedEqualsForwardOneByOne) {
  const int64_t K = 256;
  const std::vector<uint8_t> q4k = testing::random_quant_rows(QuantType::Q4_K, 70, K, 21);
  const std::vector<uint8_t> q41 = testing::random_quant_rows(QuantType::Q4_1, 33, K, 22);
  HostTensor wb(DType::bf16, {40, K}, 23), wf(DType::f32, {9, K}, 24), b(DType::f32, {70}, 25);
  const TensorView none;
  const Linear ls[4] = {Linear::from_quantized(q4k.data(), q4k.size(), QuantType::Q4_K, 70, K, b.view, "q"),
                        Linear::from_quantized(q41.data(), q41.size(), QuantType::Q4_1, 33, K, none, "k"),
                        Linear::from_weights(wb.view, none, "v", DType::bf16),
                        Linear::from_weights(wf.view, none, "g", DType::f32)};
  for (MatmulPrecision p : {MatmulPrecision::highest, MatmulPrecision::automatic, MatmulPrecision::medium})
    for (int64_t T : {1, 3, 8, 11}) {
      ScopedMatmulPrecision scope(p);
      HostTensor x(DType::f32, {T, K}, 30 + uint64_t(T));
      std::vector<float> want[4], got[4];
      forward_one_by_one(ls, 4, x.view.ptr<float>(), T, want, got);
      Linear::forward_shared({{&ls[0], got[0].data()}, {&ls[1], got[1].data()}, {&ls[2], got[2].data()},
                              {&ls[3], got[3].data()}},
                             x.view.ptr<float>(), T);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << "projection " << i << " T=" << T;
    }
}

// Block weights that all take the integer rows (matmul precision "auto", decode sizes) quantize x once and run
// in one dispatch: regrouped and GGUF rows, two formats, a bias, on every target; the bits are forward()'s.
// A format whose integer rows differ (Q5_0's AVX2 rows beside Q4_0's VNNI ones) shares them too, each matrix on
// its own rows.
TEST(LinearQuant, ForwardSharedQuantizesTheInputOnceForBlockWeights) {
  const int64_t K = 512;
  const std::vector<uint8_t> q40 = testing::random_quant_rows(QuantType::Q4_0, 48, K, 61);
  const std::vector<uint8_t> q6k = testing::random_quant_rows(QuantType::Q6_K, 32, K, 62);
  const std::vector<uint8_t> q41 = testing::random_quant_rows(QuantType::Q4_1, 33, K, 63);
  const std::vector<uint8_t> q50 = testing::random_quant_rows(QuantType::Q5_0, 16, K, 64);
  HostTensor b(DType::f32, {48}, 65);
  const TensorView none;
  const Linear ls[4] = {Linear::from_quantized(q40.data(), q40.size(), QuantType::Q4_0, 48, K, b.view, "q"),
                        Linear::from_quantized(q6k.data(), q6k.size(), QuantType::Q6_K, 32, K, none, "k"),
                        Linear::from_quantized(q41.data(), q41.size(), QuantType::Q4_1, 33, K, none, "v"),
                        Linear::from_quantized(q50.data(), q50.size(), QuantType::Q5_0, 16, K, none, "u")};
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  const int threads = ThreadPool::global().num_threads();
  ThreadPool::set_global_threads(2);  // a pool with workers counts its dispatches
  testing::for_each_target([&](Target target) {
    for (int64_t T : {1, 3, 8}) {
      HostTensor x(DType::f32, {T, K}, 70 + uint64_t(T));
      std::vector<float> want[4], got[4];
      forward_one_by_one(ls, 4, x.view.ptr<float>(), T, want, got);
      const uint64_t quantized = quant_gemv_quantizations(), dispatched = ThreadPool::dispatch_count();
      Linear::forward_shared({{&ls[0], got[0].data()}, {&ls[1], got[1].data()}, {&ls[2], got[2].data()}},
                             x.view.ptr<float>(), T);
      EXPECT_EQ(quant_gemv_quantizations() - quantized, 1u) << target_name(target) << " T=" << T;
      EXPECT_EQ(ThreadPool::dispatch_count() - dispatched, 1u) << target_name(target) << " T=" << T;
      for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[i]) << target_name(target) << " projection " << i << " T=" << T;
      // Q5_0 has no VNNI rows: it takes the AVX2 or portable ones, over the same quantization.
      const uint64_t before = quant_gemv_quantizations(), before_dispatch = ThreadPool::dispatch_count();
      Linear::forward_shared({{&ls[0], got[0].data()}, {&ls[3], got[3].data()}}, x.view.ptr<float>(), T);
      EXPECT_EQ(quant_gemv_quantizations() - before, 1u) << target_name(target) << " T=" << T;
      EXPECT_EQ(ThreadPool::dispatch_count() - before_dispatch, 1u) << target_name(target) << " T=" << T;
      EXPECT_EQ(got[0], want[0]) << target_name(target) << " T=" << T;
      EXPECT_EQ(got[3], want[3]) << target_name(target) << " T=" << T;
    }
  });
  ThreadPool::set_global_threads(threads);
}

// Dense weights alone under "medium": several rows go to the bf16 tiles in forward(), so the shared call must too.
TEST(LinearQuant, ForwardSharedOfDenseWeightsFollowsTheMatmulPrecision) {
  const int64_t K = 256;
  HostTensor wb(DType::bf16, {48, K}, 41), wf(DType::f32, {40, K}, 42);
  const TensorView none;
  const Linear ls[2] = {Linear::from_weights(wb.view, none, "up", DType::bf16),
                        Linear::from_weights(wf.view, none, "gate", DType::f32)};
  for (MatmulPrecision p : {MatmulPrecision::highest, MatmulPrecision::automatic, MatmulPrecision::medium})
    for (int64_t T : {1, 2, 8}) {
      ScopedMatmulPrecision scope(p);
      HostTensor x(DType::f32, {T, K}, 50 + uint64_t(T));
      std::vector<float> want[2], got[2];
      forward_one_by_one(ls, 2, x.view.ptr<float>(), T, want, got);
      Linear::forward_shared({{&ls[0], got[0].data()}, {&ls[1], got[1].data()}}, x.view.ptr<float>(), T);
      for (int i = 0; i < 2; ++i) EXPECT_EQ(got[i], want[i]) << "projection " << i << " T=" << T;
    }
}

// Prompts (T > 8) on the integer rows: q / k / v over one x quantize it once and run in one dispatch (plus the
// quantization's own past 16 rows), on every format the VNNI rows handle, regrouped rows (48, 64) beside GGUF
// ones (33), a bias, K off a multiple of 256 (and of 64) where the blocks allow, on every target; each y is
// forward()'s, which quantizes x itself, to the bit. Projections whose integer rows differ (Q5_0 beside Q4_0
// where the VNNI rows run, IQ4 regrouped beside IQ4 GGUF rows on AVX2) share it too, each on its own rows.
TEST(LinearQuant, ForwardSharedQuantizesAPromptOnceOnTheIntegerRows) {
  struct PromptInt8On {
    PromptInt8Rows saved = linear_prompt_int8_rows();
    PromptInt8On() { set_linear_prompt_int8_rows(PromptInt8Rows::on); }
    ~PromptInt8On() { set_linear_prompt_int8_rows(saved); }
  } on;
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  const int threads = ThreadPool::global().num_threads();
  ThreadPool::set_global_threads(2);  // a pool with workers counts its dispatches
  const TensorView none;
  for (QuantType t : {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q8_0, QuantType::IQ4_NL, QuantType::Q4_K,
                      QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_XS}) {
    const int64_t K = quant_type_info(uint32_t(t))->block_elems == 32 ? 160 : 768;
    const int64_t rows[3] = {64, 33, 48};
    std::vector<uint8_t> raw[3];
    for (int i = 0; i < 3; ++i) raw[i] = testing::random_quant_rows(t, rows[i], K, 80 + 3 * uint64_t(t) + uint64_t(i));
    HostTensor b(DType::f32, {rows[0]}, 81);
    const Linear ls[3] = {Linear::from_quantized(raw[0].data(), raw[0].size(), t, rows[0], K, b.view, "q"),
                          Linear::from_quantized(raw[1].data(), raw[1].size(), t, rows[1], K, none, "k"),
                          Linear::from_quantized(raw[2].data(), raw[2].size(), t, rows[2], K, none, "v")};
    testing::for_each_target([&](Target target) {
      for (int64_t T : {9, 16, 100, 513}) {
        const std::string at = std::string(quant_type_name(t)) + " " + target_name(target) + " T=" + std::to_string(T);
        HostTensor x(DType::f32, {T, K}, 90 + uint64_t(T));
        std::vector<float> want[3], got[3];
        const uint64_t alone = quant_gemv_quantizations();
        forward_one_by_one(ls, 3, x.view.ptr<float>(), T, want, got);
        EXPECT_EQ(quant_gemv_quantizations() - alone, 3u) << at << ": forward() took another route";
        const uint64_t quantized = quant_gemv_quantizations(), dispatched = ThreadPool::dispatch_count();
        Linear::forward_shared({{&ls[0], got[0].data()}, {&ls[1], got[1].data()}, {&ls[2], got[2].data()}},
                               x.view.ptr<float>(), T);
        // IQ4 rows regrouped take the AVX2 rows where VNNI does not run, GGUF ones the portable rows: one
        // quantization writes the int16 copy for the one and the 8-bit rows for the others.
        EXPECT_EQ(quant_gemv_quantizations() - quantized, 1u) << at;
        EXPECT_EQ(ThreadPool::dispatch_count() - dispatched, T > 16 ? 2u : 1u) << at;
        for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[i]) << at << " projection " << i;
      }
    });
  }
  // Q5_0 has no VNNI rows: beside Q4_0 it takes the AVX2 or portable ones there, over the one quantization.
  const int64_t K = 256, T = 40;
  const std::vector<uint8_t> q40 = testing::random_quant_rows(QuantType::Q4_0, 32, K, 95);
  const std::vector<uint8_t> q50 = testing::random_quant_rows(QuantType::Q5_0, 16, K, 96);
  const Linear pair[2] = {Linear::from_quantized(q40.data(), q40.size(), QuantType::Q4_0, 32, K, none, "gate"),
                          Linear::from_quantized(q50.data(), q50.size(), QuantType::Q5_0, 16, K, none, "up")};
  HostTensor x(DType::f32, {T, K}, 97);
  std::vector<float> want[2], got[2];
  forward_one_by_one(pair, 2, x.view.ptr<float>(), T, want, got);
  const uint64_t before = quant_gemv_quantizations();
  Linear::forward_shared({{&pair[0], got[0].data()}, {&pair[1], got[1].data()}}, x.view.ptr<float>(), T);
  EXPECT_EQ(quant_gemv_quantizations() - before, 1u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(got[i], want[i]) << "projection " << i;
  ThreadPool::set_global_threads(threads);
}

// A gated MLP over block weights quantizes a prompt's x once for gate and up, and the hidden state once for down:
// two quantizations per call where each projection quantizing its own input made three.
TEST(LinearQuant, GatedMlpQuantizesEachInputOfAPromptOnce) {
  struct PromptInt8On {
    PromptInt8Rows saved = linear_prompt_int8_rows();
    PromptInt8On() { set_linear_prompt_int8_rows(PromptInt8Rows::on); }
    ~PromptInt8On() { set_linear_prompt_int8_rows(saved); }
  } on;
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  const int64_t H = 128, I = 192, T = 37;
  const TensorView none;
  const std::vector<uint8_t> g = testing::random_quant_rows(QuantType::Q4_1, I, H, 101);
  const std::vector<uint8_t> u = testing::random_quant_rows(QuantType::Q4_1, I, H, 102);
  const std::vector<uint8_t> d = testing::random_quant_rows(QuantType::Q4_1, H, I, 103);
  const GatedMlp mlp(Linear::from_quantized(g.data(), g.size(), QuantType::Q4_1, I, H, none, "gate"),
                     Linear::from_quantized(u.data(), u.size(), QuantType::Q4_1, I, H, none, "up"),
                     Linear::from_quantized(d.data(), d.size(), QuantType::Q4_1, H, I, none, "down"), Activation::silu,
                     "mlp");
  HostTensor x(DType::f32, {T, H}, 104);
  std::vector<float> y(size_t(T * H));
  const uint64_t before = quant_gemv_quantizations();
  mlp.forward(x.view.ptr<float>(), T, y.data());
  EXPECT_EQ(quant_gemv_quantizations() - before, 2u);
}

// Projections written side by side into columns of one buffer (each y with the buffer's row stride, as the KDA
// and Gated DeltaNet mixers pass them): block weights of three formats (regrouped rows and GGUF rows) share one
// quantization, a dense f32 router and a bf16 projection beside them take their own routes, and every column is
// forward()'s to the bit; the padding past the columns is never written.
TEST(LinearQuant, ForwardSharedWritesStridedColumnsGroupedByRoute) {
  struct PromptInt8On {
    PromptInt8Rows saved = linear_prompt_int8_rows();
    PromptInt8On() { set_linear_prompt_int8_rows(PromptInt8Rows::on); }
    ~PromptInt8On() { set_linear_prompt_int8_rows(saved); }
  } on;
  const int64_t K = 256;
  const std::vector<uint8_t> q4k = testing::random_quant_rows(QuantType::Q4_K, 48, K, 131);
  const std::vector<uint8_t> q80 = testing::random_quant_rows(QuantType::Q8_0, 33, K, 132);
  const std::vector<uint8_t> q40 = testing::random_quant_rows(QuantType::Q4_0, 16, K, 133);
  HostTensor wr(DType::f32, {5, K}, 134, 0.1f), wb(DType::f32, {12, K}, 135, 0.1f), b(DType::f32, {33}, 136);
  const TensorView none;
  const Linear ls[5] = {Linear::from_quantized(q4k.data(), q4k.size(), QuantType::Q4_K, 48, K, none, "q"),
                        Linear::from_quantized(q80.data(), q80.size(), QuantType::Q8_0, 33, K, b.view, "k"),
                        Linear::from_quantized(q40.data(), q40.size(), QuantType::Q4_0, 16, K, none, "v"),
                        Linear::from_weights(wr.view, none, "router", DType::f32),
                        Linear::from_weights(wb.view, none, "b", DType::bf16)};
  int64_t col[6] = {0};
  for (int i = 0; i < 5; ++i) col[i + 1] = col[i] + ls[i].out_features();
  const int64_t ld = col[5] + 3;
  for (MatmulPrecision p : {MatmulPrecision::automatic, MatmulPrecision::highest, MatmulPrecision::medium})
    for (int64_t T : {1, 3, 8, 9, 64}) {
      ScopedMatmulPrecision scope(p);
      const std::string at = "T=" + std::to_string(T) + " precision " + std::to_string(int(p));
      HostTensor x(DType::f32, {T, K}, 140 + uint64_t(T));
      std::vector<float> want(size_t(T * ld), -1.f), got(size_t(T * ld), -1.f);
      const uint64_t alone = quant_gemv_quantizations();
      for (int i = 0; i < 5; ++i) ls[i].forward(x.view.ptr<float>(), T, want.data() + col[i], ld);
      const uint64_t one_by_one = quant_gemv_quantizations() - alone;
      const uint64_t before = quant_gemv_quantizations();
      Linear::forward_shared({{&ls[0], got.data() + col[0], ld}, {&ls[1], got.data() + col[1], ld},
                              {&ls[2], got.data() + col[2], ld}, {&ls[3], got.data() + col[3], ld},
                              {&ls[4], got.data() + col[4], ld}},
                             x.view.ptr<float>(), T);
      EXPECT_EQ(quant_gemv_quantizations() - before, p == MatmulPrecision::highest ? 0u : 1u) << at;
      EXPECT_EQ(one_by_one, p == MatmulPrecision::highest ? 0u : 3u) << at;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << at;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = col[5]; j < ld; ++j) EXPECT_EQ(got[size_t(t * ld + j)], -1.f) << at;
    }
  // A stride narrower than the projection is refused by name, as is a missing output.
  std::vector<float> y(64 * 48);
  HostTensor x(DType::f32, {1, K}, 150);
  EXPECT_THROW(Linear::forward_shared({{&ls[0], y.data(), 40}}, x.view.ptr<float>(), 1), ArgumentError);
  EXPECT_THROW(Linear::forward_shared({{&ls[0], nullptr}}, x.view.ptr<float>(), 1), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
