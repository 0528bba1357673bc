#pragma once
// A validated selective scan (or decode step, seen as a scan of length 1), shared by every path. Device-neutral:
// for tensors on a GPU only shapes are read (A, skip and bias stay empty; the device path reads the *_in views).
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/common/ssm_args.h"
#include "kernels/linear/mamba/mamba.h"

namespace attnzoo {

struct SelectiveScanProblem {
  Device device{};  // where every tensor lives (make_selective_scan_problem checks they agree)
  int64_t batch = 0, D = 0, L = 0, N = 0, G = 1;
  SequenceSpans seqs;  // begin is a position along L within batch row `batch_of(s)`
  std::vector<float> A;     // [D, N]; host problems only, as skip and bias
  std::vector<float> skip;  // [D] or empty
  std::vector<float> bias;  // [D] or empty
  TensorView A_in, skip_in, bias_in;  // as given: [D, N], [D] or empty, [D] or empty
  bool softplus = false;
  const void *u = nullptr, *delta = nullptr, *Bm = nullptr, *Cm = nullptr, *z = nullptr;
  DType u_dtype{}, delta_dtype{}, b_dtype{}, c_dtype{}, z_dtype{};
  const float* h0 = nullptr;  // [Nseq, D, N], or the pool's rows with state_indices
  float* ht = nullptr;
  const int32_t* state_indices = nullptr;  // SelectiveStateUpdateArgs::state_batch_indices (device), or null: row n
  int64_t state_stride = 0;                // floats from one sequence's state row to the next (D N when dense)
  void* out = nullptr;
  DType out_dtype{};
  bool packed = false;  // cu_seqlens given: every sequence lives in batch row 0
  // The step size of channel d: delta + bias, then softplus.
  float step(float delta, int64_t d) const {
    return ssm::StepTransform{bias.empty() ? nullptr : bias.data(), softplus}.apply(delta, d);
  }
  int64_t channels_per_group() const { return D / G; }
  int64_t batch_of(int64_t s) const { return packed ? 0 : s; }
  // Element offsets of (batch row, channel, position) in [Bt, D, L] and of (row, group, n, position) in B / C.
  int64_t channel_index(int64_t b, int64_t d, int64_t t) const { return (b * D + d) * L + t; }
  int64_t state_index(int64_t b, int64_t g, int64_t n, int64_t t) const { return ((b * G + g) * N + n) * L + t; }
};

SelectiveScanProblem make_selective_scan_problem(const SelectiveScanArgs& a);
SelectiveScanProblem make_selective_step_problem(const SelectiveStateUpdateArgs& a);

// ArgumentError naming the first tensor not in host memory, for the references (CPU only so far).
void require_selective_scan_host(const SelectiveScanArgs& a, const char* entry);
void require_selective_scan_host(const SelectiveStateUpdateArgs& a, const char* entry);

// Runs a validated problem whose tensors live on a GPU, on the current stream of their device: the CUDA path's
// own checks, then the kernel. DeviceError in a build without CUDA.
void selective_scan_on_device(const SelectiveScanProblem& p);

}  // namespace attnzoo
