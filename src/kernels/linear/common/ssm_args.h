#pragma once
// Argument checks and small conversions shared by the state-space kernels (Mamba, Mamba-2, RWKV-4/7).
// Every check names the argument it rejects, so Python callers see e.g. "dt: expected shape [2, 64, 8] ...".
// The tensor checks refuse device memory (require_host) unless told Where::any_device: the entries that also run
// on a GPU check the device once for all their tensors (require_same_device) and only read shapes there.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace attnzoo::ssm {

enum class Where { host, any_device };

// A float tensor (f32, bf16 or f16), contiguous, with exactly this shape. Throws DTypeError / ArgumentError.
void require_float_tensor(const TensorView& t, const char* name, std::initializer_list<int64_t> shape,
                          Where where = Where::host);
// As above but the state tensors, which are always f32.
void require_f32_tensor(const TensorView& t, const char* name, std::initializer_list<int64_t> shape,
                        Where where = Where::host);
// Number of dims and contiguity only (shape checked by the caller).
void require_float_rank(const TensorView& t, const char* name, int ndim, Where where = Where::host);

struct NamedView {
  const TensorView* view;
  const char* name;
};
// ArgumentError naming the first present tensor not on the first one's device ("B: lives on cpu, x on cuda:0").
void require_same_device(std::initializer_list<NamedView> tensors);
// ArgumentError naming the first present tensor not in host memory, for the entries (`entry`) that run on the
// CPU only so far while their family's `also_on_cuda` (its recurrent form, its decode step) runs on CUDA too.
void require_host_entry(std::initializer_list<NamedView> tensors, const char* entry,
                        const char* also_on_cuda = "the recurrent form");

// The whole tensor widened to f32 (small per-channel parameters: A, D, biases).
std::vector<float> to_f32_vector(const TensorView& t);

inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }
inline double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
inline float silu(float x) { return x / (1.f + std::exp(-x)); }
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The step size every Mamba variant feeds its recurrence: dt + bias, then softplus, then clamped.
struct StepTransform {
  const float* bias = nullptr;  // per channel / head, or null
  bool softplus = false;
  float lo = 0.f, hi = INFINITY;
  bool clamp = false;
  float apply(float dt, int64_t channel) const {
    if (bias) dt += bias[channel];
    if (softplus) dt = ssm::softplus(dt);
    if (clamp) dt = std::fmin(std::fmax(dt, lo), hi);
    return dt;
  }
};

std::string shape_string(std::initializer_list<int64_t> shape);

// States in a pool (fla / vLLM's ssm_state_indices, mamba_ssm's state_batch_indices, causal_conv1d's
// conv_state_indices): each sequence reads and updates one slot of a [slots, ...] f32 tensor whose slots sit a
// row stride of their own apart (a pool slot holds more than this state), so initial and final state are one
// tensor. Every family validates its pool through require_pool_states, which names the argument it refuses.
struct PoolDim {
  int64_t size;      // < 0: any (the family reads it from the tensor, e.g. Mamba-1's N)
  const char* name;  // as the family's docs name it: "HV", "K", "D", ...
};
struct PoolStates {
  float* base = nullptr;     // slot 0's state
  int64_t row_stride = 0;    // floats from one slot to the next (>= the state's size)
};
// `indices` names the index argument, `device` the call's device (the CPU entries take dense states); `row` is one
// slot's shape. For the families with a single state argument (Mamba's `state`, `conv_state`) pass it twice with
// its name as both names.
PoolStates require_pool_states(const TensorView& initial_state, const TensorView& final_state, const char* indices,
                               Device device, std::initializer_list<PoolDim> row,
                               const char* initial_name = "initial_state", const char* final_name = "final_state");

}  // namespace attnzoo::ssm
