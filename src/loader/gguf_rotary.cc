// The share of each head a GGUF file's architecture rotates, stated in its synthesized config.
#include "loader/gguf_hf_util.h"
#include "loader/rotary_share.h"

namespace attnzoo::gguf_hf {

void add_rotary_share(JsonObject& c, const Meta& m, const std::string& model_type, int64_t head_dim) {
  const std::string key = m.p + "rope.dimension_count";
  const int64_t n_rot = m.has("rope.dimension_count") ? m.i("rope.dimension_count") : head_dim;
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0)
    throw LoadError(m.f.path() + ": key '" + key + "': " + std::to_string(n_rot) +
                    " is not an even width within head_dim " + std::to_string(head_dim));
  const RotaryShare share = rotary_share(model_type);
  if (share.read) {
    c.add_float("partial_rotary_factor", double(n_rot) / double(head_dim));
    return;
  }
  const auto fixed = int64_t(double(head_dim) * share.factor);
  if (n_rot != fixed)
    throw LoadError(m.f.path() + ": key '" + key + "': " + std::to_string(n_rot) + " channels, but " + model_type +
                    " rotates " + std::to_string(fixed) + " of each head's " + std::to_string(head_dim) +
                    " (its transformers class has no partial_rotary_factor to state another share)");
}

}  // namespace attnzoo::gguf_hf
