// Malicious GGUF files for the Hugging Face view (gguf_checkpoint.h, gguf_hybrids.h): metadata whose counts and
// sizes would overflow the offset arithmetic, allocate without bound or loop for hours. Each must be refused with
// a LoadError naming the file and the key or tensor, at once, without reading out of bounds (the sanitizer build
// runs this too).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <functional>

#include "loader/config.h"
#include "loader/gguf_checkpoint.h"
#include "loader/gguf_hybrids.h"
#include "loader/gguf_kimi_linear.h"
#include "loader/gguf_qwen35.h"
#include "loader/gguf_rwkv7.h"
#include "loader/gguf_test_files.h"

namespace attnzoo {
namespace {

using namespace testing;  // NOLINT: the GGUF spec helpers

enum : uint32_t { U32 = 4, U64 = 10 };

// Everything a loader does with the file's Hugging Face view: config, tensor map, every fix undone.
// tensors_only: the tensor map alone, as a reader that never asks for the config would (so the map's own checks are
// reached, not the config's first).
void open_as_checkpoint(const GgufSpec& s, bool tensors_only = false) {
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes(gguf_bytes(s), "evil.gguf"));
  if (!tensors_only) gguf_hf_config_json(f);
  for (const GgufHfTensor& t : gguf_hf_tensors(f))
    if (t.fix != GgufFix::none) undo_gguf_fix(t, f.path());
}

GgufKvSpec& kv(GgufSpec& s, const std::string& key) {
  for (auto& k : s.kvs)
    if (k.key == key) return k;
  throw std::logic_error(key);
}

void set_u64(GgufSpec& s, const std::string& key, uint64_t v) { kv(s, key) = kv_scalar<uint64_t>(key, U64, v); }

void erase_key(GgufSpec& s, const std::string& key) {
  std::erase_if(s.kvs, [&](const GgufKvSpec& k) { return k.key == key; });
}

struct Malicious {
  const char* name;
  std::function<GgufSpec()> make;
  const char* expect;  // a substring of the error
  bool tensors_only = false;
};

template <typename Edit>
std::function<GgufSpec()> edited(GgufSpec (*base)(), Edit edit) {
  return [base, edit] {
    GgufSpec s = base();
    edit(s);
    return s;
  };
}

GgufSpec llama_like(const char* arch) {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", arch)};
  add_u32_keys(s, arch, {{"block_count", 1}, {"embedding_length", 4}, {"attention.head_count", 1}, {"vocab_size", 5}});
  s.tensors = {{"blk.0.attn_q.weight", {4, 4}, 0, f32_bytes(std::vector<float>(16, 1.f)), std::nullopt}};
  return s;
}

// A qwen3moe file with two experts and `experts` beside its attention weight.
GgufSpec qwen3moe_with(GgufTensorSpec experts) {
  GgufSpec s = llama_like("qwen3moe");
  add_u32_keys(s, "qwen3moe", {{"expert_count", 2}, {"expert_used_count", 1}, {"expert_feed_forward_length", 2}});
  s.tensors.push_back(std::move(experts));
  return s;
}

GgufSpec mamba_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "mamba")};
  add_u32_keys(s, "mamba",
               {{"block_count", 1}, {"embedding_length", 2}, {"ssm.inner_size", 4}, {"ssm.state_size", 2},
                {"ssm.conv_kernel", 3}, {"ssm.time_step_rank", 1}, {"vocab_size", 5}});
  s.tensors = {{"blk.0.ssm_a", {2, 4}, 0, f32_bytes(std::vector<float>(8, -1.f)), std::nullopt}};
  return s;
}

Bytes u32s(const std::vector<uint32_t>& v) {
  Bytes b;
  for (uint32_t x : v) put<uint32_t>(b, x);
  return b;
}

// Nemotron-H's "M*-": the pattern in per-layer head_count_kv / feed_forward_length arrays, Q / K permuted.
GgufSpec nemotron_h_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "nemotron_h")};
  add_u32_keys(s, "nemotron_h",
               {{"block_count", 3}, {"embedding_length", 4}, {"attention.head_count", 2}, {"ssm.inner_size", 4},
                {"ssm.state_size", 2}, {"ssm.conv_kernel", 3}, {"ssm.time_step_rank", 2}, {"vocab_size", 5}});
  s.kvs.push_back(kv_array("nemotron_h.attention.head_count_kv", U32, 3, u32s({0, 1, 0})));
  s.kvs.push_back(kv_array("nemotron_h.feed_forward_length", U32, 3, u32s({0, 0, 8})));
  s.tensors = {{"blk.0.ssm_a", {1, 2}, 0, f32_bytes(std::vector<float>(2, -1.f)), std::nullopt},
               {"blk.1.attn_q.weight", {4, 4}, 0, f32_bytes(std::vector<float>(16, 1.f)), std::nullopt},
               {"blk.1.attn_k.weight", {4, 2}, 0, f32_bytes(std::vector<float>(8, 1.f)), std::nullopt},
               {"blk.2.ffn_up.weight", {4, 8}, 0, f32_bytes(std::vector<float>(32, 1.f)), std::nullopt}};
  return s;
}

std::vector<Malicious> catalogue() {
  constexpr uint64_t kHuge = uint64_t(1) << 62;
  return {
      {"nemotron_h per-layer counts of the wrong length",
       edited(nemotron_h_spec,
              [](GgufSpec& s) {
                kv(s, "nemotron_h.feed_forward_length") = kv_array("nemotron_h.feed_forward_length", U32, 2, u32s({0, 8}));
              }),
       "evil.gguf: key 'nemotron_h.feed_forward_length': expected 3 values (one per layer)"},
      {"nemotron_h layer with both attention and a feed-forward",
       edited(nemotron_h_spec,
              [](GgufSpec& s) {
                kv(s, "nemotron_h.feed_forward_length") =
                    kv_array("nemotron_h.feed_forward_length", U32, 3, u32s({0, 8, 8}));
              }),
       "evil.gguf: layer 1 has both attention heads and a feed-forward length"},
      {"nemotron_h head count past the bound",
       edited(nemotron_h_spec,
              [](GgufSpec& s) {
                kv(s, "nemotron_h.attention.head_count_kv") =
                    kv_array("nemotron_h.attention.head_count_kv", U32, 3, u32s({0, 4000000000u, 0}));
              }),
       "evil.gguf: key 'nemotron_h.attention.head_count_kv': values must be in [0, "},
      {"nemotron_h Q rows that do not split into the heads",
       edited(nemotron_h_spec, [](GgufSpec& s) { set_u64(s, "nemotron_h.attention.head_count", 3); }),
       "evil.gguf: tensor 'blk.1.attn_q.weight': rows do not split into 3 heads of even size", true},
      {"granitehybrid expert count past the bound",
       edited(nemotron_h_spec,
              [](GgufSpec& s) {
                for (GgufKvSpec& k : s.kvs)
                  if (k.key.starts_with("nemotron_h.")) k.key = "granitehybrid." + k.key.substr(11);
                kv(s, "general.architecture") = kv_string("general.architecture", "granitehybrid");
                erase_key(s, "granitehybrid.feed_forward_length");
                s.tensors.pop_back();
                s.kvs.push_back(kv_scalar<uint64_t>("granitehybrid.expert_count", U64, kHuge));
              }),
       "evil.gguf: key 'granitehybrid.expert_count': must be in [1, "},
      // 2 * nk * dk + inner wraps to the stored row count: the pieces would point 2^64 bytes away.
      {"qwen3next state size wrapping the row count",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.ssm.state_size", kHuge); }),
       "evil.gguf: key 'qwen3next.ssm.state_size': must be in [1, 65536], got 4611686018427387904"},
      {"qwen3next state size wrapping the row count (tensor map alone)",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.ssm.state_size", kHuge); }),
       "evil.gguf: key 'qwen3next.ssm.state_size': must be in [1, 65536], got 4611686018427387904", true},
      {"qwen3next key heads past the bound",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.ssm.group_count", kHuge); }),
       "evil.gguf: key 'qwen3next.ssm.group_count': must be in [1, 4096]"},
      {"qwen3next sizes that do not match attn_qkv",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.ssm.state_size", 64); }),
       "evil.gguf: tensor 'blk.0.attn_qkv.weight': expected [258, hidden] beside 'blk.0.attn_gate.weight' "
       "[2, hidden]", true},
      {"qwen3next value heads not a multiple of key heads",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.ssm.group_count", 3); }),
       "evil.gguf: key 'qwen3next.ssm.time_step_rank' (2 value heads) is not a multiple of 'qwen3next.ssm.group_count' "
       "(3 key heads)", true},
      {"lfm2 block count of 2^62 (a vector per layer)",
       edited(lfm2_spec, [](GgufSpec& s) { set_u64(s, "lfm2.block_count", kHuge); }),
       "evil.gguf: key 'lfm2.block_count': must be in [1, 4096], got 4611686018427387904"},
      {"lfm2 more blocks than tensors",
       edited(lfm2_spec, [](GgufSpec& s) { set_u64(s, "lfm2.block_count", 4000); }),
       "evil.gguf: key 'lfm2.block_count': 4000 blocks, but the file holds 2 tensors"},
      {"lfm2 KV head count past the bound",
       edited(lfm2_spec,
              [](GgufSpec& s) {
                Bytes v;
                put<uint32_t>(v, 0);
                put<uint32_t>(v, 4000000000u);
                kv(s, "lfm2.attention.head_count_kv") = kv_array("lfm2.attention.head_count_kv", U32, 2, v);
              }),
       "evil.gguf: key 'lfm2.attention.head_count_kv': attention layers must share one positive count"},
      {"jamba attention layers without a period",
       edited(jamba_spec,
              [](GgufSpec& s) {
                Bytes v;
                for (int32_t n : {0, 2, 2}) put<int32_t>(v, n);
                kv(s, "jamba.attention.head_count_kv") = kv_array("jamba.attention.head_count_kv", 5, 3, v);
              }),
       "evil.gguf: the attention layers (head_count_kv) do not repeat with a period"},
      {"lfm2moe experts not stacked",
       edited(lfm2moe_spec, [](GgufSpec& s) { s.tensors.back().ne = {4, 4}; }),
       "evil.gguf: tensor 'blk.1.ffn_gate_exps.weight': expected 3 dimensions (experts stacked), got 2", true},
      {"qwen3next block count of 2^62 (a lookup per layer)",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.block_count", kHuge); }),
       "evil.gguf: key 'qwen3next.block_count': must be in [1, 4096]"},
      {"qwen3next more blocks than tensors",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.block_count", 4096); }),
       "evil.gguf: key 'qwen3next.block_count': 4096 blocks, but the file holds 6 tensors"},
      {"qwen3next expert count past the bound",
       edited(qwen3next_spec, [](GgufSpec& s) { set_u64(s, "qwen3next.expert_count", kHuge); }),
       "evil.gguf: key 'qwen3next.expert_count': must be in [1, 65536]"},
      {"qwen35 value heads not a multiple of key heads",
       edited(qwen35_spec, [](GgufSpec& s) { set_u64(s, "qwen35.ssm.group_count", 4); }),
       "evil.gguf: key 'qwen35.ssm.time_step_rank' (6 value heads) is not a multiple of "
       "'qwen35.ssm.group_count' (4 key heads)"},
      {"qwen35 value heads not a multiple of key heads (tensor map alone)",
       edited(qwen35_spec, [](GgufSpec& s) { set_u64(s, "qwen35.ssm.group_count", 4); }),
       "evil.gguf: key 'qwen35.ssm.time_step_rank' (6 value heads) is not a multiple of "
       "'qwen35.ssm.group_count' (4 key heads)", true},
      {"qwen35 key heads missing (tensor map alone)",
       edited(qwen35_spec, [](GgufSpec& s) { erase_key(s, "qwen35.ssm.group_count"); }), "'qwen35.ssm.group_count'",
       true},
      {"qwen35 key heads given as a string",
       edited(qwen35_spec,
              [](GgufSpec& s) { kv(s, "qwen35.ssm.group_count") = kv_string("qwen35.ssm.group_count", "2"); }),
       "'qwen35.ssm.group_count'"},
      {"qwen35 value head size not whole",
       edited(qwen35_spec, [](GgufSpec& s) { set_u64(s, "qwen35.ssm.inner_size", 13); }),
       "evil.gguf: key 'qwen35.ssm.inner_size' (13) is not a multiple of 'qwen35.ssm.time_step_rank' (6)", true},
      {"qwen35 head sizes that do not match the tensors",
       edited(qwen35_spec, [](GgufSpec& s) { set_u64(s, "qwen35.ssm.inner_size", 18); }),
       "evil.gguf: tensor 'blk.0.attn_qkv.weight': expected 22 rows ('qwen35.ssm.group_count' 2, "
       "'qwen35.ssm.time_step_rank' 6, 'qwen35.ssm.state_size' 1, 'qwen35.ssm.inner_size' 18)", true},
      {"qwen35 prediction blocks as many as the blocks",
       edited(qwen35_spec, [](GgufSpec& s) { set_u64(s, "qwen35.nextn_predict_layers", 2); }),
       "evil.gguf: key 'qwen35.nextn_predict_layers': 2 prediction blocks of the 2 in 'qwen35.block_count'", true},
      {"qwen35 value heads splitting Q8_0 blocks",
       edited(qwen35_spec,
              [](GgufSpec& s) {
                set_u64(s, "qwen35.ssm.inner_size", 96);  // 6 heads of 16 columns: 3 blocks of 32 per row
                set_u64(s, "qwen35.block_count", 1);
                erase_key(s, "qwen35.nextn_predict_layers");
                s.tensors = {{"blk.0.ssm_out.weight", {96, 2}, 8, Bytes(2 * 3 * 34, 0), std::nullopt}};
              }),
       "evil.gguf: tensor 'blk.0.ssm_out.weight': value heads of 16 columns do not hold whole Q8_0 blocks", true},
      {"rwkv7 block count of 2^62", edited(rwkv7_spec, [](GgufSpec& s) { set_u64(s, "rwkv7.block_count", kHuge); }),
       "evil.gguf: key 'rwkv7.block_count': must be in [1, 4096]"},
      {"rwkv7 hidden size past the bound",
       edited(rwkv7_spec, [](GgufSpec& s) { set_u64(s, "rwkv7.embedding_length", kHuge); }),
       "evil.gguf: key 'rwkv7.embedding_length': must be in [1, 1048576]"},
      {"rwkv7 LoRA rank past the bound",
       edited(rwkv7_spec, [](GgufSpec& s) { set_u64(s, "rwkv7.attention.decay_lora_rank", kHuge); }),
       "evil.gguf: key 'rwkv7.attention.decay_lora_rank': must be in [1, 4294967296]"},
      {"kimi-linear conv kernel of another shape",
       edited(kimi_linear_spec, [](GgufSpec& s) { s.tensors[0].ne = {3, 4}; }),
       "evil.gguf: tensor 'blk.0.ssm_conv1d_q.weight': expected a [1, channels, 1, kernel]"},
      {"kimi-linear A that is not -exp(A_log)",
       edited(kimi_linear_spec, [](GgufSpec& s) { s.tensors[1].data = f32_bytes({1.f, -2.f}); }),
       "evil.gguf: tensor 'blk.0.ssm_a': value 1.000000 at 0 is not negative and finite"},
      {"kimi-linear MLA heads without non-rotary channels",
       edited(kimi_linear_spec, [](GgufSpec& s) { set_u64(s, "kimi-linear.attention.key_length_mla", 1); }),
       "evil.gguf: key 'kimi-linear.attention.key_length_mla': 1 leaves no non-rotary channels"},
      {"kimi-linear head counts for another layer count",
       edited(kimi_linear_spec, [](GgufSpec& s) { set_u64(s, "kimi-linear.block_count", 3); }),
       "evil.gguf: key 'kimi-linear.attention.head_count_kv': expected 3 counts (one per layer)"},
      {"mamba block count of 2^62", edited(mamba_spec, [](GgufSpec& s) { set_u64(s, "mamba.block_count", kHuge); }),
       "evil.gguf: key 'mamba.block_count': must be in [1, 4096]"},
      {"mamba state size past the bound",
       edited(mamba_spec, [](GgufSpec& s) { set_u64(s, "mamba.ssm.state_size", kHuge); }),
       "evil.gguf: key 'mamba.ssm.state_size': must be in [1, 65536]"},
      {"llama block count of 2^62",
       edited(+[] { return llama_like("llama"); }, [](GgufSpec& s) { set_u64(s, "llama.block_count", kHuge); }),
       "evil.gguf: key 'llama.block_count': must be in [1, 4096]"},
      {"llama head count of 2^62 (the RoPE permutation's loop)",
       edited(+[] { return llama_like("llama"); }, [](GgufSpec& s) { set_u64(s, "llama.attention.head_count", kHuge); }),
       "evil.gguf: key 'llama.attention.head_count': must be in [1, 4096]"},
      {"llama 2^61 KV heads over 2^62 empty rows (the RoPE permutation's loop)",
       edited(+[] { return llama_like("llama"); },
              [](GgufSpec& s) {
                s.kvs.push_back(kv_scalar<uint64_t>("llama.attention.head_count_kv", U64, uint64_t(1) << 61));
                s.tensors.push_back({"blk.0.attn_k.weight", {0, kHuge}, 0, {}, std::nullopt});
              }),
       "evil.gguf: tensor 'blk.0.attn_k.weight': 'llama.attention.head_count_kv' is 2305843009213693952, over the 4096",
       true},
      {"qwen3moe 2^40 empty experts",
       [] { return qwen3moe_with({"blk.0.ffn_up_exps.weight", {0, 4, uint64_t(1) << 40}, 0, {}, std::nullopt}); },
       "evil.gguf: tensor 'blk.0.ffn_up_exps.weight': 1099511627776 experts, over the 65536 any model has"},
      {"qwen3moe fused gate / up experts of an odd row count",
       [] {
         return qwen3moe_with(
             {"blk.0.ffn_gate_up_exps.weight", {4, 3, 2}, 0, f32_bytes(std::vector<float>(24)), std::nullopt});
       },
       "evil.gguf: tensor 'blk.0.ffn_gate_up_exps.weight': 3 rows per expert do not split into gate and up halves"},
      // 0 bytes each, so a 76 KB file of a thousand such stacks asked for ~45 GB of per-expert entries
      {"qwen3moe 65536 experts of empty rows",
       [] { return qwen3moe_with({"blk.0.ffn_gate_up_exps.weight", {0, 0, 65536}, 0, {}, std::nullopt}); },
       "evil.gguf: tensor 'blk.0.ffn_gate_up_exps.weight': 65536 experts of empty rows", true},
      {"qwen3moe stack of another expert count",
       [] {
         return qwen3moe_with({"blk.0.ffn_up_exps.weight", {4, 2, 3}, 0, f32_bytes(std::vector<float>(24)), std::nullopt});
       },
       "evil.gguf: tensor 'blk.0.ffn_up_exps.weight': 3 experts, but 'qwen3moe.expert_count' is 2", true},
      {"qwen3moe experts in a block past block_count",
       [] {
         return qwen3moe_with({"blk.7.ffn_up_exps.weight", {4, 2, 2}, 0, f32_bytes(std::vector<float>(16)), std::nullopt});
       },
       "evil.gguf: tensor 'blk.7.ffn_up_exps.weight': block 7 of the 1 in 'qwen3moe.block_count'", true},
      {"gpt-oss 65536 expert biases of empty rows",
       [] {
         GgufSpec s = llama_like("gpt-oss");
         add_u32_keys(s, "gpt-oss", {{"expert_count", 2}});
         s.tensors.push_back({"blk.0.ffn_down_exps.bias", {0, 65536}, 0, {}, std::nullopt});
         return s;
       },
       "evil.gguf: tensor 'blk.0.ffn_down_exps.bias': 65536 experts of empty rows", true},
  };
}

TEST(GgufHybrids, MaliciousFilesGiveNamedErrorsQuickly) {
  for (const Malicious& m : catalogue()) {
    SCOPED_TRACE(m.name);
    const auto start = std::chrono::steady_clock::now();
    try {
      open_as_checkpoint(m.make(), m.tensors_only);
      ADD_FAILURE() << "accepted";
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(m.expect), std::string::npos)
          << "got \"" << e.what() << "\", expected \"" << m.expect << "\"";
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  }
}

TEST(GgufHybrids, ValidHybridFilesOpen) {
  // The bases of the catalogue are valid: each refusal above is the edit's, not the base's.
  for (GgufSpec (*base)() :
       {qwen3next_spec, qwen35_spec, lfm2_spec, lfm2moe_spec, jamba_spec, rwkv7_spec, mamba_spec, nemotron_h_spec,
        kimi_linear_spec, +[] { return llama_like("llama"); }})
    EXPECT_NO_THROW(open_as_checkpoint(base()));
}

TEST(GgufHybrids, JambaPeriodsAndLfm2MoeExpertsReadBack) {
  const GgufFile jamba = GgufFile::parse(MappedFile::from_bytes(gguf_bytes(jamba_spec()), "j.gguf"));
  const Config c = Config::parse(gguf_hf_config_json(jamba), "j.gguf");
  EXPECT_EQ(c.get_int("attn_layer_period"), 2);
  EXPECT_EQ(c.get_int("attn_layer_offset"), 1);
  EXPECT_EQ(c.get_int("expert_layer_offset"), 3);  // no router anywhere: no layer is a MoE
  EXPECT_EQ(c.get_int("mamba_expand"), 2);
  const GgufFile moe = GgufFile::parse(MappedFile::from_bytes(gguf_bytes(lfm2moe_spec()), "m.gguf"));
  const Config mc = Config::parse(gguf_hf_config_json(moe), "m.gguf");
  EXPECT_EQ(mc.get_string_list("architectures")[0], "Lfm2MoeForCausalLM");
  EXPECT_EQ(mc.get_int("num_dense_layers"), 1);
  std::set<std::string> names;
  for (const GgufHfTensor& t : gguf_hf_tensors(moe)) names.insert(t.hf_name);
  EXPECT_TRUE(names.count("model.layers.1.feed_forward.experts.0.w1.weight"));
  EXPECT_TRUE(names.count("model.layers.1.feed_forward.experts.1.w1.weight"));
}

// llama.cpp's tiled value heads back in Hugging Face's order, checked value by value against the spec's layout;
// the prediction block is not part of the text model.
TEST(GgufHybrids, Qwen35ValueHeadsMoveBack) {
  const GgufFile f = GgufFile::parse(MappedFile::from_bytes(gguf_bytes(qwen35_spec()), "q.gguf"));
  const Config c = Config::parse(gguf_hf_config_json(f), "q.gguf");
  EXPECT_EQ(c.get_string_list("architectures"), std::vector<std::string>{"Qwen3_5ForCausalLM"});
  EXPECT_EQ(c.get_string("model_type"), "qwen3_5_text");
  EXPECT_EQ(c.get_int("num_hidden_layers"), 1);
  EXPECT_EQ(c.get_int("linear_num_value_heads"), 6);
  EXPECT_EQ(c.get_int("linear_value_head_dim"), 2);
  EXPECT_EQ(c.get_int("intermediate_size"), 2);
  EXPECT_FALSE(c.has("num_experts"));
  const int64_t nv = kQwen35KeyHeads * kQwen35PerKey, dv = kQwen35HeadV;
  // name -> (rows before the value heads, rows per head, values per row); ssm_out and ssm_a checked apart.
  const std::string a = "model.layers.0.linear_attn.";
  const std::map<std::string, std::tuple<int64_t, int64_t, int64_t>> rows = {
      {a + "in_proj_qkv.weight", {4, dv, 2}}, {a + "in_proj_z.weight", {0, dv, 2}}, {a + "in_proj_b.weight", {0, 1, 2}},
      {a + "in_proj_a.weight", {0, 1, 2}},    {a + "dt_bias", {0, 1, 1}},           {a + "conv1d.weight", {4, dv, 3}}};
  std::set<std::string> seen;
  for (const GgufHfTensor& t : gguf_hf_tensors(f)) {
    SCOPED_TRACE(t.hf_name);
    seen.insert(t.hf_name);
    EXPECT_FALSE(t.gguf_name.starts_with("blk.1.")) << "a prediction-block tensor in the text model";
    if (t.fix == GgufFix::none) continue;
    const GgufHfBytes b = undo_gguf_fix(t, f.path());
    ASSERT_EQ(b.type, QuantType::F32);
    std::vector<float> v(b.bytes.size() / sizeof(float));
    std::memcpy(v.data(), b.bytes.data(), b.bytes.size());
    std::vector<float> want;
    if (auto it = rows.find(t.hf_name); it != rows.end()) {
      const auto [first, head, per_row] = it->second;
      for (int64_t r = 0; r < first + nv * head; ++r)
        want.insert(want.end(), size_t(per_row), float(r < first ? 100 + r : r - first));
    } else if (t.hf_name.ends_with("out_proj.weight")) {
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t col = 0; col < nv * dv; ++col) want.push_back(float(10 * r + col));
    } else if (t.hf_name.ends_with("A_log")) {
      for (int64_t h = 0; h < nv; ++h) want.push_back(std::log(float(1 + h)));
    } else {
      continue;  // the norms' +1
    }
    ASSERT_EQ(v.size(), want.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << "at " << i;
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_TRUE(seen.count("model.layers.0.linear_attn.out_proj.weight"));
  EXPECT_TRUE(seen.count("model.layers.0.linear_attn.A_log"));
}

TEST(GgufHybrids, UntileRefusesHeadsOutsideTheTensor) {
  // Defence in depth: the untiling checks its own bounds, whatever set the head counts.
  GgufHfTensor t;
  t.hf_name = "model.layers.0.linear_attn.in_proj_z.weight";
  t.gguf_name = "blk.0.attn_gate.weight";
  t.shape = {4, 2};
  t.value_heads = {2, 3, 1, 0, false};  // 6 heads of a row each, in 4 rows
  GgufHfBytes b{std::vector<uint8_t>(32), QuantType::F32};
  EXPECT_THROW(untile_value_heads(t, b, "evil.gguf"), LoadError);
  t.value_heads = {2, 2, 1, 1, false};  // 4 heads after a first row: 5 rows
  EXPECT_THROW(untile_value_heads(t, b, "evil.gguf"), LoadError);
  t.value_heads = {int64_t(1) << 40, int64_t(1) << 40, 1, 0, false};
  EXPECT_THROW(untile_value_heads(t, b, "evil.gguf"), LoadError);
  t.value_heads = {2, 2, 1, 0, false};
  EXPECT_NO_THROW(untile_value_heads(t, b, "evil.gguf"));
}

// The writer's direction: each Hugging Face name back to the GGUF name the loader reads it from.
TEST(GgufHybrids, TensorNameInvertsTheLoadersTable) {
  const std::pair<const char*, const char*> qwen3next[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.3.linear_attn.A_log", "blk.3.ssm_a"},
      {"model.layers.0.linear_attn.dt_bias", "blk.0.ssm_dt.bias"},
      {"model.layers.0.linear_attn.conv1d.weight", "blk.0.ssm_conv1d.weight"},
      {"model.layers.0.linear_attn.norm.weight", "blk.0.ssm_norm.weight"},
      {"model.layers.0.linear_attn.out_proj.weight", "blk.0.ssm_out.weight"},
      {"model.layers.2.linear_attn.in_proj_ba.weight", "blk.2.ssm_ba.weight"},
      {"model.layers.1.input_layernorm.weight", "blk.1.attn_norm.weight"},
      {"model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
      {"model.layers.3.self_attn.q_norm.weight", "blk.3.attn_q_norm.weight"},
      {"model.layers.1.mlp.gate.weight", "blk.1.ffn_gate_inp.weight"},
      {"model.layers.1.mlp.shared_expert_gate.weight", "blk.1.ffn_gate_inp_shexp.weight"},
      {"model.layers.1.mlp.shared_expert.down_proj.weight", "blk.1.ffn_down_shexp.weight"},
      {"model.layers.12.mlp.gate_proj.weight", "blk.12.ffn_gate.weight"},
  };
  for (const auto& [hf, gguf] : qwen3next) EXPECT_EQ(gguf_hybrid_tensor_name("qwen3next", hf), gguf) << hf;
  // Falcon-H1 lists ffn_norm with and without its extension: the named one wins.
  EXPECT_EQ(gguf_hybrid_tensor_name("falcon-h1", "model.layers.0.pre_ff_layernorm.weight"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(gguf_hybrid_tensor_name("mamba", "backbone.layers.1.mixer.A_log"), "blk.1.ssm_a");
  EXPECT_EQ(gguf_hybrid_tensor_name("mamba", "backbone.embeddings.weight"), "token_embd.weight");
  // No one-to-one counterpart, a malformed layer index, an architecture outside this table.
  for (const char* hf : {"model.layers.0.linear_attn.in_proj_qkvz.weight", "model.layers.0.mlp.experts.0.up_proj.weight",
                         "model.layers.x.input_layernorm.weight", "model.layers..input_layernorm.weight",
                         "model.layers.0.input_layernorm.scale", "model.layers.0", "model.rotary_emb.inv_freq"})
    EXPECT_EQ(gguf_hybrid_tensor_name("qwen3next", hf), std::nullopt) << hf;
  EXPECT_EQ(gguf_hybrid_tensor_name("llama", "model.norm.weight"), std::nullopt);
  EXPECT_EQ(gguf_hybrid_tensor_name("rwkv7", "model.norm.weight"), std::nullopt);
}

// rwkv7's and kimi-linear's own tables, the writer's direction: the edits' names, a dense layer's MLP under either
// prefix, and what has no one-to-one counterpart (stacked or split tensors, malformed layer indices).
TEST(GgufHybrids, Rwkv7AndKimiLinearNamesInvertTheLoadersTables) {
  EXPECT_EQ(gguf_rwkv7_tensor_name("model.layers.2.attn.w_lora.lora.0.weight"), "blk.2.time_mix_w1.weight");
  EXPECT_EQ(gguf_rwkv7_tensor_name("model.layers.0.pre_norm.bias"), "token_embd_norm.bias");
  EXPECT_EQ(gguf_rwkv7_tensor_name("model.layers.1.ffn.x_k"), "blk.1.channel_mix_lerp_k.weight");
  for (const char* fla : {"model.layers.1.attn.x_r", "model.layers.x.attn.k_k", "model.layers.1.attn.k_k.weight"})
    EXPECT_EQ(gguf_rwkv7_tensor_name(fla), std::nullopt) << fla;
  const std::pair<const char*, const char*> kimi[] = {
      {"model.layers.3.self_attn.A_log", "blk.3.ssm_a"},
      {"model.layers.3.self_attn.dt_bias", "blk.3.ssm_dt.bias"},
      {"model.layers.0.self_attn.q_conv1d.weight", "blk.0.ssm_conv1d_q.weight"},
      {"model.layers.0.self_attn.b_proj.weight", "blk.0.ssm_beta.weight"},
      {"model.layers.2.self_attn.kv_a_proj_with_mqa.weight", "blk.2.attn_kv_a_mqa.weight"},
      {"model.layers.0.block_sparse_moe.gate_proj.weight", "blk.0.ffn_gate.weight"},
      {"model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
      {"model.layers.1.block_sparse_moe.gate.weight", "blk.1.ffn_gate_inp.weight"},
      {"model.layers.1.block_sparse_moe.gate.e_score_correction_bias", "blk.1.exp_probs_b.bias"},
      {"model.layers.1.block_sparse_moe.shared_experts.up_proj.weight", "blk.1.ffn_up_shexp.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (const auto& [hf, gguf] : kimi) EXPECT_EQ(gguf_kimi_linear_tensor_name(hf), gguf) << hf;
  for (const char* hf :
       {"model.layers.2.self_attn.kv_b_proj.weight", "model.layers.1.block_sparse_moe.experts.0.w1.weight",
        "model.layers.x.input_layernorm.weight", "model.layers.0.self_attn.A_log.weight"})
    EXPECT_EQ(gguf_kimi_linear_tensor_name(hf), std::nullopt) << hf;
}

}  // namespace
}  // namespace attnzoo
