// GGUF files opened as Hugging Face checkpoints (ModelFiles over gguf_checkpoint): names, shapes, the converter's
// edits undone, quantized tensors kept as bytes, and every refusal named. Model-level agreement with transformers
// is tested from Python (python/tests/test_gguf_model.py).
#include "loader/gguf_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "loader/gguf_test_files.h"
#include "loader/model_dir.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using namespace testing;  // NOLINT: the GGUF spec helpers

enum : uint32_t { U32 = 4, F32V = 6, STRING = 8 };
enum : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8 };

template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<float> iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// A two-head llama with one KV head: hidden 8, head_dim 4, one layer.
GgufSpec llama_spec() {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "llama"),
           kv_scalar<uint32_t>("llama.block_count", U32, 1),
           kv_scalar<uint32_t>("llama.embedding_length", U32, 8),
           kv_scalar<uint32_t>("llama.feed_forward_length", U32, 32),
           kv_scalar<uint32_t>("llama.attention.head_count", U32, 2),
           kv_scalar<uint32_t>("llama.attention.head_count_kv", U32, 1),
           kv_scalar<float>("llama.attention.layer_norm_rms_epsilon", F32V, 1e-5f),
           kv_scalar<float>("llama.rope.freq_base", F32V, 500000.f),
           kv_scalar<uint32_t>("llama.context_length", U32, 2048),
           kv_scalar<uint32_t>("tokenizer.ggml.bos_token_id", U32, 1),
           kv_string("llama.rope.scaling.type", "linear"),
           kv_scalar<float>("llama.rope.scaling.factor", F32V, 4.f)};
  s.tensors = {
      {"token_embd.weight", {8, 5}, kF32, bytes_of(iota(40)), std::nullopt},
      {"blk.0.attn_norm.weight", {8}, kF32, bytes_of(iota(8, 1)), std::nullopt},
      {"blk.0.attn_q.weight", {8, 8}, kF32, bytes_of(iota(64)), std::nullopt},
      // 4 rows of one 34-byte Q8_0 block each, row r filled with byte r
      {"blk.0.attn_k.weight", {32, 4}, kQ8_0, {}, std::nullopt},
      {"output_norm.weight", {8}, kF32, bytes_of(iota(8)), std::nullopt},
  };
  for (uint8_t r = 0; r < 4; ++r) s.tensors[3].data.insert(s.tensors[3].data.end(), 34, r);
  return s;
}

ModelFiles open_spec(const ScratchDir& dir, const GgufSpec& s, const std::string& name = "m.gguf") {
  write_file(dir.path() / name, gguf_bytes(s));
  return ModelFiles::open((dir.path() / name).string());
}

TEST(GgufCheckpoint, UnpermuteInvertsTheConvertersPermutation) {
  // The converter: reshape(heads, 2, D/2, cols).swapaxes(1, 2): GGUF row h*D + 2j + i = HF row h*D + i*D/2 + j.
  const int64_t heads = 3, D = 6, rows = heads * D, row_bytes = 5;
  std::vector<uint8_t> hf(size_t(rows * row_bytes)), gguf(hf.size()), back(hf.size());
  for (size_t i = 0; i < hf.size(); ++i) hf[i] = uint8_t(i * 7 + 3);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < D / 2; ++j)
        std::memcpy(&gguf[size_t((h * D + 2 * j + i) * row_bytes)], &hf[size_t((h * D + i * D / 2 + j) * row_bytes)],
                    size_t(row_bytes));
  ASSERT_NE(gguf, hf);
  unpermute_rope_rows(gguf.data(), back.data(), rows, row_bytes, heads);
  EXPECT_EQ(back, hf);
  std::vector<uint8_t> forward(hf.size());
  permute_rope_rows(hf.data(), forward.data(), rows, row_bytes, heads);  // attnzoo quantize's direction
  EXPECT_EQ(forward, gguf);
}

TEST(GgufCheckpoint, GgufNamesInvertTheReadersNames) {
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, llama_spec());
  for (const std::string& name : m.names()) EXPECT_EQ(gguf_tensor_name("llama", name), m.stored_name(name)) << name;
  // Norm names depend on the layout: Llama's post-attention norm is GGUF's ffn_norm, Gemma 2's is its own.
  EXPECT_EQ(gguf_tensor_name("llama", "model.layers.12.post_attention_layernorm.weight"), "blk.12.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("gemma2", "model.layers.3.post_attention_layernorm.weight"),
            "blk.3.post_attention_norm.weight");
  EXPECT_EQ(gguf_tensor_name("gemma2", "model.layers.3.pre_feedforward_layernorm.weight"), "blk.3.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("qwen2", "model.layers.0.self_attn.q_proj.bias"), "blk.0.attn_q.bias");
  EXPECT_EQ(gguf_tensor_name("qwen3", "lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf_tensor_name("llama", "model.layers.x.mlp.up_proj.weight"), std::nullopt);
  EXPECT_EQ(gguf_tensor_name("llama", "model.layers.0.mlp.shared_expert.weight"), std::nullopt);
  EXPECT_EQ(gguf_tensor_name("bert", "lm_head.weight"), std::nullopt);
  // GLM-4.5's correction bias (a buffer, no .bias of its own) and its MTP layer's extra tensors
  EXPECT_EQ(gguf_tensor_name("glm4moe", "model.layers.2.mlp.gate.e_score_correction_bias"), "blk.2.exp_probs_b.bias");
  EXPECT_EQ(gguf_tensor_name("glm4moe", "model.layers.46.shared_head.head.weight"),
            "blk.46.nextn.shared_head_head.weight");
  EXPECT_EQ(gguf_tensor_name("glm4moe", "model.layers.0.post_attention_layernorm.weight"),
            "blk.0.post_attention_norm.weight");
  EXPECT_EQ(gguf_tensor_name("minimax-m2", "model.layers.1.block_sparse_moe.e_score_correction_bias"),
            "blk.1.exp_probs_b.bias");
  EXPECT_EQ(gguf_tensor_name("llama", "model.layers.2.mlp.gate.e_score_correction_bias"), std::nullopt);
  EXPECT_EQ(gguf_arch_for_hf("Qwen3ForCausalLM")->gguf, "qwen3");
  EXPECT_TRUE(gguf_arch_for_hf("LlamaForCausalLM")->permuted_qk);
  EXPECT_FALSE(gguf_arch_for_hf("BertModel").has_value());
}

TEST(GgufCheckpoint, LlamaUnderHfNames) {
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, llama_spec());
  ASSERT_NE(m.gguf(), nullptr);
  EXPECT_TRUE(m.files().empty());
  EXPECT_EQ(m.dir(), dir.str());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                                                 "model.layers.0.self_attn.k_proj.weight",
                                                 "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"}));
  const Config& c = m.config();
  EXPECT_EQ(c.get_string_list("architectures"), std::vector<std::string>{"LlamaForCausalLM"});
  EXPECT_EQ(c.get_int("hidden_size"), 8);
  EXPECT_EQ(c.get_int("num_key_value_heads"), 1);
  EXPECT_EQ(c.get_int("head_dim"), 4);
  EXPECT_EQ(c.get_int("vocab_size"), 5);
  EXPECT_EQ(c.get_int("max_position_embeddings"), 2048);
  EXPECT_EQ(c.get_int("bos_token_id"), 1);
  EXPECT_EQ(c.get_float("rope_theta"), 500000.0);
  EXPECT_EQ(c.get_string("rope_scaling.rope_type"), "linear");
  EXPECT_EQ(c.get_float("rope_scaling.factor"), 4.0);
  EXPECT_FLOAT_EQ(float(c.get_float("rms_norm_eps")), 1e-5f);
  EXPECT_TRUE(c.get_bool("tie_word_embeddings"));
  EXPECT_EQ(c.get_string("torch_dtype"), "float32");

  // An F32 tensor is a plain view, torch order ([vocab, hidden]), zero-copy into the mapping.
  const TensorView e = m.tensor("model.embed_tokens.weight");
  EXPECT_EQ(e.shape_str(), "[5, 8]");
  EXPECT_EQ(e.ptr<float>()[13], 13.f);
  EXPECT_EQ(static_cast<const uint8_t*>(e.data), m.gguf()->tensor("token_embd.weight").data);

  // Q: each head's 4 rows (two heads) back in HF order: GGUF rows 0,1,2,3 -> HF rows 0,2,1,3.
  const TensorView q = m.tensor("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.shape_str(), "[8, 8]");
  const int hf_from_gguf[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(q.ptr<float>()[hf_from_gguf[r] * 8], float(r * 8)) << r;

  // K is quantized: no view, but bytes + format + HF shape, rows permuted with one KV head.
  EXPECT_TRUE(m.is_quantized("model.layers.0.self_attn.k_proj.weight"));
  EXPECT_FALSE(m.is_quantized("model.layers.0.self_attn.q_proj.weight"));
  const StoredTensor k = m.stored("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(k.type, QuantType::Q8_0);
  EXPECT_EQ(k.shape, (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(k.bytes, 4 * 34);
  EXPECT_TRUE(k.quantized());
  const uint8_t want_rows[4] = {0, 2, 1, 3};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(k.data[r * 34 + 5], want_rows[r]) << r;
  EXPECT_EQ(m.numel("model.layers.0.self_attn.k_proj.weight"), 128);
  EXPECT_EQ(m.nbytes("model.layers.0.self_attn.k_proj.weight"), 136u);
  EXPECT_EQ(m.stored_name("model.layers.0.self_attn.k_proj.weight"), "blk.0.attn_k.weight");
  EXPECT_EQ(m.source("model.norm.weight"), (dir.path() / "m.gguf").string());

  EXPECT_NE(error_of([&] { m.tensor("model.layers.0.self_attn.k_proj.weight"); })
                .find("tensor 'blk.0.attn_k.weight' ('model.layers.0.self_attn.k_proj.weight') is stored as Q8_0"),
            std::string::npos);
  EXPECT_THROW(m.tensor("model.layers.0.self_attn.k_proj.weight"), DTypeError);
  EXPECT_THROW(m.info("model.norm.weight"), LoadError);
  EXPECT_THROW(m.file("model.norm.weight"), LoadError);
}

TEST(GgufCheckpoint, DirectoryWithOneGguf) {
  ScratchDir dir;
  write_file(dir.path() / "model.gguf", gguf_bytes(llama_spec()));
  write_file(dir.path() / "notes.txt", std::string("x"));
  const ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.names().size(), 5u);
  EXPECT_EQ(ModelFiles::read_config(dir.str()).get_int("hidden_size"), 8);
  EXPECT_EQ(ModelFiles::read_config_json(dir.str()), m.gguf_config_json());
  write_file(dir.path() / "other.gguf", gguf_bytes(llama_spec()));
  EXPECT_NE(error_of([&] { ModelFiles::open(dir.str()); }).find("several .gguf files (model.gguf, other.gguf)"),
            std::string::npos);
}

TEST(GgufCheckpoint, GemmaNormsLoseTheirFoldedOne) {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "gemma2"), kv_scalar<uint32_t>("gemma2.block_count", U32, 1),
           kv_scalar<uint32_t>("gemma2.embedding_length", U32, 4), kv_scalar<uint32_t>("gemma2.attention.head_count", U32, 2),
           kv_scalar<uint32_t>("gemma2.attention.key_length", U32, 8),
           kv_scalar<float>("gemma2.attn_logit_softcapping", F32V, 50.f),
           kv_scalar<uint32_t>("gemma2.attention.sliding_window", U32, 4096)};
  Bytes tokens;  // no token_embd here: vocab_size comes from the token list
  for (const char* t : {"<pad>", "<eos>", "a"}) put_string(tokens, t);
  s.kvs.push_back(kv_array("tokenizer.ggml.tokens", STRING, 3, tokens));
  const std::vector<uint16_t> f16_norm = {0x3c00, 0x4000, 0x3e00, 0x0000};  // 1, 2, 1.5, 0
  s.tensors = {{"blk.0.post_attention_norm.weight", {4}, kF32, bytes_of(std::vector<float>{1.5f, 1.f, 0.f, 3.f}), std::nullopt},
               {"blk.0.ffn_norm.weight", {4}, kF16, bytes_of(f16_norm), std::nullopt},
               {"blk.0.attn_q.weight", {4, 16}, kF32, bytes_of(iota(64)), std::nullopt}};
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, s);
  const TensorView post = m.tensor("model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(post.ptr<float>()[0], 0.5f);
  EXPECT_EQ(post.ptr<float>()[2], -1.f);
  const StoredTensor pre = m.stored("model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(pre.type, QuantType::F16);
  const uint16_t* h = reinterpret_cast<const uint16_t*>(pre.data);
  EXPECT_EQ(h[0], 0x0000);  // 0
  EXPECT_EQ(h[1], 0x3c00);  // 1
  EXPECT_EQ(h[2], 0x3800);  // 0.5
  EXPECT_EQ(h[3], 0xbc00);  // -1
  // Not llama: Q rows are left alone.
  EXPECT_EQ(m.tensor("model.layers.0.self_attn.q_proj.weight").ptr<float>()[4], 4.f);
  const Config& c = m.config();
  EXPECT_EQ(c.get_string("model_type"), "gemma2");
  EXPECT_EQ(c.get_int("head_dim"), 8);
  EXPECT_EQ(c.get_float("query_pre_attn_scalar"), 8.0);
  EXPECT_EQ(c.get_float("attn_logit_softcapping"), 50.0);
  EXPECT_EQ(c.get_int("sliding_window"), 4096);
  EXPECT_EQ(c.get_string("hidden_activation"), "gelu_pytorch_tanh");
  EXPECT_EQ(c.get_int("vocab_size"), 3);

  s.tensors[1].type = kQ8_0;  // a quantized norm cannot have 1 taken off
  s.tensors[1].ne = {32};
  s.tensors[1].data = Bytes(34, 0);
  EXPECT_NE(error_of([&] { open_spec(dir, s, "q.gguf"); })
                .find("q.gguf: tensor 'blk.0.ffn_norm.weight': norm weights stored as Q8_0 cannot have Gemma's +1 taken off"),
            std::string::npos);
}

TEST(GgufCheckpoint, MoeExpertsAreSlicedPerExpert) {
  GgufSpec s;
  s.kvs = {kv_string("general.architecture", "qwen3moe"), kv_scalar<uint32_t>("qwen3moe.block_count", U32, 1),
           kv_scalar<uint32_t>("qwen3moe.embedding_length", U32, 32),
           kv_scalar<uint32_t>("qwen3moe.attention.head_count", U32, 2),
           kv_scalar<uint32_t>("qwen3moe.expert_count", U32, 3), kv_scalar<uint32_t>("qwen3moe.expert_used_count", U32, 2),
           kv_scalar<uint32_t>("qwen3moe.expert_feed_forward_length", U32, 2),
           kv_scalar<uint32_t>("qwen3moe.vocab_size", U32, 7)};
  Bytes gate;  // [3 experts, 2 rows, 32 cols] in Q8_0: expert e's two rows hold bytes 10e, 10e + 1
  for (uint8_t e = 0; e < 3; ++e)
    for (uint8_t r = 0; r < 2; ++r) gate.insert(gate.end(), 34, uint8_t(10 * e + r));
  s.tensors = {{"blk.0.ffn_gate_exps.weight", {32, 2, 3}, kQ8_0, gate, std::nullopt},
               {"blk.0.ffn_gate_inp.weight", {32, 3}, kF32, bytes_of(iota(96)), std::nullopt}};
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, s);
  for (int e = 0; e < 3; ++e) {
    const StoredTensor t = m.stored("model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj.weight");
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(t.bytes, 68);
    EXPECT_EQ(t.data[0], 10 * e);
    EXPECT_EQ(t.data[34], 10 * e + 1);
  }
  EXPECT_EQ(m.tensor("model.layers.0.mlp.gate.weight").shape_str(), "[3, 32]");
  EXPECT_EQ(m.config().get_int("num_experts"), 3);
  EXPECT_EQ(m.config().get_int("num_experts_per_tok"), 2);
  EXPECT_EQ(m.config().get_int("moe_intermediate_size"), 2);
  EXPECT_EQ(m.config().get_int("vocab_size"), 7);
  EXPECT_EQ(m.config().get_string_list("architectures"), std::vector<std::string>{"Qwen3MoeForCausalLM"});
}

TEST(GgufCheckpoint, HybridEditsAreUndone) {
  // qwen3next: A = -exp(A_log) back to A_log, the squeezed conv kernel unsqueezed, norms minus their folded 1,
  // attn_qkv ([q0 q1 k0 k1 v0 v1]) and attn_gate ([z0 z1]) as stored, borrowed: in_proj_qkv and in_proj_z.
  GgufSpec s = qwen3next_spec();
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, s);
  const TensorView a = m.tensor("model.layers.0.linear_attn.A_log");
  EXPECT_EQ(a.ptr<float>()[0], 0.f);
  EXPECT_FLOAT_EQ(a.ptr<float>()[1], std::log(2.f));
  EXPECT_EQ(m.tensor("model.layers.0.linear_attn.conv1d.weight").shape_str(), "[4, 1, 3]");
  EXPECT_EQ(m.tensor("model.layers.0.input_layernorm.weight").ptr<float>()[1], 0.5f);
  EXPECT_EQ(m.tensor("model.layers.0.linear_attn.norm.weight").ptr<float>()[1], 1.5f);  // a plain gated norm
  EXPECT_FALSE(m.has("model.layers.0.linear_attn.in_proj_qkvz.weight"));  // no gathered copy
  const TensorView qkv = m.tensor("model.layers.0.linear_attn.in_proj_qkv.weight");
  const TensorView z = m.tensor("model.layers.0.linear_attn.in_proj_z.weight");
  EXPECT_EQ(qkv.shape_str(), "[6, 2]");
  EXPECT_EQ(z.shape_str(), "[2, 2]");
  for (int r = 0; r < 6; ++r) EXPECT_EQ(qkv.ptr<float>()[2 * r + 1], float(r)) << r;
  EXPECT_EQ(z.ptr<float>()[1], 10.f);
  EXPECT_EQ(z.ptr<float>()[3], 11.f);
  const Config& c = m.config();
  EXPECT_EQ(c.get_int("linear_num_key_heads"), 2);
  EXPECT_EQ(c.get_int("linear_value_head_dim"), 1);

  s.tensors[0].data = bytes_of(std::vector<float>{-1.f, 0.f});  // 0 is no -exp(x)
  EXPECT_NE(error_of([&] { open_spec(dir, s, "a.gguf"); }).find("a.gguf: tensor 'blk.0.ssm_a': value 0.000000 at 1 is not "
                                                               "negative and finite"),
            std::string::npos);
}

TEST(GgufCheckpoint, Qwen3NextQkvAndGateOfTwoTypesStayApart) {
  // llama-quantize's mixtures raise attn_qkv and not attn_gate: each comes under its own name in its own type, as
  // stored (the layer runs them as two projections).
  GgufSpec s = qwen3next_spec();
  Bytes gate_bf16;
  for (float v : {10.f, 10.f, 11.f, 11.f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put<uint16_t>(gate_bf16, uint16_t(bits >> 16));
  }
  s.tensors[5].type = 30;  // BF16
  s.tensors[5].data = gate_bf16;
  ScratchDir dir;
  const ModelFiles m = open_spec(dir, s);
  EXPECT_FALSE(m.has("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  const TensorView qkv = m.tensor("model.layers.0.linear_attn.in_proj_qkv.weight");
  const TensorView z = m.tensor("model.layers.0.linear_attn.in_proj_z.weight");
  EXPECT_EQ(qkv.shape_str(), "[6, 2]");
  EXPECT_EQ(qkv.dtype, DType::f32);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(qkv.ptr<float>()[2 * r + 1], float(r)) << r;
  EXPECT_EQ(z.shape_str(), "[2, 2]");
  EXPECT_EQ(z.dtype, DType::bf16);
  EXPECT_EQ(std::memcmp(z.data, gate_bf16.data(), gate_bf16.size()), 0);

  // shapes that do not fit the metadata are still refused by name, whatever the types
  for (GgufKvSpec& kv : s.kvs)
    if (kv.key == "qwen3next.ssm.state_size") kv = kv_scalar<uint32_t>(kv.key, 4, 64);
  EXPECT_NE(error_of([&] { open_spec(dir, s, "b.gguf"); })
                .find("b.gguf: tensor 'blk.0.attn_qkv.weight': expected [258, hidden] beside 'blk.0.attn_gate.weight' "
                      "[2, hidden]"),
            std::string::npos);
}

TEST(GgufCheckpoint, RefusalsAreNamed) {
  ScratchDir dir;
  auto refused = [&](const std::function<void(GgufSpec&)>& edit, const std::string& name) {
    GgufSpec s = llama_spec();
    edit(s);
    return error_of([&] { open_spec(dir, s, name); });
  };
  EXPECT_NE(refused([](GgufSpec& s) { s.tensors.push_back({"blk.0.mystery.weight", {4}, kF32, Bytes(16), std::nullopt}); },
                    "a.gguf")
                .find("a.gguf: tensor 'blk.0.mystery.weight': no Hugging Face counterpart for a llama model"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.tensors.push_back({"rope_freqs.weight", {2}, kF32, Bytes(8), std::nullopt}); },
                    "b.gguf")
                .find("b.gguf: tensor 'rope_freqs.weight': per-frequency RoPE factors"),
            std::string::npos);
  auto rope_freqs = [](std::vector<float> v) {
    return [v](GgufSpec& s) {
      s.kvs.pop_back();  // no linear scaling: the factors are the only RoPE scaling
      s.kvs.pop_back();
      s.tensors.push_back({"rope_freqs.weight", {uint64_t(v.size())}, kF32, bytes_of(v), std::nullopt});
    };
  };
  // head_dim 4: frequency 1's wavelength (4443 at theta 500000) is in the smooth band, so its factor is 1.92.
  EXPECT_NE(refused(rope_freqs({1.f, 3.f}), "b2.gguf")
                .find("b2.gguf: tensor 'rope_freqs.weight': factor 3.000000 at frequency 1 does not follow Llama 3's rule"),
            std::string::npos);
  EXPECT_NE(refused(rope_freqs({1.f, 1.f, 1.f}), "b3.gguf")
                .find("b3.gguf: tensor 'rope_freqs.weight': expected 2 F32 values"),
            std::string::npos);
  EXPECT_NE(refused(rope_freqs({0.5f, 1.f}), "b4.gguf").find("RoPE factors must be finite and >= 1"), std::string::npos);
  const std::string unknown = refused([](GgufSpec& s) { s.kvs[0] = kv_string("general.architecture", "rwkv6"); }, "c.gguf");
  EXPECT_NE(unknown.find("c.gguf: key 'general.architecture': 'rwkv6' is not supported as a model source"),
            std::string::npos);
  EXPECT_NE(unknown.find("glm4, "), std::string::npos) << unknown;
  EXPECT_NE(unknown.find(", mamba, mamba2,"), std::string::npos) << unknown;  // the hybrids are listed too
  EXPECT_NE(unknown.find("gpt-oss, "), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("deepseek2, "), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("qwen35moe, rwkv7, nemotron_h, nemotron_h_moe, granitehybrid, kimi-linear)"), std::string::npos) << unknown;
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs.erase(s.kvs.begin() + 2); }, "d.gguf")
                .find("d.gguf: key 'llama.embedding_length': missing"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs[4] = kv_scalar<uint32_t>("llama.attention.head_count", U32, 3); }, "e.gguf")
                .find("tensor 'blk.0.attn_q.weight': 8 rows do not split into 3 heads of even size"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs[10] = kv_string("llama.rope.scaling.type", "longrope"); }, "f.gguf")
                .find("key 'llama.rope.scaling.type': 'longrope' is not supported"),
            std::string::npos);
  // llama.cpp would rotate 2 of each head's 4 channels; transformers' Llama cannot say so (it rotates whole heads).
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs.push_back(kv_scalar<uint32_t>("llama.rope.dimension_count", U32, 2)); },
                    "g.gguf")
                .find("g.gguf: key 'llama.rope.dimension_count': 2 channels, but llama rotates 4 of each head's 4"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.kvs.push_back(kv_scalar<uint32_t>("llama.rope.dimension_count", U32, 6)); },
                    "h.gguf")
                .find("h.gguf: key 'llama.rope.dimension_count': 6 is not an even width within head_dim 4"),
            std::string::npos);
  EXPECT_NE(refused([](GgufSpec& s) { s.tensors[1].name = "blk.0.attn_q.weight"; }, "g.gguf")
                .find("duplicate tensor name"),
            std::string::npos);
}

}  // namespace
}  // namespace attnzoo
