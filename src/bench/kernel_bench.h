#pragma once
// The C++ side of the kernel table: the prefill cases timed through the same public entry point the models
// use (attention_prefill), at the shapes the Python-driven table uses. The CLI falls back to this table when
// no Python with PyTorch is available; the full table (with PyTorch ratios) lives in python/attnzoo/bench.py.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/peak.h"
#include "bench/timer.h"
#include "kernels/softmax/options.h"

namespace attnzoo::bench {

// "full" (the headline shapes), "quick" (< 1 min on 2 cores, peaks included) or "tiny" (tests only).
enum class Scale { full, quick, tiny };
Scale parse_scale(const std::string& name);  // throws ArgumentError
const char* scale_name(Scale s);

struct PrefillShape {
  int64_t T, Hq, Hkv, D, window;
  BlockMaskSpec sparse;  // the block-sparse case's pattern (seq_len = T)
};
struct DecodeShape {
  int64_t context, Hq, Hkv, D, page_block;  // one query token against `context` cached keys
};
struct ProbeSettings {
  double fma_seconds;  // per FMA run
  int fma_runs;
  int64_t memory_bytes;  // several times L3 at full scale
  int memory_runs;
};
PrefillShape prefill_shape(Scale s);
DecodeShape decode_shape(Scale s);
TimingPolicy timing_policy(Scale s);
ProbeSettings probe_settings(Scale s);

// (query, key) pairs that are visible under the mask for a Tq x Tk problem (queries bottom-right aligned):
// the exact count of score/value products a kernel that skips masked work must do, per head.
int64_t count_visible_pairs(const MaskGeometry& mask, int64_t Tq, int64_t Tk);

struct KernelResult {
  std::string kernel;  // family, e.g. "softmax prefill"
  std::string name;    // case, e.g. "causal f32"
  std::string shape;
  Timing timing;
  double flops = 0;  // useful floating-point operations per call (visible pairs only)
  // Targets (0: none): the fraction of the FMA peak and the speed-up over PyTorch this row should reach.
  double goal_fraction_of_peak = 0, goal_torch_ratio = 0;
};

// Times every prefill case (causal f32 and bf16, sliding window, block-sparse) at the given scale.
std::vector<KernelResult> bench_prefill_cases(Scale s);

}  // namespace attnzoo::bench
