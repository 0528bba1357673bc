#pragma once
// The weight memory a model's load adds or moves beside its checkpoint's mapping, counted Linear by Linear.
// Resident weights are then about checkpoint_bytes - released + owned: a copy made at load (f16 widened, rows
// regrouped for the VNNI decode rows, bf16 rows moved onto cache lines) asks the kernel to drop the mapping's pages
// it came from, so a Q4_0 GGUF regrouped whole holds its bytes once, not twice.
#include <cstdint>

#include "layers/linear.h"
#include "models/model.h"

namespace attnzoo {

struct WeightBytes {
  uint64_t owned = 0;     // copies the model holds
  uint64_t released = 0;  // the checkpoint bytes those copies stand in for (their mapped pages released)

  void add(const Linear& l) {
    if (!l.owns_weight()) return;
    owned += l.weight_bytes();
    released += l.released_weight_bytes();
  }
  void record(ModelInfo& info) const {
    info.owned_weight_bytes = owned;
    info.released_weight_bytes = released;
  }
};

}  // namespace attnzoo
