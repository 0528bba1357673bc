#include "layers/mla_mixer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "testing/mixer_harness.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct MlaFixture {
  MlaConfig c{.hidden = 32, .num_heads = 3, .q_lora_rank = 24, .kv_lora_rank = 16, .qk_nope_head_dim = 8,
              .qk_rope_head_dim = 4, .v_head_dim = 8, .norm_eps = 1e-6f, .scale = 0.3f};
  HostTensor q_a{DType::f32, {c.q_lora_rank, c.hidden}, 1, 0.2f}, q_a_bias{DType::f32, {c.q_lora_rank}, 2, 0.2f};
  HostTensor q_norm{DType::f32, {c.q_lora_rank}, 3, 0.3f};
  HostTensor q_b{DType::bf16, {c.num_heads * c.qk_head_dim(), c.q_lora_rank}, 4, 0.2f};
  HostTensor kv_a{DType::f32, {c.latent_dim(), c.hidden}, 5, 0.2f}, kv_norm{DType::f32, {c.kv_lora_rank}, 6, 0.3f};
  HostTensor kv_b{DType::f32, {c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}, 7, 0.3f};
  HostTensor o{DType::f32, {c.hidden, c.num_heads * c.v_head_dim}, 8, 0.2f};
  RopeConfig rc{.head_dim = c.qk_rope_head_dim, .theta = 100.0, .layout = RopeLayout::interleaved};

  MlaFixture() {
    for (HostTensor* n : {&q_norm, &kv_norm})
      for (int64_t i = 0; i < n->numel(); ++i) n->view.ptr<float>()[i] += 1.f;
  }
  MlaLayerWeights weights() const {
    MlaLayerWeights w;
    w.q_a_proj.emplace(Linear::from_weights(q_a.view, q_a_bias.view, "q_a"));
    w.q_a_norm.emplace(q_norm.view, c.norm_eps, false, "q_a_norm");
    w.q_b_proj.emplace(Linear::from_weights(q_b.view, {}, "q_b"));
    w.kv_a_proj = Linear::from_weights(kv_a.view, {}, "kv_a");
    w.kv_a_norm = RmsNorm(kv_norm.view, c.norm_eps, false, "kv_a_norm");
    w.kv_b_proj = Linear::from_weights(kv_b.view, {}, "kv_b");
    w.o_proj = Linear::from_weights(o.view, {}, "o");
    return w;
  }
  MlaMixer build() const { return MlaMixer(c, weights(), Rope(rc), "mla"); }

  // The layer written plainly: double-accumulation projections and norms, the reference RoPE and the naive
  // MLA reference over the whole sequence.
  std::vector<float> reference(const float* x, int64_t T) const {
    const int64_t H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim(), dn = c.qk_nope_head_dim;
    std::vector<float> qa(size_t(T * c.q_lora_rank)), q(size_t(T * H * Dq)), lat(size_t(T * L));
    linear_reference(q_a.view, q_a_bias.view.ptr<float>(), x, T, qa.data(), c.q_lora_rank);
    rms_norm_reference(qa.data(), T, c.q_lora_rank, c.q_lora_rank, q_norm.view.ptr<float>(), c.norm_eps, qa.data(),
                       c.q_lora_rank);
    linear_reference(q_b.view, nullptr, qa.data(), T, q.data(), H * Dq);
    linear_reference(kv_a.view, nullptr, x, T, lat.data(), L);
    rms_norm_reference(lat.data(), T, c.kv_lora_rank, L, kv_norm.view.ptr<float>(), c.norm_eps, lat.data(), L);
    const Rope rope(rc);
    std::vector<int32_t> pos(static_cast<size_t>(T)), head_pos(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t) {
      pos[size_t(t)] = int32_t(t);
      for (int64_t h = 0; h < H; ++h) head_pos[size_t(t * H + h)] = int32_t(t);
    }
    rope_reference(rope, q.data() + dn, T * H, 1, Dq, head_pos.data());
    rope_reference(rope, lat.data() + c.kv_lora_rank, T, 1, L, pos.data());
    std::vector<float> attn(size_t(T * H * c.v_head_dim)), y(size_t(T * c.hidden));
    MlaWeights mw{kv_b.view, H, dn, c.qk_rope_head_dim, c.v_head_dim, c.kv_lora_rank};
    MlaOptions opts;
    opts.scale = c.scale;
    mla_prefill_reference(TensorView::contiguous(q.data(), DType::f32, {1, T, H, Dq}),
                          TensorView::contiguous(lat.data(), DType::f32, {1, T, L}), mw,
                          TensorView::contiguous(attn.data(), DType::f32, {1, T, H, c.v_head_dim}), opts);
    linear_reference(o.view, nullptr, attn.data(), T, y.data(), c.hidden);
    return y;
  }
};

std::vector<float> run_pieces(const MlaMixer& m, const float* x, const std::vector<int64_t>& pieces,
                              int64_t* cached = nullptr) {
  const int64_t H = m.config().hidden;
  int64_t T = 0;
  for (int64_t p : pieces) T += p;
  std::vector<float> y(size_t(T * H));
  // Odd blocks handed out shuffled: the latent rows of one sequence are scattered over the pool.
  testing::MixerHarness harness(m, /*block_tokens=*/5, DType::f32, /*shuffle_seed=*/7);
  const auto s = harness.new_sequence();
  int64_t at = 0;
  for (int64_t p : pieces) {
    Batch b;
    b.add(*s, std::vector<int32_t>(size_t(p), 0));
    harness.forward(x + at * H, b, y.data() + at * H);
    at += p;
  }
  if (cached) *cached = s->length();
  return y;
}

TEST(MlaMixer, MatchesPlainDefinitionInAnyPieces) {
  MlaFixture f;
  const MlaMixer m = f.build();
  const int64_t T = 45;
  HostTensor x(DType::f32, {T, f.c.hidden}, 9);
  const auto want = f.reference(x.view.ptr<float>(), T);
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  ASSERT_GT(scale, 1e-2);
  // 45 at once (naive prefill); decode-sized pieces (absorbed); 1-token steps; all continuing the latent cache.
  for (const auto& pieces : std::vector<std::vector<int64_t>>{{45}, {1, 7, 20, 3, 14}, std::vector<int64_t>(45, 1)}) {
    int64_t cached = 0;
    const auto got = run_pieces(m, x.view.ptr<float>(), pieces, &cached);
    EXPECT_EQ(cached, T);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + scale)) << i;
  }
}

TEST(MlaMixer, CacheSpecIsOneLatentRowPerToken) {
  MlaFixture f;
  const MlaMixer m = f.build();
  const CacheSpec spec = m.cache_spec();
  EXPECT_EQ(spec.kind, CacheKind::latent);
  EXPECT_EQ(spec.bytes_per_token(), (16 + 4) * 4);
  EXPECT_EQ(spec.fixed_bytes(), 0);
  EXPECT_EQ(spec.bytes_for(17, 16), 32 * (16 + 4) * 4);  // two whole blocks
  EXPECT_EQ(m.kind(), "mla");
}

TEST(MlaMixer, RejectsMismatchedWeights) {
  MlaFixture f;
  MlaLayerWeights w = f.weights();
  w.kv_a_proj = Linear::from_weights(f.o.view, {}, "kv_a");
  try {
    MlaMixer(f.c, std::move(w), Rope(f.rc), "layer3");
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("layer3.kv_a_proj_with_mqa.weight"), std::string::npos) << e.what();
  }
  MlaConfig no_lora = f.c;
  no_lora.q_lora_rank = 0;  // needs q_proj, which the LoRA weights do not provide
  EXPECT_THROW(MlaMixer(no_lora, f.weights(), Rope(f.rc), "mla"), ArgumentError);
  RopeConfig wide = f.rc;
  wide.head_dim = 8;
  EXPECT_THROW(MlaMixer(f.c, f.weights(), Rope(wide), "mla"), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
