#pragma once
// The work split the CUDA recurrences share (delta_recurrent, gla_recurrent, rwkv7_recurrent). A unit is one
// (sequence, head, slice of kCols state columns); warp w of a unit holds state rows [R w, R w + R) of the
// slice, lane c column c, one float per row in registers: R = rows_per_thread(K), a compile-time parameter of
// the kernels (each R its own instantiation, with its own register count). Small states pack several units into
// one CTA (units_per_cta): a one- or two-warp CTA per unit would pay its barriers and staging alone and, at 32
// resident CTAs per SM, leave the SM at a quarter or half of its threads. Plain C++, so the launch plans see the
// same sizes as the kernels.
#include <cstdint>
#include <type_traits>

namespace attnzoo::cuda_linear {

constexpr int kCols = 32;            // state columns per unit: one warp wide
constexpr int kMaxRows = 32;         // state rows per warp, in each thread's registers, at most
constexpr int kMaxWarps = 8;         // so K <= 256
constexpr int kMaxK = kMaxWarps * kMaxRows;
constexpr int kMaxThreads = kMaxWarps * 32;
constexpr int kPackWarps = 4;        // the CTA size packing aims for: 128 threads
constexpr int kMaxUnits = kPackWarps;  // units in one CTA at most (K <= 32)

// State rows per thread for K. At K <= 16 a 32-row warp would hold 16 rows of zeros; 16 rows keep the unit one
// warp (the same packing) at 80 registers instead of 128. A larger K stays at 32: halving the rows doubles the
// warps per unit, and at 80 registers (16 rows and less spill) the SM holds 25 warps, which is less state than
// 16 warps of 32 rows (docs/benchmarks/cuda.md, "Recurrence registers").
constexpr int rows_per_thread(int64_t K) { return K <= 16 ? 16 : 32; }

// Warps per unit: K rounded up to whole warps of rows_per_thread(K) rows.
constexpr int unit_warps(int64_t K) {
  const int rows = rows_per_thread(K);
  return int((K + rows - 1) / rows);
}

// Each instantiation's launch bounds: its widest CTA, and how many of them an SM should hold, which caps its
// registers at 65536 / (threads x CTAs), rounded down to 8. 32 rows: two 256-thread CTAs, 128 registers, above
// the 113 to 125 it takes (a tighter cap spills). 16 rows (one-warp units, four to a CTA): six 128-thread CTAs, 80 registers, without spills;
// uncapped the compiler takes 97 to 100, which holds no more CTAs than 128 does.
constexpr int bound_threads(int rows) { return rows == 16 ? kPackWarps * 32 : kMaxThreads; }
constexpr int bound_ctas(int rows) { return rows == 16 ? 6 : 2; }

// `launch(std::integral_constant<int, R>{})` for a plan's rows per thread R (16 or 32): the launchers' choice of
// the kernel instantiation to run (host code; the emulator's CTA entries choose on the device).
template <class Launch>
void with_rows(int rows, Launch&& launch) {
  if (rows == 16) return launch(std::integral_constant<int, 16>{});
  launch(std::integral_constant<int, 32>{});
}

// Units per CTA: as many as fill kPackWarps warps, at least one. K = 16 or 32 packs 4, K = 64 packs 2, K > 64
// runs alone (three warps and more already hold a CTA's barriers against enough work).
constexpr int units_per_cta(int64_t K) {
  const int w = unit_warps(K);
  return w >= kPackWarps ? 1 : kPackWarps / w;
}

// The kernel parameters every recurrence has (each family's Params derives from it): its states, its sequences
// and its split.
struct RecurrentSplitParams {
  const float* initial_state;    // [N, heads, K, V]; null: zeros
  float* final_state;            // [N, heads, K, V]; null: not written; may be initial_state
  const int32_t* state_indices;  // sequence n's state row (negative: skip the sequence); null: row n
  int64_t state_stride;          // floats between state rows
  const int64_t* seq_offsets;    // N + 1 token rows of packed sequences; null: sequence n is rows [n T, n T + T)
  int64_t T;
  int slices;                    // ceil(V / kCols)
  int units;                     // units per CTA; the CTA's threads split evenly among them
  int rows;                      // state rows per thread: 16 or 32, the kernel instantiation that runs
  int64_t total_units;           // sequences x heads x slices
};

// The packed launch's shape for `units` work units of state rows K.
struct RecurrentGrid {
  int64_t ctas;
  int threads, units;  // threads per CTA, units per CTA
  int rows;            // state rows per thread: the kernel instantiation to launch
};
constexpr RecurrentGrid recurrent_grid(int64_t units, int64_t K) {
  const int per = units_per_cta(K);
  return {(units + per - 1) / per, per * unit_warps(K) * 32, per, rows_per_thread(K)};
}

}  // namespace attnzoo::cuda_linear
