#include "convert/gguf_requantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quantize.h"
#include "loader/gguf.h"
#include "loader/gguf_test_files.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using namespace testing;  // NOLINT: the spec helpers

Bytes halves(const std::vector<float>& v) {
  Bytes b;
  for (float x : v) put<uint16_t>(b, f32_to_half(x));
  return b;
}

std::vector<float> wave(size_t n, float scale, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i) + phase) + 0.01f * float(i % 7);
  return v;
}

std::string message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void write(const std::string& path, const GgufSpec& s) {
  const Bytes b = gguf_bytes(s);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A llama-named file of every case the policy meets: F32 and F16 matrices, a 1-D F16 norm (written F32), a
// router and a conv kernel llama-quantize never quantizes (kept as stored), a Q8_0 matrix (refused, then
// requantized), rows of 64 (Q4_K's fallback Q5_0).
struct Source {
  std::vector<float> embd = wave(256 * 4, 0.5f, 0.f), q = wave(256 * 2, 0.3f, 1.f), norm = wave(256, 1.f, 2.f),
                     router = wave(256 * 4, 0.2f, 3.f), conv = wave(4 * 8, 0.2f, 4.f), down = wave(256 * 2, 0.4f, 5.f),
                     narrow = wave(64 * 2, 0.3f, 6.f);
  Bytes down_q8;
  GgufSpec spec;
  Source() {
    down_q8.resize(size_t(*quant_row_bytes(QuantType::Q8_0, 256)) * 2);
    quantize_row(QuantType::Q8_0, down.data(), down_q8.data(), 512);
    spec.kvs = {kv_string("general.architecture", "llama"), kv_scalar<uint32_t>("general.file_type", 4, 1),
                kv_string("tokenizer.chat_template", std::string("{{ x }}\0\xff", 9)),
                kv_scalar<uint32_t>("llama.block_count", 4, 1)};
    spec.tensors = {{"token_embd.weight", {256, 4}, 0, f32_bytes(embd), std::nullopt},
                    {"blk.0.attn_q.weight", {256, 2}, 1, halves(q), std::nullopt},
                    {"blk.0.attn_norm.weight", {256}, 1, halves(norm), std::nullopt},
                    {"blk.0.ffn_gate_inp.weight", {256, 4}, 0, f32_bytes(router), std::nullopt},
                    {"blk.0.ssm_conv1d.weight", {4, 8}, 0, f32_bytes(conv), std::nullopt},
                    {"blk.0.ffn_down.weight", {256, 2}, 8, down_q8, std::nullopt},
                    {"blk.0.attn_k.weight", {64, 2}, 0, f32_bytes(narrow), std::nullopt}};
  }
};

std::vector<float> from_halves(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  const Bytes h = halves(v);
  dequantize_row(QuantType::F16, h.data(), out.data(), int64_t(v.size()));
  return out;
}

Bytes bytes_of(const GgufTensor& t) { return Bytes(t.data, t.data + t.bytes); }

TEST(GgufRequantize, EachTensorByThePolicyMetadataKept) {
  ScratchDir dir;
  const std::string src = (dir.path() / "in.gguf").string(), out = (dir.path() / "out.gguf").string();
  const Source s;
  write(src, s.spec);
  QuantizeOptions o;
  o.policy.type = QuantType::Q4_K;
  EXPECT_NE(message([&] { requantize_gguf(src, out, o); })
                .find("in.gguf: tensor 'blk.0.ffn_down.weight' is already quantized (Q8_0); quantizing it again to "
                      "Q4_K compounds the two roundings: pass --allow-requantize"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));

  o.allow_requantize = true;
  const QuantizeSummary sum = requantize_gguf(src, out, o);
  EXPECT_EQ(sum.architecture, "llama");
  EXPECT_EQ(sum.requantized, 1u);
  const GgufFile f = GgufFile::open(out);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_FALSE(f.has("general.alignment"));
  ASSERT_EQ(f.metadata().size(), 5u);  // the four keys in order, quantization_version appended
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  EXPECT_EQ(f.get_u32("general.file_type"), 14u);  // LLAMA_FTYPE_MOSTLY_Q4_K_S
  EXPECT_EQ(f.get_string("tokenizer.chat_template"), std::string("{{ x }}\0\xff", 9));
  EXPECT_EQ(f.metadata()[3].first, "llama.block_count");
  EXPECT_EQ(f.get_u32("general.quantization_version"), 2u);

  ASSERT_EQ(f.tensors().size(), s.spec.tensors.size());
  for (size_t i = 0; i < f.tensors().size(); ++i) EXPECT_EQ(f.tensors()[i].name, s.spec.tensors[i].name);
  auto expect = [&](const std::string& name, QuantType type, const std::vector<float>& x, int64_t cols) {
    const GgufTensor& t = f.tensor(name);
    EXPECT_EQ(t.type, type) << name;
    EXPECT_EQ(bytes_of(t), quantize_matrix(type, x.data(), int64_t(x.size()) / cols, cols, nullptr, name)) << name;
  };
  expect("token_embd.weight", QuantType::Q6_K, s.embd, 256);
  expect("blk.0.attn_q.weight", QuantType::Q4_K, from_halves(s.q), 256);  // the f16 values, quantized
  expect("blk.0.attn_norm.weight", QuantType::F32, from_halves(s.norm), 256);
  expect("blk.0.ffn_gate_inp.weight", QuantType::F32, s.router, 256);
  expect("blk.0.ssm_conv1d.weight", QuantType::F32, s.conv, 4);
  std::vector<float> down(512);
  dequantize_row(QuantType::Q8_0, s.down_q8.data(), down.data(), 512);
  expect("blk.0.ffn_down.weight", QuantType::Q4_K, down, 256);
  expect("blk.0.attn_k.weight", QuantType::Q5_0, s.narrow, 64);  // rows of 64: Q4_K's fallback

  // The Q8_0 matrix copied as it is where its type stays, without the flag.
  o = {};
  o.policy.type = QuantType::Q8_0;
  requantize_gguf(src, out, o);
  EXPECT_EQ(bytes_of(GgufFile::open(out).tensor("blk.0.ffn_down.weight")), s.down_q8);
}

// A file at 64-byte lines with general.alignment 64 (what attnzoo exported before) comes out at llama.cpp's 32 with
// no key, its tensors' bytes those of the 32-aligned source's output: llama-quantize, which copies the key but pads
// to 32, can then read what it writes from it.
TEST(GgufRequantize, AnyAlignmentWrittenAtLlamaCppsThirtyTwo) {
  ScratchDir dir;
  const std::string plain = (dir.path() / "plain.gguf").string(), wide = (dir.path() / "wide.gguf").string();
  const std::string plain_out = (dir.path() / "plain_out.gguf").string(),
                    wide_out = (dir.path() / "wide_out.gguf").string();
  Source s;
  write(plain, s.spec);
  s.spec.alignment = 64;
  s.spec.kvs.push_back(kv_scalar<uint32_t>("general.alignment", 4, 64));
  write(wide, s.spec);
  ASSERT_EQ(GgufFile::open(wide).alignment(), 64u);
  QuantizeOptions o;
  o.policy.type = QuantType::Q8_0;
  requantize_gguf(plain, plain_out, o);
  requantize_gguf(wide, wide_out, o);
  const GgufFile a = GgufFile::open(plain_out), b = GgufFile::open(wide_out);
  EXPECT_EQ(b.alignment(), 32u);
  EXPECT_FALSE(b.has("general.alignment"));
  ASSERT_EQ(b.metadata().size(), a.metadata().size());
  ASSERT_EQ(b.tensors().size(), a.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(b.tensors()[i].offset % 32, 0u) << b.tensors()[i].name;
    EXPECT_EQ(bytes_of(b.tensors()[i]), bytes_of(a.tensors()[i])) << a.tensors()[i].name;
  }
  EXPECT_EQ(std::filesystem::file_size(wide_out), std::filesystem::file_size(plain_out));
}

TEST(GgufRequantize, BadSourcesNamed) {
  ScratchDir dir;
  const std::string src = (dir.path() / "in.gguf").string(), out = (dir.path() / "out.gguf").string();
  Source s;
  s.spec.tensors.push_back({"blk.0.ids.weight", {32, 2}, 26, Bytes(256, 0), std::nullopt});  // I32
  write(src, s.spec);
  QuantizeOptions o;
  o.policy.type = QuantType::Q8_0;
  o.allow_requantize = true;
  EXPECT_NE(message([&] { requantize_gguf(src, out, o); })
                .find("in.gguf: tensor 'blk.0.ids.weight' is stored as I32, which quantize cannot read back to f32"),
            std::string::npos);
  o.policy.keep = {"ids"};  // copied as stored: the rest goes through
  EXPECT_NO_THROW(requantize_gguf(src, out, o));

  Source nan;
  nan.q[256 + 5] = NAN;
  nan.spec.tensors[1].data = halves(nan.q);
  write(src, nan.spec);
  EXPECT_NE(message([&] { requantize_gguf(src, out, {}); })
                .find("in.gguf: tensor 'blk.0.attn_q.weight': value at row 1, column 5 is nan"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));

  // An importance vector whose length is not the tensor's row length: named with both counts, nothing written.
  Source imp;  // the loader's view of the file, which places importance, wants the attention's shape
  imp.spec.kvs.push_back(kv_scalar<uint32_t>("llama.attention.head_count", 4, 1));
  imp.spec.kvs.push_back(kv_scalar<uint32_t>("llama.attention.head_count_kv", 4, 1));
  imp.spec.kvs.push_back(kv_scalar<uint32_t>("llama.embedding_length", 4, 256));
  std::erase_if(imp.spec.tensors, [](const auto& t) {  // no Hugging Face llama tensor for these two
    return t.name == "blk.0.ffn_gate_inp.weight" || t.name == "blk.0.ssm_conv1d.weight";
  });
  write(src, imp.spec);
  QuantizeOptions bad;
  bad.importance = {{"model.layers.0.mlp.down_proj.weight", std::vector<float>(7, 1.f)}};
  bad.allow_requantize = true;
  EXPECT_EQ(message([&] { requantize_gguf(src, out, bad); }),
            "importance for tensor 'blk.0.ffn_down.weight' of " + src + ": 7 values, its rows hold 256");
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));

  Source split;
  split.spec.kvs.push_back(kv_scalar<uint16_t>("split.count", 2, 3));
  write(src, split.spec);
  EXPECT_NE(message([&] { requantize_gguf(src, out, {}); }).find("key 'split.count': this is one part of a split"),
            std::string::npos);
}

// The parser accepts a 0 in ne (an empty tensor takes no bytes), but quantize sizes every tensor by its rows of
// ne[0] values: refused by name before any of those divisions (ne[0] = 0 stopped the process with SIGFPE).
TEST(GgufRequantize, EmptyTensorsNamed) {
  ScratchDir dir;
  const std::string src = (dir.path() / "in.gguf").string(), out = (dir.path() / "out.gguf").string();
  for (const std::vector<uint64_t>& ne : {std::vector<uint64_t>{0}, {0, 4}, {256, 0}}) {
    Source s;
    s.spec.tensors.push_back({"blk.0.empty.weight", ne, 0, {}, std::nullopt});
    write(src, s.spec);
    const std::string e = message([&] { requantize_gguf(src, out, {}); });
    EXPECT_NE(e.find("in.gguf: tensor 'blk.0.empty.weight': ne ["), std::string::npos) << e;
    EXPECT_NE(e.find("has an empty dimension"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  }
}

TEST(GgufRequantize, TensorsLlamaQuantizeLeavesAsStored) {
  for (const char* name :
       {"blk.3.ffn_gate_inp.weight", "blk.0.ffn_gate_inp_shexp.weight", "blk.1.ssm_conv1d.weight",
        "blk.2.ssm_conv1d_q.weight", "blk.0.ssm_a", "blk.0.ssm_d", "blk.0.ssm_norm.weight", "blk.0.shortconv.conv.weight",
        "blk.0.time_mix_lerp_fused.weight", "blk.0.time_mix_w1.weight", "blk.0.time_mix_a0.weight",
        "blk.0.time_mix_g2.weight", "blk.0.time_mix_first.weight", "blk.0.ffn_gate_exps.bias",
        "blk.0.attn_sinks"})
    EXPECT_TRUE(kept_as_stored(name)) << name;
  for (const char* name : {"token_embd.weight", "output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_gate_exps.weight",
                           "blk.0.ssm_in.weight", "blk.0.ssm_out.weight", "blk.0.time_mix_key.weight",
                           "blk.0.time_mix_w3.weight", "blk.0.time_mix_output.weight"})
    EXPECT_FALSE(kept_as_stored(name)) << name;
}

}  // namespace
}  // namespace attnzoo
