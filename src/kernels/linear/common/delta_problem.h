#pragma once
// The delta-rule family (DeltaNet, Gated DeltaNet, Kimi Delta Attention) is one recurrence with three kinds of
// decay, so it has one argument struct, one validated problem description and one set of kernels:
//   S_t = D_t S_{t-1} + beta_t k_t (v_t - (D_t S_{t-1})^T k_t)^T,   o_t = S_t^T (scale * q_t)
// with D_t = I (delta rule), exp(g_t) I (gated delta rule, g [B,T,HV]) or diag(exp(g_t)) (KDA, g [B,T,HV,K]).
// State S is [K, V] per (sequence, value head), fla's layout.
#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "kernels/linear/common/sequences.h"

namespace attnzoo {

enum class DeltaGate { none, head, channel };

// Arguments of every public delta-family entry point. Views must be contiguous; empty views mean "absent".
struct DeltaArgs {
  TensorView q;              // [B, T, H, K]  f32 / bf16 / f16
  TensorView k;              // [B, T, H, K]
  TensorView v;              // [B, T, HV, V], HV a multiple of H (value head hv reads key head hv / (HV/H))
  TensorView g;              // log decay: absent, [B, T, HV] or [B, T, HV, K] depending on the family; <= 0
  TensorView beta;           // [B, T, HV] write strength (any real; (0, 2) keeps the state bounded); absent = 1
  TensorView o;              // [B, T, HV, V] output, any float dtype
  TensorView initial_state;  // absent or [N, HV, K, V] f32
  TensorView final_state;    // absent or [N, HV, K, V] f32, written (may alias initial_state)
  const int32_t* cu_seqlens = nullptr;  // N + 1 token offsets of packed sequences (then B == 1)
  int64_t cu_seqlens_len = 0;
  // States addressed in a pool (fla / vLLM's ssm_state_indices): int32 [N] on the states' device, sequence n's
  // row of initial_state / final_state, which are then [slots, HV, K, V] with any row stride (the pool's slot
  // stride; the rest contiguous) and must be the same tensor. A negative index skips the sequence: neither its
  // state nor its o is touched (a padded batch row). Device problems only (the CUDA recurrent and chunked forms),
  // check_values false (the value scans read dense states): each state is read and written once, with no gather
  // or scatter.
  const int32_t* ssm_state_indices = nullptr;
  std::optional<float> scale;           // default K^-0.5
  bool use_qk_l2norm_in_kernel = false;  // q, k <- x / sqrt(|x|^2 + 1e-6) before use (fla's l2norm)
  int64_t chunk_size = 64;               // chunked form only: 16, 32, 64 or 128
  // false skips the value scans (NaN / Inf in inputs and initial_state, gate signs): they read every input and
  // the whole state, which for a one-token decode step costs as much as the step. Shapes and dtypes are
  // always checked.
  bool check_values = true;
};

// A validated call: dimensions, the decay kind, the sequences and where the tensors live.
struct DeltaProblem {
  Device device{};  // where every tensor lives (make_delta_problem checks they agree)
  // Value scans still owed: true only for device tensors with args.check_values, which the host cannot read;
  // the device path runs them (on the device) before its kernel. Host problems are scanned by make_delta_problem.
  bool check_values = false;
  DeltaGate gate = DeltaGate::none;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  float scale = 1.f;
  bool l2norm = false;
  int64_t chunk_size = 64;
  SequenceSpans seqs;
  TensorView q, k, v, g, beta, o;
  const float* initial_state = nullptr;  // [N, HV, K, V], or the pool's rows with state_indices
  float* final_state = nullptr;
  const int32_t* state_indices = nullptr;  // DeltaArgs::ssm_state_indices (device memory), or null: row n
  int64_t state_stride = 0;                // floats from one state row to the next (HV K V when dense)

  int64_t group() const { return HV / H; }
  // Element offsets of token row `row` (index into the flattened B*T tokens) for a head.
  int64_t qk_offset(int64_t row, int64_t h) const { return (row * H + h) * K; }
  int64_t v_offset(int64_t row, int64_t hv) const { return (row * HV + hv) * V; }
  int64_t gate_offset(int64_t row, int64_t hv) const {
    return gate == DeltaGate::channel ? (row * HV + hv) * K : row * HV + hv;
  }
  int64_t state_offset(int64_t seq, int64_t hv) const { return (seq * HV + hv) * K * V; }
};

// Checks shapes, dtypes, contiguity, head counts, devices (all on q's), values (finite inputs and states,
// gates <= 0; unless args.check_values is false; deferred to the device for device tensors), states and chunk
// size against the family's gate kind; every error names the argument. Device-neutral: the tensors may live on
// any device, and only their shapes are read for a device problem.
DeltaProblem make_delta_problem(const DeltaArgs& args, DeltaGate gate);

// ArgumentError naming the first tensor of `args` not in host memory, for the entries that run on the CPU only
// so far (`entry`: the references).
void require_delta_host(const DeltaArgs& args, const char* entry);

// Runs a validated recurrent problem whose tensors live on a GPU: the CUDA path's own checks, the deferred value
// scans, then the kernel on the current stream of the tensors' device. DeviceError in a build without CUDA.
void recurrent_delta_on_device(const DeltaProblem& p);
// The same for a chunked problem (any gate): the CUDA chunked kernels (common/cuda/delta_chunk*).
void chunk_delta_on_device(const DeltaProblem& p);

// The plain recurrence in double precision, one token at a time (the definition the fast paths are tested against).
void delta_reference(const DeltaProblem& p);

}  // namespace attnzoo
