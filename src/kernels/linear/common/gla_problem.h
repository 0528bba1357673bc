#pragma once
// The gated linear recurrence shared by linear attention, RetNet retention, simple GLA and GLA:
//
//   S_t = diag(exp(g_t)) S_{t-1} + phi(k_t)^T v_t          S: [K, V] per (sequence, value head)
//   o_t = scale * phi(q_t) S_t
//
// with g_t a scalar per (token, head) (simple GLA; retention's constant log gamma; none for linear attention)
// or a vector over K (GLA). Linear attention may also normalise: o_t /= scale * phi(q_t) . z_t + 1e-10 with
// z_t = z_{t-1} + phi(k_t), fla's definition. The families are thin front ends over one validated problem.
#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "kernels/linear/common/sequences.h"

namespace attnzoo {

// Applied elementwise to q and k before anything else (Katharopoulos et al.: elu(x) + 1 keeps scores positive).
enum class FeatureMap { identity, elu_plus_one, relu };

enum class GateKind { none, scalar, channel };

// Options every family of the gated-linear group shares (fla's keyword arguments).
struct GlaOptions {
  std::optional<float> scale;        // default K^-0.5
  TensorView initial_state;          // [N, HV, K, V] f32, may be empty (zeros)
  TensorView final_state;            // [N, HV, K, V] f32, may be empty (not written)
  const int32_t* cu_seqlens = nullptr;  // [N + 1] token offsets of packed sequences (B must be 1)
  int64_t cu_seqlens_len = 0;
  // States addressed in a pool (fla / vLLM's ssm_state_indices, as DeltaArgs'): int32 [N] on the states' device,
  // sequence n's row of initial_state / final_state, which are then [slots, HV, K, V] with any row stride (the
  // pool's slot stride; the rest contiguous) and must be the same tensor. A negative index skips the sequence:
  // neither its state nor its o is touched (a padded batch row). The CUDA recurrent and chunked forms only,
  // without the normaliser: each state is read and written once in its pool row, with no gather or scatter.
  const int32_t* ssm_state_indices = nullptr;
  int64_t chunk_size = 64;           // chunked kernels: 16, 32, 64 or 128
  // false skips the device scan of a device-resident g_gamma (finite, <= 0), the group's only value scan: on a
  // GPU it waits for the device, which a decode step should not. Host g_gamma is always checked (it is tiny).
  bool check_values = true;
};

// A validated call: raw pointers and sizes, ready for any of the kernels below.
struct GlaProblem {
  Device device{};  // where every tensor lives (make_gla_problem checks they agree), g_gamma perhaps excepted
  // g_gamma is a per-head constant: it may stay on the host beside device tensors (retention builds its decays
  // there), and the CUDA launcher uploads it. A device g_gamma is checked on the device (check_values).
  Device g_gamma_device{};
  bool check_values = false;  // a device g_gamma's value scan still owed (opts.check_values)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  DType q_dtype = DType::f32, k_dtype = DType::f32, v_dtype = DType::f32;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  SequenceSpans seqs;

  GateKind gate = GateKind::none;
  const void* g = nullptr;             // scalar: [B, T, HV]; channel: [B, T, HV, K]; natural-log decay
  DType g_dtype = DType::f32;
  const float* g_gamma = nullptr;      // [HV] constant log decay added to every step (retention), may be null

  float scale = 1.f;
  FeatureMap feature_map = FeatureMap::identity;
  bool normalize = false;

  const float* initial_state = nullptr;  // [N, HV, K, V], or the pool's rows with state_indices
  float* final_state = nullptr;
  const int32_t* state_indices = nullptr;  // GlaOptions::ssm_state_indices (device memory), or null: row n
  int64_t state_stride = 0;                // floats from one state row to the next (HV K V when dense)
  const float* initial_z = nullptr;      // [N, 1, H, K] (normalize only)
  float* final_z = nullptr;

  void* o = nullptr;                      // [B, T, HV, V]
  DType o_dtype = DType::f32;
  int64_t chunk_size = 64;

  int64_t group() const { return HV / H; }
  int64_t num_tasks() const { return seqs.count() * HV; }
};

// Checks shapes, dtypes, head counts and devices (all on q's; g_gamma on q's or on the host) and names the
// offending argument. `g` may be empty (no data-dependent gate); `g_gamma` may be empty; when both are empty the
// recurrence does not decay. Device-neutral: only shapes are read for a device problem.
GlaProblem make_gla_problem(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                            GateKind gate, const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts);

// Linear-attention extras: the normaliser's running key sum z, [N, 1, H, K] f32 (fla's z_state), on q's device.
void set_gla_normalizer(GlaProblem& p, const TensorView& initial_z, const TensorView& final_z);

// The kernels, all on the global thread pool, one task per (sequence, value head).
void gated_linear_reference(const GlaProblem& p);          // plain recurrence, double accumulation
void gated_linear_recurrent(const GlaProblem& p);          // O(1) per token (decode); any gate kind
void gated_linear_chunk_scalar_decay(const GlaProblem& p);  // chunkwise, gate none / scalar
void gated_linear_chunk_channel_decay(const GlaProblem& p); // chunkwise, gate channel (sub-chunked for strong decays)
void gated_linear_parallel_constant_decay(const GlaProblem& p);  // quadratic (RetNet parallel) form; g_gamma only, no state

// Runs a validated recurrent problem whose tensors live on a GPU: the CUDA path's own checks, the deferred
// g_gamma scan, then the kernel on the current stream of the tensors' device. DeviceError without CUDA.
void gated_linear_recurrent_on_device(const GlaProblem& p);

// The chunked form of a validated problem on its GPU: the CUDA chunked kernels (tensor cores), or, for linear
// attention's normalised form, the recurrent kernel. DeviceError without CUDA.
void gated_linear_chunk_on_device(const GlaProblem& p);

// ArgumentError naming q unless the problem's tensors live in host memory, for the entries that run on the CPU
// only so far (`entry`: the parallel and reference forms).
void require_gla_host(const GlaProblem& p, const char* entry);

enum class GlaPath { reference, recurrent, chunk };
// Runs the chosen path; `chunk` picks the scalar- or channel-decay kernel from the gate kind. The recurrent and
// chunked paths run device problems on their device; the others refuse them naming `entry` (the public
// function).
void run_gla(const GlaProblem& p, GlaPath path, const char* entry);

}  // namespace attnzoo
