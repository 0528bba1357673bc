#pragma once
// A GGUF file seen as the Hugging Face checkpoint it was converted from, so every architecture builder reads it
// unchanged: the config.json transformers would have, synthesized from the metadata, and each GGUF tensor under
// its Hugging Face name with the converter's edits undone (llama.cpp's convert_hf_to_gguf.py):
//   llama      Q and K rows are permuted within each head (pairs interleaved for ggml's RoPE), undone exactly;
//              a row permutation, so it holds for quantized rows too (blocks run along the row)
//   gemma*     RMSNorm weights are stored with the +1 of Gemma's x * (1 + w) folded in; it is taken off again
//   *moe       the experts' stacked [n_expert, rows, cols] tensors are exposed per expert, as transformers names them
//              (a fused ffn_gate_up_exps as gate_proj and up_proj)
//   llama 3.1+ RoPE scaling is stored as rope_freqs.weight (per-frequency divisors); it becomes rope_scaling
//   hybrids    the state-space and recurrent families (gguf_hybrids.h): A stored as -exp(A_log), squeezed conv
//              kernels, reshaped norms, Qwen3-Next's split in_proj_qkvz, Qwen3.5's tiled value heads, RWKV-7's
//              fused token-shift mixes
// Supported architectures: llama, qwen2, qwen3, qwen3moe, gemma, gemma2, gemma3, olmo2, phi3 (gguf_phi3.h), smollm3,
// command-r, cohere2, glm4, glm4moe and minimax-m2 (gguf_sigmoid_moe.h), gpt-oss (gguf_gpt_oss.h), mistral3, deepseek2
// (gguf_deepseek2.h) and gguf_hybrids.h's (qwen3next, qwen35, qwen35moe, rwkv7, kimi-linear and the state-space
// families among them).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loader/gguf.h"
#include "loader/value_head_tiling.h"

namespace attnzoo {

// config.json text for the file's general.architecture. Throws LoadError naming the file and the key (or the
// architecture when it is not one of the supported ones).
std::string gguf_hf_config_json(const GgufFile& f);

// What reading a GGUF tensor under its Hugging Face name takes.
enum class GgufFix : uint8_t {
  none,
  unpermute_rope_rows,  // llama's q_proj / k_proj: heads = num_attention_heads / num_key_value_heads
  subtract_one,         // gemma's (and qwen3next's) norm weights
  log_of_negated,       // Mamba's A_log, stored as A = -exp(A_log): becomes log(-A), in F32
  untile_value_heads,   // Qwen3.5's linear attention: `value_heads` alone (log_of_negated may carry it too)
  join_kv_b,            // deepseek2's attn_k_b / attn_v_b (`pieces`, `heads`) joined into kv_b_proj, F32
};

// A part of one GGUF tensor that goes into another (join_kv_b): `bytes` bytes at `start`, which must lie within
// the source tensor's [data, data + data_bytes).
struct GgufPiece {
  const uint8_t* start = nullptr;
  int64_t bytes = 0;
  std::string tensor;  // the source, for errors
  const uint8_t* data = nullptr;
  int64_t data_bytes = 0;
  QuantType type = QuantType::F32;  // join_kv_b: the source's type and row length
  int64_t row_elems = 0;
};

struct GgufHfTensor {
  std::string hf_name;
  std::string gguf_name;
  std::vector<int64_t> shape;  // torch order (GGUF's ne reversed; one expert's slice for a stacked tensor)
  QuantType type = QuantType::F32;
  const uint8_t* data = nullptr;  // into the mapping (the slice for an expert)
  int64_t bytes = 0;
  GgufFix fix = GgufFix::none;
  int64_t heads = 0;  // for unpermute_rope_rows
  std::vector<GgufPiece> pieces;  // for join_kv_b, in order
  ValueHeadTiling value_heads;     // for untile_value_heads
};

// The Hugging Face tensor's bytes once its fix is undone (fix != none), and the type they are in. Throws
// LoadError naming `file` and the tensor when the stored values cannot be turned back (a non-negative A).
struct GgufHfBytes {
  std::vector<uint8_t> bytes;
  QuantType type = QuantType::F32;
};
GgufHfBytes undo_gguf_fix(const GgufHfTensor& t, const std::string& file);

// Every tensor of the file under its Hugging Face name, sorted by that name. A tensor with no Hugging Face
// counterpart is refused (LoadError naming the file and tensor): ignoring a weight the model needs would give
// silent garbage.
std::vector<GgufHfTensor> gguf_hf_tensors(const GgufFile& f);

// The converter's direction of the same tables (attnzoo quantize writes GGUF files): the GGUF architecture of a
// config.json architectures[0] (nullopt when it is not one of the supported ones), and the GGUF name of a Hugging
// Face tensor name for that architecture (nullopt when it has none).
struct GgufArchOf {
  std::string gguf;  // general.architecture
  bool permuted_qk;  // llama: Q / K rows interleaved for ggml's RoPE (permute_rope_rows)
  bool norm_plus_one;  // gemma*: RMSNorm weights stored as 1 + w
};
std::optional<GgufArchOf> gguf_arch_for_hf(const std::string& hf_class);
std::optional<std::string> gguf_tensor_name(const std::string& gguf_arch, const std::string& hf_name);

// Undoes llama.cpp's RoPE row permutation for `rows` rows of `row_bytes` bytes split into `heads` heads:
// GGUF row h*D + 2j + i holds Hugging Face row h*D + i*D/2 + j (D = rows / heads, i in {0, 1}, j < D/2).
void unpermute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, int64_t heads);
// The converter's permutation, the inverse: Hugging Face row h*D + i*D/2 + j goes to GGUF row h*D + 2j + i.
void permute_rope_rows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t row_bytes, int64_t heads);

}  // namespace attnzoo
