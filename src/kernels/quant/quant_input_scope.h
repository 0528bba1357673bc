#pragma once
// One 8-bit quantization of x for projections that are separate calls (gemv.cc).
#include <cstdint>

namespace attnzoo {

// While it lives, on the thread that made it, the quant_gemv / quant_gemv_shared calls over exactly the rows x [T, K]
// (the same pointer and sizes; x must not change meanwhile) share one quantization of them: the first such call's,
// written again with the union of the arrays where a later call's rows read one it lacks. Parallel branches over one
// input (Falcon-H1's attention and Mamba-2, ParallelMixer) open it: their input projections are calls of their own.
// Each result is the one the call gives alone, to the bit (a row's quantization depends on that row alone). A scope
// opened inside another does nothing.
class QuantInputScope {
 public:
  QuantInputScope(const float* x, int64_t T, int64_t K);
  ~QuantInputScope();
  QuantInputScope(const QuantInputScope&) = delete;
  QuantInputScope& operator=(const QuantInputScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace attnzoo
