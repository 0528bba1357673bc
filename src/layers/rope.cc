#include "layers/rope.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace attnzoo {
namespace {

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The dimension index at which a frequency completes `rotations` turns over the original context.
double yarn_correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

Rope::Rope(const RopeConfig& config) : config_(config) {
  RopeConfig& c = config_;
  require(c.head_dim > 0, "head_dim", "must be positive");
  if (c.type == "none") {  // a NoPE layer: no channel rotates, apply() leaves q and k as they are
    c.rotary_dim = 0;
    return;
  }
  if (c.rotary_dim == 0) c.rotary_dim = c.head_dim;
  // Rotating every channel: an odd count is head_dim's, the key a config names, not a derived rotary_dim.
  if (c.rotary_dim == c.head_dim)
    require(c.head_dim % 2 == 0, "head_dim",
            "must be even for rotary position embeddings, got " + std::to_string(c.head_dim));
  require(c.rotary_dim > 0 && c.rotary_dim <= c.head_dim && c.rotary_dim % 2 == 0, "rotary_dim",
          "must be even and at most head_dim, got " + std::to_string(c.rotary_dim));
  require(c.theta > 0, "rope_theta", "must be positive");
  const int64_t dim = c.rotary_dim, half = dim / 2;
  std::vector<double> base(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) base[size_t(i)] = 1.0 / std::pow(c.theta, double(2 * i) / double(dim));
  inv_freq_.resize(size_t(half));
  if (c.type == "default") {
    for (int64_t i = 0; i < half; ++i) inv_freq_[size_t(i)] = float(base[size_t(i)]);
  } else if (c.type == "linear") {  // position interpolation: positions divided by the factor
    require(c.factor > 0, "rope_scaling.factor", "must be positive");
    for (int64_t i = 0; i < half; ++i) inv_freq_[size_t(i)] = float(base[size_t(i)] / c.factor);
  } else if (c.type == "llama3") {
    require(c.factor > 0, "rope_scaling.factor", "must be positive");
    require(c.original_max_position_embeddings > 0, "rope_scaling.original_max_position_embeddings", "must be set");
    require(c.high_freq_factor != c.low_freq_factor, "rope_scaling.high_freq_factor", "must differ from low_freq_factor");
    const double old_len = double(c.original_max_position_embeddings);
    const double low_wavelen = old_len / c.low_freq_factor, high_wavelen = old_len / c.high_freq_factor;
    for (int64_t i = 0; i < half; ++i) {
      const double f = base[size_t(i)], wavelen = 2.0 * M_PI / f;
      double out;
      if (wavelen > low_wavelen) {
        out = f / c.factor;  // long wavelengths: interpolate fully
      } else if (wavelen < high_wavelen) {
        out = f;  // short wavelengths: untouched
      } else {
        const double smooth = (old_len / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
        out = (1.0 - smooth) * f / c.factor + smooth * f;
      }
      inv_freq_[size_t(i)] = float(out);
    }
  } else if (c.type == "yarn") {
    require(c.factor > 0, "rope_scaling.factor", "must be positive");
    require(c.original_max_position_embeddings > 0, "rope_scaling.original_max_position_embeddings", "must be set");
    double low = yarn_correction_dim(c.beta_fast, double(dim), c.theta, double(c.original_max_position_embeddings));
    double high = yarn_correction_dim(c.beta_slow, double(dim), c.theta, double(c.original_max_position_embeddings));
    if (c.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, double(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;  // weight of the unscaled frequency
      const double f = base[size_t(i)];
      inv_freq_[size_t(i)] = float(f / c.factor * (1.0 - extrapolation) + f * extrapolation);
    }
    double af = c.attention_factor;
    if (af <= 0) af = (c.mscale > 0 && c.mscale_all_dim > 0) ? yarn_mscale(c.factor, c.mscale) / yarn_mscale(c.factor, c.mscale_all_dim)
                                                              : yarn_mscale(c.factor, 1.0);
    attention_scale_ = float(af);
  } else if (c.type == "longrope") {
    require(int64_t(c.ext_factors.size()) == half, "rope_scaling.short_factor / long_factor",
            "must have rotary_dim / 2 = " + std::to_string(half) + " entries, got " + std::to_string(c.ext_factors.size()));
    for (int64_t i = 0; i < half; ++i) {
      const double e = c.ext_factors[size_t(i)];
      require(std::isfinite(e) && e > 0, "rope_scaling.short_factor / long_factor", "entries must be positive");
      inv_freq_[size_t(i)] = float(base[size_t(i)] / e);
    }
    require(std::isfinite(c.attention_factor) && c.attention_factor > 0, "rope_scaling.attention_factor",
            "must be positive");
    attention_scale_ = float(c.attention_factor);
  } else {
    throw ArgumentError("rope_type: unsupported '" + c.type + "' (supported: default, linear, llama3, yarn, longrope)");
  }
}

void Rope::angles(int32_t position, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    // The angle is rounded to f32 first, as transformers computes it (position * inv_freq in f32).
    const float a = float(position) * inv_freq_[i];
    cos_out[i] = float(std::cos(double(a))) * attention_scale_;
    sin_out[i] = float(std::sin(double(a))) * attention_scale_;
  }
}

namespace {

// The cos / sin rows of the last positions rotated on this thread, and the frequencies and scale they came from.
// Every layer of a forward rotates q and k at the same positions with the same frequencies (one config per model,
// usually): the table is computed once per forward instead of twice per layer (perf, 512-token Qwen3-0.6B
// prefill, one thread: sin / cos were ~1.5% of it). The key is compared bit for bit, so a hit gives the angles
// angles() would.
struct AngleTable {
  std::vector<int32_t> positions;
  std::vector<float> inv_freq;
  float scale = 0.f;
  std::vector<float> rows;  // [tokens][cos half | sin half]

  bool holds(const int32_t* p, int64_t tokens, const std::vector<float>& freq, float s) const {
    return positions.size() == size_t(tokens) && inv_freq.size() == freq.size() &&
           std::memcmp(&scale, &s, sizeof s) == 0 &&
           std::memcmp(positions.data(), p, size_t(tokens) * sizeof *p) == 0 &&
           std::memcmp(inv_freq.data(), freq.data(), freq.size() * sizeof(float)) == 0;
  }
};

}  // namespace

void Rope::apply(float* x, int64_t tokens, int64_t heads, int64_t token_stride, const int32_t* positions) const {
  const int64_t half = config_.rotary_dim / 2, D = config_.head_dim;
  if (half == 0 || tokens <= 0) return;  // NoPE
  thread_local AngleTable table;  // grown once: a decode step allocates nothing
  if (!table.holds(positions, tokens, inv_freq_, attention_scale_)) {
    table.positions.assign(positions, positions + tokens);
    table.inv_freq = inv_freq_;
    table.scale = attention_scale_;
    table.rows.resize(size_t(tokens * 2 * half));
    for (int64_t t = 0; t < tokens; ++t) {
      float* row = table.rows.data() + t * 2 * half;
      angles(positions[t], row, row + half);
    }
  }
  const bool interleaved = config_.layout == RopeLayout::interleaved;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* c = table.rows.data() + t * 2 * half;
    const float* s = c + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * D;
      if (interleaved) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = b * c[i] + a * s[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  }
}

void rope_reference(const Rope& rope, float* x, int64_t tokens, int64_t heads, int64_t token_stride,
                    const int32_t* positions) {
  const RopeConfig& cfg = rope.config();
  const int64_t half = cfg.rotary_dim / 2, D = cfg.head_dim;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * token_stride + h * D;
      for (int64_t i = 0; i < half; ++i) {
        const double a = double(positions[t]) * double(rope.inv_freq()[size_t(i)]);
        const double c = std::cos(a) * rope.attention_scale(), s = std::sin(a) * rope.attention_scale();
        const int64_t i0 = cfg.layout == RopeLayout::interleaved ? 2 * i : i;
        const int64_t i1 = cfg.layout == RopeLayout::interleaved ? 2 * i + 1 : i + half;
        const double p = v[i0], q = v[i1];
        v[i0] = float(p * c - q * s);
        v[i1] = float(q * c + p * s);
      }
    }
}

}  // namespace attnzoo
