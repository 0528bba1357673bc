#pragma once
// What the recurrences' launch plans share on the host (delta_recurrent_launch.cc, gla_recurrent_launch.cc,
// rwkv7_recurrent_launch.cc): the refusals of a problem the split cannot hold, and the split's part of a plan.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/common/cuda/recurrent_split.h"

namespace attnzoo::cuda_linear {

// A unit per (sequence, head, kCols state columns).
constexpr int64_t recurrent_units(int64_t sequences, int64_t heads, int64_t V) {
  return sequences * heads * ((V + kCols - 1) / kCols);
}

// K past the state rows the registers hold, refused by `key` (the argument that carries K), and a grid past
// CUDA's, refused by v; `units_named` says how the units count ("sequences x heads x ceil(V / 32)").
inline void require_recurrent_split(int64_t K, int64_t units, const char* key, const char* units_named) {
  require(K <= kMaxK, key, [&] {
    return "K=" + std::to_string(K) + " exceeds " + std::to_string(kMaxK) +
           ", the widest state rows the CUDA recurrence keeps in registers";
  });
  require_grid_fits(recurrent_grid(units, K).ctas, "v", (std::string(units_named) + " / units per CTA").c_str());
}

// The split's fields of plan `l`: its kernel parameters' slices, units per CTA, rows per thread and unit count,
// and its grid and block.
template <class Launch>
void plan_recurrent_split(Launch& l, int64_t units, int64_t K, int64_t V) {
  const RecurrentGrid grid = recurrent_grid(units, K);
  l.params.slices = int((V + kCols - 1) / kCols);
  l.params.units = grid.units, l.params.rows = grid.rows, l.params.total_units = units;
  l.grid = unsigned(grid.ctas), l.threads = unsigned(grid.threads);
}

}  // namespace attnzoo::cuda_linear
