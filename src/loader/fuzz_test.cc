// A deterministic mutation fuzzer over the loaders: valid safetensors and GGUF files and JSON configs made here are
// mutated (bit flips, byte edits, insertions, deletions, truncation, header-length edits, number swaps) and each
// result must either parse or throw the documented LoadError — never crash, hang or read out of bounds (run under
// -fsanitize=address for the last part). Seeded, so a failure names an iteration that reproduces.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "loader/fuzz_exercise.h"
#include "loader/fuzz_mutator.h"
#include "loader/gguf_test_files.h"
#include "loader/test_files.h"
#include "loader/testdata/python_fixture.h"

namespace attnzoo {
namespace {

using testing::raw_tensor;
using testing::safetensors_bytes;
using fuzzing::Bytes;
using fuzzing::Mutator;

// Each target stops at kIterations or after kSeconds, whichever comes first. For a longer manual run (e.g. under
// -fsanitize=address): ATTNZOO_FUZZ_ITERATIONS=1000000 ATTNZOO_FUZZ_SECONDS=600 test_loader --gtest_filter='LoaderFuzz*'
int env_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
const int kIterations = env_or("ATTNZOO_FUZZ_ITERATIONS", 40000);
const double kSeconds = env_or("ATTNZOO_FUZZ_SECONDS", 3);

std::vector<Bytes> safetensors_seeds() {
  std::vector<Bytes> seeds;
  seeds.push_back(safetensors_bytes({raw_tensor("w", "F32", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})}));
  seeds.push_back(safetensors_bytes(
      {raw_tensor("model.layers.0.mlp.down_proj.weight", "BF16", {2, 4}, std::vector<uint16_t>(8, 0x3f80)),
       raw_tensor("b", "I64", {3}, std::vector<int64_t>{1, -1, 7}),
       raw_tensor("s", "F16", {}, std::vector<uint16_t>{0x3c00}),
       raw_tensor("e", "U8", {0}, std::vector<uint8_t>{}),
       raw_tensor("d", "F64", {1, 1, 1, 1, 1, 1, 1}, std::vector<double>{2.5})},
      {{"format", "pt"}, {"k\"\\", "v\xC3\xA9"}}));
  seeds.emplace_back(std::begin(testdata::kPythonFixture), std::end(testdata::kPythonFixture));
  return seeds;
}

std::vector<Bytes> gguf_seeds() {
  using namespace testing;  // NOLINT: the GGUF spec helpers
  GgufSpec small;
  small.kvs = {kv_string("general.architecture", "llama"), kv_scalar<uint32_t>("llama.block_count", 4, 1),
               kv_scalar<uint32_t>("llama.embedding_length", 4, 4), kv_scalar<uint32_t>("llama.attention.head_count", 4, 1),
               kv_scalar<uint32_t>("llama.feed_forward_length", 4, 8)};
  small.tensors = {{"token_embd.weight", {4, 2}, 0, Bytes(32, 0x3f), std::nullopt},
                   {"blk.0.attn_q.weight", {4, 4}, 0, Bytes(64, 0x3e), std::nullopt},
                   {"blk.0.ffn_norm.weight", {4}, 0, Bytes(16, 0x3d), std::nullopt}};
  GgufSpec rich;
  rich.version = 2;
  rich.alignment = 64;
  Bytes strings, nested;
  for (const char* s : {"<s>", "</s>", "\xC3\xA9"}) put_string(strings, s);
  const Bytes inner = array_value(0, 2, Bytes{1, 2});
  nested = array_value(9, 1, inner);
  rich.kvs = {kv_scalar<uint32_t>("general.alignment", 4, 64), kv_array("tokenizer.ggml.tokens", 8, 3, strings),
              kv_array("n", 9, 1, nested), kv_scalar<float>("f", 6, 0.5f), kv_scalar<uint8_t>("b", 7, 1),
              kv_scalar<int64_t>("i", 11, -3), kv_scalar<double>("d", 12, 2.0)};
  rich.tensors = {{"blk.0.attn_q.weight", {32, 2}, 3, Bytes(40, 0x11), std::nullopt},
                  {"blk.0.ffn_down.weight", {256, 1}, 12, Bytes(144, 0x22), std::nullopt},
                  {"output_norm.weight", {4}, 1, Bytes(8, 0x33), std::nullopt}};
  // The hybrid families' mappings: gathered rows (qwen3next), tiled value heads (qwen35), fused mixes (rwkv7),
  // per-layer head counts (lfm2, jamba), stacked experts under LFM2-MoE's names (lfm2moe), Kimi Linear's KDA edits
  // and kv_b join (kimi-linear).
  return {gguf_bytes(small),         gguf_bytes(rich),         gguf_bytes(qwen3next_spec()),
          gguf_bytes(qwen35_spec()), gguf_bytes(rwkv7_spec()), gguf_bytes(lfm2_spec()),
          gguf_bytes(jamba_spec()),  gguf_bytes(lfm2moe_spec()), gguf_bytes(kimi_linear_spec())};
}

std::vector<Bytes> json_seeds() {
  const char* texts[] = {
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "rope_theta": 500000.0,
          "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "torch_dtype": "bfloat16",
          "eos_token_id": [128001, 128009], "tie_word_embeddings": false, "sliding_window": null,
          "text_config": {"num_attention_heads": 32, "dtype": "float16"}})",
      R"({"weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b": "x"}, "metadata": {"total_size": 1e3}})",
      R"(["\ud83d\ude00\u00e9\n", -0.5e-7, 12345678901234567890, [[[]]], {"": true}])",
  };
  std::vector<Bytes> seeds;
  for (const char* t : texts) seeds.emplace_back(t, t + std::strlen(t));
  return seeds;
}

template <typename Fn>
void run_fuzz(const char* what, const std::vector<Bytes>& seeds, bool is_safetensors, Fn exercise) {
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0, rejected = 0, i = 0;
  for (; i < kIterations; ++i) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > kSeconds) break;
    Mutator m(0x5eed0000u + uint64_t(i));
    Bytes b = seeds[size_t(i) % seeds.size()];
    if (is_safetensors && i % 2 == 1) {
      // Structure-aware half: mutate only the JSON header and rewrite its length.
      uint64_t n;
      std::memcpy(&n, b.data(), 8);
      Bytes header(b.begin() + 8, b.begin() + 8 + long(n));
      Bytes data(b.begin() + 8 + long(n), b.end());
      m.mutate(header, false);
      b.assign(8, 0);
      b.insert(b.end(), header.begin(), header.end());
      b.insert(b.end(), data.begin(), data.end());
      Mutator::fix_header_length(b, header.size());
    } else {
      m.mutate(b, is_safetensors);
    }
    try {
      exercise(b.data(), b.size());
      ++accepted;
    } catch (const LoadError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << " iteration " << i << ": undocumented exception: " << e.what();
    }
  }
  std::printf("[fuzz] %s: %d inputs, %d accepted, %d rejected\n", what, i, accepted, rejected);
  // A fuzzer whose every input is rejected tests nothing past the first check.
  EXPECT_GT(accepted, i / 50) << what;
  EXPECT_GT(rejected, i / 50) << what;
  EXPECT_GT(i, 1000) << what << ": too few iterations in the time budget";
}

TEST(LoaderFuzz, SeedsAreValid) {
  for (const Bytes& s : safetensors_seeds()) EXPECT_TRUE(fuzzing::exercise_safetensors(s.data(), s.size()));
  for (const Bytes& s : json_seeds()) EXPECT_TRUE(fuzzing::exercise_json(s.data(), s.size()));
  for (const Bytes& s : gguf_seeds()) EXPECT_TRUE(fuzzing::exercise_gguf(s.data(), s.size()));
}

TEST(LoaderFuzz, SafetensorsMutations) {
  run_fuzz("safetensors", safetensors_seeds(), true, fuzzing::exercise_safetensors);
}

// Byte-level mutations only: GGUF is binary, so the JSON-aware number edits simply act as more byte edits.
TEST(LoaderFuzz, GgufMutations) { run_fuzz("gguf", gguf_seeds(), false, fuzzing::exercise_gguf); }

TEST(LoaderFuzz, JsonMutations) { run_fuzz("json", json_seeds(), false, fuzzing::exercise_json); }

}  // namespace
}  // namespace attnzoo
