#pragma once
// The work split the CUDA recurrences share (delta_recurrent, gla_recurrent, rwkv7_recurrent). A unit is one
// (sequence, head, slice of kCols state columns); warp w of a unit holds state rows [32 w, 32 w + 32) of the
// slice, lane c column c, one float per row in registers. Small states pack several units into one CTA
// (units_per_cta): a one- or two-warp CTA per unit would pay its barriers and staging alone and, at 32 resident
// CTAs per SM, leave the SM at a quarter or half of its threads. Plain C++, so the launch plans see the same
// sizes as the kernels.
#include <cstdint>

namespace attnzoo::cuda_linear {

constexpr int kCols = 32;            // state columns per unit: one warp wide
constexpr int kRowsPerThread = 32;   // state rows per warp, in each thread's registers
constexpr int kMaxWarps = 8;         // so K <= 256
constexpr int kMaxK = kMaxWarps * kRowsPerThread;
constexpr int kMaxThreads = kMaxWarps * 32;
constexpr int kPackWarps = 4;        // the CTA size packing aims for: 128 threads
constexpr int kMaxUnits = kPackWarps;  // units in one CTA at most (K <= 32)

// Warps per unit: K rounded up to whole warps.
constexpr int unit_warps(int64_t K) { return int((K + kRowsPerThread - 1) / kRowsPerThread); }

// Units per CTA: as many as fill kPackWarps warps, at least one. K = 16 or 32 packs 4, K = 64 packs 2, K > 64
// runs alone (three warps and more already hold a CTA's barriers against enough work).
constexpr int units_per_cta(int64_t K) {
  const int w = unit_warps(K);
  return w >= kPackWarps ? 1 : kPackWarps / w;
}

// The packed launch's shape for `units` work units of state rows K.
struct RecurrentGrid {
  int64_t ctas;
  int threads, units;  // threads per CTA, units per CTA
};
constexpr RecurrentGrid recurrent_grid(int64_t units, int64_t K) {
  const int per = units_per_cta(K);
  return {(units + per - 1) / per, per * unit_warps(K) * 32, per};
}

}  // namespace attnzoo::cuda_linear
