#pragma once
// Rotary position embedding. Frequencies follow transformers' rope types: default, llama3 (wavelength-banded
// scaling), yarn (ramped interpolation plus an attention factor on cos/sin), longrope (Phi-3's per-frequency
// divisors plus an attention factor; the config reader picks the short or the long set, see hf_config.cc) and none
// (NoPE layers). Partial rotary rotates only the first rotary_dim channels of each head. Two channel layouts: half
// rotation (GPT-NeoX / Hugging Face Llama: channel i pairs with i + rotary_dim/2) and interleaved (GPT-J: channels 2i
// and 2i+1).
#include <cstdint>
#include <string>
#include <vector>

namespace attnzoo {

enum class RopeLayout { half, interleaved };

struct RopeConfig {
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // 0: head_dim
  double theta = 10000.0;
  RopeLayout layout = RopeLayout::half;
  std::string type = "default";  // default | linear | llama3 | yarn | longrope | none (NoPE: no rotation)
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;  // 0: derived from factor (and mscale / mscale_all_dim)
  double mscale = 0.0, mscale_all_dim = 0.0;
  bool truncate = true;
  // longrope: inv_freq[i] = theta^(-2i / rotary_dim) / ext_factors[i] (rotary_dim / 2 values); attention_factor as
  // given (the reader derives it when the config does not)
  std::vector<double> ext_factors;
};

class Rope {
 public:
  Rope() = default;
  // Validates the config (ArgumentError naming the field).
  explicit Rope(const RopeConfig& config);

  const RopeConfig& config() const { return config_; }
  int64_t rotary_dim() const { return config_.rotary_dim; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_scale() const { return attention_scale_; }

  // Rotates `heads` heads of every token in place: token t's head h starts at x + t * token_stride + h * head_dim,
  // at position positions[t].
  void apply(float* x, int64_t tokens, int64_t heads, int64_t token_stride, const int32_t* positions) const;
  // cos/sin for one position, rotary_dim / 2 each, attention scale included.
  void angles(int32_t position, float* cos_out, float* sin_out) const;

 private:
  RopeConfig config_;
  std::vector<float> inv_freq_;
  float attention_scale_ = 1.f;
};

// Plain definition for tests: double-precision angles from the same inverse frequencies.
void rope_reference(const Rope& rope, float* x, int64_t tokens, int64_t heads, int64_t token_stride,
                    const int32_t* positions);

}  // namespace attnzoo
