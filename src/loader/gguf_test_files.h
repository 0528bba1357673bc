#pragma once
// Test helper: a GGUF writer that lays the format out by hand from a plain spec, so tests can write valid files
// and, by editing the spec or the bytes, every kind of broken one.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace attnzoo::testing {

using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, T v) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void put_string(Bytes& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

struct GgufKvSpec {
  std::string key;
  uint32_t type;  // GgufType id
  Bytes value;    // encoded as the file stores it
};

struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order
  uint32_t type;             // ggml type id
  Bytes data;
  std::optional<uint64_t> offset;  // when set, written instead of the laid-out offset
};

struct GgufSpec {
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // when set, written instead of tensors.size()
  std::optional<uint64_t> kv_count;
  uint64_t alignment = 32;  // the layout's alignment (add a general.alignment key to match when not 32)
  std::vector<GgufKvSpec> kvs;
  std::vector<GgufTensorSpec> tensors;
};

template <typename T>
GgufKvSpec kv_scalar(std::string key, uint32_t type, T v) {
  GgufKvSpec kv{std::move(key), type, {}};
  put(kv.value, v);
  return kv;
}

inline GgufKvSpec kv_string(std::string key, const std::string& s) {
  GgufKvSpec kv{std::move(key), 8, {}};
  put_string(kv.value, s);
  return kv;
}

// An array value: element type, count and the encoded elements.
inline Bytes array_value(uint32_t elem_type, uint64_t count, const Bytes& elems) {
  Bytes b;
  put<uint32_t>(b, elem_type);
  put<uint64_t>(b, count);
  b.insert(b.end(), elems.begin(), elems.end());
  return b;
}

inline GgufKvSpec kv_array(std::string key, uint32_t elem_type, uint64_t count, const Bytes& elems) {
  return {std::move(key), 9, array_value(elem_type, count, elems)};
}

inline Bytes gguf_bytes(const GgufSpec& s) {
  Bytes b;
  put<uint32_t>(b, 0x46554747);
  put<uint32_t>(b, s.version);
  put<uint64_t>(b, s.tensor_count.value_or(s.tensors.size()));
  put<uint64_t>(b, s.kv_count.value_or(s.kvs.size()));
  for (const GgufKvSpec& kv : s.kvs) {
    put_string(b, kv.key);
    put<uint32_t>(b, kv.type);
    b.insert(b.end(), kv.value.begin(), kv.value.end());
  }
  uint64_t offset = 0;
  auto aligned = [&](uint64_t n) { return (n + s.alignment - 1) / s.alignment * s.alignment; };
  std::vector<uint64_t> offsets;
  for (const GgufTensorSpec& t : s.tensors) {
    put_string(b, t.name);
    put<uint32_t>(b, uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) put<uint64_t>(b, d);
    put<uint32_t>(b, t.type);
    offsets.push_back(offset);  // the data goes here even when the header says otherwise
    put<uint64_t>(b, t.offset.value_or(offset));
    offset = aligned(offset + t.data.size());
  }
  const size_t data_start = aligned(b.size());
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const Bytes& d = s.tensors[i].data;
    if (d.empty()) continue;
    if (b.size() < data_start + offsets[i] + d.size()) b.resize(data_start + offsets[i] + d.size());
    std::memcpy(b.data() + data_start + offsets[i], d.data(), d.size());
  }
  if (b.size() < data_start) b.resize(data_start);
  return b;
}

inline Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * sizeof(float));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// `arch`.key u32 entries.
inline void add_u32_keys(GgufSpec& s, const std::string& arch,
                         const std::vector<std::pair<const char*, uint32_t>>& keys) {
  for (const auto& [k, v] : keys) s.kvs.push_back(kv_scalar<uint32_t>(arch + "." + k, 4, v));
}

// Tiny valid files of the hybrid families (gguf_hybrids.h), each using the converter edits its family has:
// qwen3next: two key heads of size 1, in_proj_qkvz split into attn_qkv rows r = r and attn_gate rows r = 10 + r,
// A stored as -exp(A_log), a squeezed conv kernel, norms with a folded +1.
inline GgufSpec qwen3next_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "qwen3next")};
  add_u32_keys(s, "qwen3next",
               {{"block_count", 1}, {"embedding_length", 2}, {"attention.head_count", 1}, {"ssm.group_count", 2},
                {"ssm.state_size", 1}, {"ssm.time_step_rank", 2}, {"ssm.inner_size", 2}, {"ssm.conv_kernel", 3},
                {"expert_count", 2}, {"expert_used_count", 1}, {"expert_feed_forward_length", 2},
                {"expert_shared_feed_forward_length", 2}, {"vocab_size", 5}});
  std::vector<float> qkv(12), gate(4), conv(12);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = float(i / 2);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = float(10 + i / 2);
  for (size_t i = 0; i < conv.size(); ++i) conv[i] = float(i);
  s.tensors = {{"blk.0.ssm_a", {2}, 0, f32_bytes({-1.f, -2.f}), std::nullopt},
               {"blk.0.ssm_conv1d.weight", {3, 4}, 0, f32_bytes(conv), std::nullopt},
               {"blk.0.attn_norm.weight", {2}, 0, f32_bytes({1.f, 1.5f}), std::nullopt},
               {"blk.0.ssm_norm.weight", {2}, 0, f32_bytes({1.f, 1.5f}), std::nullopt},
               {"blk.0.attn_qkv.weight", {2, 6}, 0, f32_bytes(qkv), std::nullopt},
               {"blk.0.attn_gate.weight", {2, 2}, 0, f32_bytes(gate), std::nullopt}};
  return s;
}

// rwkv7: hidden 4 in two heads of 2, the six token-shift mixes fused into one tensor.
inline GgufSpec rwkv7_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "rwkv7")};
  add_u32_keys(s, "rwkv7",
               {{"block_count", 1}, {"embedding_length", 4}, {"wkv.head_size", 2}, {"feed_forward_length", 8},
                {"attention.decay_lora_rank", 2}, {"attention.iclr_lora_rank", 2},
                {"attention.value_residual_mix_lora_rank", 2}, {"attention.gate_lora_rank", 2}, {"vocab_size", 5}});
  s.tensors = {{"blk.0.time_mix_lerp_fused.weight", {4, 1, 1, 6}, 0, f32_bytes(std::vector<float>(24, 0.5f)), std::nullopt},
               {"blk.0.time_mix_r_k.weight", {4}, 0, f32_bytes({1, 2, 3, 4}), std::nullopt},
               {"blk.0.time_mix_w0.weight", {4}, 0, f32_bytes({1, 2, 3, 4}), std::nullopt}};
  return s;
}

// lfm2: two layers, a short-conv one (0 KV heads) and an attention one, as a per-layer head_count_kv array.
inline GgufSpec lfm2_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "lfm2")};
  add_u32_keys(s, "lfm2",
               {{"block_count", 2}, {"embedding_length", 4}, {"attention.head_count", 2}, {"feed_forward_length", 8},
                {"shortconv.l_cache", 3}, {"vocab_size", 5}});
  Bytes kv;
  put<uint32_t>(kv, 0);
  put<uint32_t>(kv, 1);
  s.kvs.push_back(kv_array("lfm2.attention.head_count_kv", 4, 2, kv));
  s.tensors = {{"blk.0.shortconv.conv.weight", {3, 4}, 0, f32_bytes(std::vector<float>(12, 1.f)), std::nullopt},
               {"blk.1.attn_q.weight", {4, 4}, 0, f32_bytes(std::vector<float>(16, 2.f)), std::nullopt}};
  return s;
}

// kimi-linear: a KDA block (0 KV heads: a short-conv kernel and A) and an MLA block (1: kv_b_proj split into
// attn_k_b / attn_v_b), one stacked expert tensor in the MLA block.
inline GgufSpec kimi_linear_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "kimi-linear")};
  add_u32_keys(s, "kimi-linear",
               {{"block_count", 2}, {"embedding_length", 4}, {"attention.head_count", 2}, {"feed_forward_length", 8},
                {"attention.kv_lora_rank", 2}, {"rope.dimension_count", 1}, {"attention.key_length_mla", 3},
                {"attention.value_length_mla", 2}, {"kda.head_dim", 2}, {"ssm.conv_kernel", 3}, {"expert_count", 2},
                {"expert_used_count", 1}, {"expert_feed_forward_length", 2}, {"leading_dense_block_count", 1},
                {"vocab_size", 5}});
  Bytes kv;
  for (int32_t n : {0, 1}) put<int32_t>(kv, n);
  s.kvs.push_back(kv_array("kimi-linear.attention.head_count_kv", 5, 2, kv));
  s.tensors = {{"blk.0.ssm_conv1d_q.weight", {3, 1, 4, 1}, 0, f32_bytes(std::vector<float>(12, 1.f)), std::nullopt},
               {"blk.0.ssm_a", {1, 2, 1, 1}, 0, f32_bytes({-1.f, -2.f}), std::nullopt},
               {"blk.1.attn_k_b.weight", {2, 2, 2}, 0, f32_bytes(std::vector<float>(8, 0.5f)), std::nullopt},
               {"blk.1.attn_v_b.weight", {2, 2, 2}, 0, f32_bytes(std::vector<float>(8, 0.25f)), std::nullopt},
               {"blk.1.ffn_gate_exps.weight", {4, 2, 2}, 0, f32_bytes(std::vector<float>(16, 1.f)), std::nullopt}};
  return s;
}

// jamba: 3 blocks, attention in block 1 (attn_layer_period 2, offset 1), Mamba sizes present.
inline GgufSpec jamba_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "jamba")};
  add_u32_keys(s, "jamba",
               {{"block_count", 3}, {"embedding_length", 4}, {"attention.head_count", 2}, {"feed_forward_length", 8},
                {"ssm.inner_size", 8}, {"ssm.state_size", 2}, {"ssm.conv_kernel", 4}, {"ssm.time_step_rank", 1},
                {"vocab_size", 5}});
  Bytes kv;
  for (int32_t n : {0, 2, 0}) put<int32_t>(kv, n);
  s.kvs.push_back(kv_array("jamba.attention.head_count_kv", 5, 3, kv));
  s.tensors = {{"blk.0.ssm_d", {8}, 0, f32_bytes(std::vector<float>(8, 1.f)), std::nullopt},
               {"blk.1.attn_q.weight", {4, 4}, 0, f32_bytes(std::vector<float>(16, 2.f)), std::nullopt},
               {"blk.2.ssm_d", {8}, 0, f32_bytes(std::vector<float>(8, 1.f)), std::nullopt}};
  return s;
}

// lfm2moe: lfm2_spec's two blocks, block 1 with its 2 experts' gate projections stacked [2, 2, 4].
inline GgufSpec lfm2moe_spec() {
  GgufSpec s = lfm2_spec();
  s.kvs[0] = kv_string("general.architecture", "lfm2moe");
  for (GgufKvSpec& k : s.kvs)
    if (k.key.starts_with("lfm2.")) k.key = "lfm2moe." + k.key.substr(5);
  add_u32_keys(s, "lfm2moe", {{"expert_count", 2}, {"expert_used_count", 1}, {"expert_feed_forward_length", 2},
                              {"leading_dense_block_count", 1}});
  s.tensors.push_back({"blk.1.ffn_gate_exps.weight", {4, 2, 2}, 0, f32_bytes(std::vector<float>(16, 1.f)),
                       std::nullopt});
  return s;
}

// qwen35: 2 key heads, 6 value heads of 2 (3 per key head), stored tiled as llama.cpp's converter stores them: stored
// value head s is Hugging Face's qwen35_hf_head(s). Every value-head row (column, element) holds its Hugging Face
// index within the value heads (attn_qkv / ssm_conv1d: after 4 q and k rows holding 100 + r; ssm_out row r: 10 * r +
// column; ssm_a: -(1 + head)). Block 1 is a multi-token-prediction block (nextn_predict_layers 1).
constexpr int64_t kQwen35KeyHeads = 2, kQwen35PerKey = 3, kQwen35HeadV = 2;
inline int64_t qwen35_hf_head(int64_t stored) {
  return stored % kQwen35KeyHeads * kQwen35PerKey + stored / kQwen35KeyHeads;
}

inline GgufSpec qwen35_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "qwen35")};
  add_u32_keys(s, "qwen35",
               {{"block_count", 2}, {"nextn_predict_layers", 1}, {"embedding_length", 2}, {"attention.head_count", 1},
                {"feed_forward_length", 2}, {"ssm.group_count", 2}, {"ssm.state_size", 1}, {"ssm.time_step_rank", 6},
                {"ssm.inner_size", 12}, {"ssm.conv_kernel", 3}, {"vocab_size", 5}});
  const int64_t nv = kQwen35KeyHeads * kQwen35PerKey, dv = kQwen35HeadV;
  // rows_of(per_row, first, head): `first` q / k rows, then the value heads' rows, each row `per_row` values.
  auto rows_of = [&](int64_t per_row, int64_t first, int64_t head) {
    std::vector<float> v;
    for (int64_t r = 0; r < first; ++r) v.insert(v.end(), size_t(per_row), float(100 + r));
    for (int64_t st = 0; st < nv; ++st)
      for (int64_t e = 0; e < head; ++e) v.insert(v.end(), size_t(per_row), float(qwen35_hf_head(st) * head + e));
    return v;
  };
  std::vector<float> a, out;
  for (int64_t st = 0; st < nv; ++st) a.push_back(-float(1 + qwen35_hf_head(st)));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t st = 0; st < nv; ++st)
      for (int64_t e = 0; e < dv; ++e) out.push_back(float(10 * r + qwen35_hf_head(st) * dv + e));
  const uint64_t rows_qkv = uint64_t(4 + nv * dv);
  s.tensors = {{"blk.0.attn_qkv.weight", {2, rows_qkv}, 0, f32_bytes(rows_of(2, 4, dv)), std::nullopt},
               {"blk.0.attn_gate.weight", {2, uint64_t(nv * dv)}, 0, f32_bytes(rows_of(2, 0, dv)), std::nullopt},
               {"blk.0.ssm_beta.weight", {2, uint64_t(nv)}, 0, f32_bytes(rows_of(2, 0, 1)), std::nullopt},
               {"blk.0.ssm_alpha.weight", {2, uint64_t(nv)}, 0, f32_bytes(rows_of(2, 0, 1)), std::nullopt},
               {"blk.0.ssm_a", {uint64_t(nv)}, 0, f32_bytes(a), std::nullopt},
               {"blk.0.ssm_dt.bias", {uint64_t(nv)}, 0, f32_bytes(rows_of(1, 0, 1)), std::nullopt},
               {"blk.0.ssm_conv1d.weight", {3, rows_qkv}, 0, f32_bytes(rows_of(3, 4, dv)), std::nullopt},
               {"blk.0.ssm_out.weight", {uint64_t(nv * dv), 2}, 0, f32_bytes(out), std::nullopt},
               {"blk.0.ssm_norm.weight", {uint64_t(dv)}, 0, f32_bytes({1.f, 1.5f}), std::nullopt},
               {"blk.0.attn_norm.weight", {2}, 0, f32_bytes({1.f, 1.5f}), std::nullopt},
               {"blk.1.nextn.eh_proj.weight", {4, 2}, 0, f32_bytes(std::vector<float>(8, 3.f)), std::nullopt},
               {"blk.1.attn_q.weight", {2, 2}, 0, f32_bytes(std::vector<float>(4, 3.f)), std::nullopt}};
  return s;
}

}  // namespace attnzoo::testing
