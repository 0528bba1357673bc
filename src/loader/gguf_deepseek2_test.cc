// deepseek2 GGUF files (gguf_deepseek2.h) opened as Hugging Face checkpoints: the synthesized config and
// kv_b_proj joined back from attn_k_b / attn_v_b, and the refusals of malformed halves. Model-level agreement
// with transformers is tested from Python (python/tests/test_model_deepseek_v2.py / _v3.py).
#include "loader/gguf_deepseek2.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "loader/gguf_test_files.h"
#include "loader/model_dir.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using namespace testing;  // NOLINT: the GGUF spec helpers

constexpr uint32_t kF32 = 0, kU32 = 4;
constexpr int64_t kHeads = 2, kNope = 4, kV = 3, kRank = 4, kRope = 2;

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

// One layer, 2 heads: k_b [heads, rank, nope] holds 0.., v_b [heads, v, rank] holds 100.. (torch order).
GgufSpec deepseek2_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "deepseek2")};
  add_u32_keys(s, "deepseek2", {{"block_count", 1}, {"embedding_length", 8}, {"attention.head_count", kHeads},
                                {"attention.head_count_kv", 1}, {"attention.kv_lora_rank", kRank},
                                {"attention.key_length", kRank + kRope}, {"attention.value_length", kRank},
                                {"attention.key_length_mla", kNope + kRope}, {"attention.value_length_mla", kV},
                                {"rope.dimension_count", kRope}, {"vocab_size", 5}, {"expert_gating_func", 2}});
  s.tensors = {{"blk.0.attn_k_b.weight", {kNope, kRank, kHeads}, kF32, f32_bytes(iota(kNope * kRank * kHeads, 0)),
                std::nullopt},
               {"blk.0.attn_v_b.weight", {kRank, kV, kHeads}, kF32, f32_bytes(iota(kRank * kV * kHeads, 100)),
                std::nullopt}};
  return s;
}

ModelFiles open_spec(const ScratchDir& dir, const GgufSpec& s) {
  write_file(dir.path() / "m.gguf", gguf_bytes(s));
  return ModelFiles::open((dir.path() / "m.gguf").string());
}

TEST(GgufDeepseek2, KvBIsJoinedBackPerHead) {
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, deepseek2_spec());
  const Config& c = m.config();
  EXPECT_EQ(c.get_string_list("architectures"), std::vector<std::string>{"DeepseekV3ForCausalLM"});
  EXPECT_EQ(c.get_int("qk_nope_head_dim"), kNope);
  EXPECT_EQ(c.get_int("v_head_dim"), kV);
  EXPECT_EQ(c.get_int("qk_rope_head_dim"), kRope);
  EXPECT_EQ(c.get_int("num_key_value_heads"), kHeads);
  EXPECT_EQ(m.names(), std::vector<std::string>{"model.layers.0.self_attn.kv_b_proj.weight"});
  const TensorView t = m.tensor("model.layers.0.self_attn.kv_b_proj.weight");
  ASSERT_EQ(t.shape_str(), "[14, 4]");
  const float* w = t.ptr<float>();
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t j = 0; j < kRank; ++j) {
      for (int64_t i = 0; i < kNope; ++i)  // k rows: k_b[h, j, i] transposed
        EXPECT_EQ(w[(h * (kNope + kV) + i) * kRank + j], float((h * kRank + j) * kNope + i)) << h << " " << i << " " << j;
      for (int64_t i = 0; i < kV; ++i)  // v rows: v_b[h, i, j]
        EXPECT_EQ(w[(h * (kNope + kV) + kNope + i) * kRank + j], float(100 + (h * kV + i) * kRank + j));
    }
}

TEST(GgufDeepseek2, RefusalsAreNamed) {
  auto refused = [](const std::function<void(GgufSpec&)>& edit) {
    GgufSpec s = deepseek2_spec();
    edit(s);
    ScratchDir dir;
    return load_error_of([&] { open_spec(dir, s); });
  };
  EXPECT_NE(refused([](GgufSpec& s) { s.tensors.pop_back(); }).find("'blk.0.attn_v_b.weight' is missing"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) {
              s.tensors[1] = {"blk.0.attn_v_b.weight", {kRank, kV * kHeads, 1}, kF32,
                              f32_bytes(iota(kRank * kV * kHeads, 0)), std::nullopt};
            }).find("tensor 'blk.0.attn_k_b.weight': expected [heads, kv_lora_rank, qk_nope]"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs.back() = kv_scalar<uint32_t>("deepseek2.expert_gating_func", kU32, 3); })
                .find("key 'deepseek2.expert_gating_func'"),
            std::string::npos);
}

}  // namespace
}  // namespace attnzoo
