#pragma once
// The weight memory a model's load adds or moves beside its checkpoint's mapping, counted Linear by Linear.
// Resident weights are then about checkpoint_bytes - released + owned: a copy made at load (f16 widened, rows
// regrouped for the VNNI / AVX2 decode rows, bf16 rows moved onto cache lines) reads its source from the mapping,
// and the loaders drop those pages as it does (copied(), handed to every Linear they build from the mapping), so a
// Q4_0 GGUF regrouped whole holds its bytes once, not twice. The release is the loaders': Linear cannot tell a
// read-only file mapping from a caller's own memory. (A GGUF tensor whose converter edits were undone is held in
// ModelFiles' memory instead: advised the same way, anonymous pages that only go to swap, if any, read by nothing
// but the copy.)
#include <cstddef>
#include <cstdint>

#include "layers/linear.h"
#include "loader/mapped_file.h"
#include "models/model.h"

namespace attnzoo {

struct WeightBytes {
  uint64_t owned = 0;     // copies the model holds
  uint64_t released = 0;  // the checkpoint bytes those copies stand in for, their mapped pages released

  // For Linear::from_matrix and its kin over the checkpoint's mapping: drops the spans each copy reads.
  CopiedSource copied() {
    return [this](const void* data, size_t bytes) {
      release_mapped_pages(data, bytes);
      released += bytes;
    };
  }
  void add(const Linear& l) {
    if (l.owns_weight()) owned += l.weight_bytes();
  }
  void record(ModelInfo& info) const {
    info.owned_weight_bytes = owned;
    info.released_weight_bytes = released;
  }
};

}  // namespace attnzoo
