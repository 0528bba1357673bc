#pragma once
// Binding helpers: turn any numpy array or __dlpack__ object into a TensorView without copying.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>
#include <utility>

#include "core/device.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "engine/sampler.h"
#include "kernels/softmax/options.h"
#include "kernels/softmax/problem.h"

namespace attnzoo::py {
namespace nb = nanobind;

using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;      // inputs: read-only is fine
using OutArray = nb::ndarray<nb::device::cpu>;              // outputs: must be writable
// The tensors of the entries that also run on a GPU (attention, attention_decode): host or CUDA memory, the
// view's device saying which; their metadata (offsets, tables, sinks) stays AnyArray, read on the host.
using DeviceArray = nb::ndarray<nb::ro>;
using DeviceOutArray = nb::ndarray<>;

// Views the array; `name` appears in errors (unsupported dtype, too many dims). An OutArray's memory is also
// probed for writability (a torch tensor over a read-only mapping would otherwise crash on the first store).
TensorView as_view(const AnyArray& a, const char* name);
TensorView as_view(const OutArray& a, const char* name);
TensorView as_view(const DeviceArray& a, const char* name);
TensorView as_view(const DeviceOutArray& a, const char* name);
// The caller's CUDA stream (torch.cuda.current_stream().cuda_stream; 0: the default stream) as the launches'
// stream for a scope; host tensors ignore it.
inline Stream stream_of(uintptr_t handle) { return Stream{reinterpret_cast<void*>(handle)}; }

// Held by every binding while native code runs: the GIL released, the thread pool pinned (set_num_threads
// waits for it), and, when `interruptible`, a Ctrl-C on the main thread cancels the running kernel between
// its tasks; the call then raises KeyboardInterrupt (see python/bindings/kernel_scope.cc). Calls that must
// not stop halfway (they update a model sequence) pass interruptible = false.
class KernelScope {
 public:
  explicit KernelScope(bool interruptible = true);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  bool main_thread_;                // asked while the GIL is still held
  nb::gil_scoped_release release_;  // destroyed after the pin is dropped: a waiting resize never needs the GIL
  ThreadPool::Pin pin_;
  std::optional<ThreadPool::InterruptScope> interrupt_;
};

// Maps attnzoo::Interrupted to the Python exception the poll found pending (KeyboardInterrupt).
void raise_interrupted();
// From a thread without the GIL: whether a Python signal handler raised (the exception is kept for
// raise_interrupted). Only meaningful on the main thread; false elsewhere.
bool python_signal_pending();
bool on_main_thread();  // needs the GIL
// As above, but also requires a given dtype family ("int32 array", float32 array ...).
const int32_t* as_int32(const AnyArray& a, const char* name, int64_t expected_len = -1);
const int64_t* as_int64(const AnyArray& a, const char* name, int64_t expected_len);
const float* as_f32_vector(const AnyArray& a, const char* name, int64_t expected_len);
// The linear families' cu_seqlens (int32 [num_seqs + 1]) as the pointer and entry count their args hold; {null, 0}
// for None.
std::pair<const int32_t*, int64_t> seqlens_of(const std::optional<AnyArray>& cu_seqlens);
// int32 [rows, max_blocks_per_seq], contiguous; its column count goes to *cols.
const int32_t* as_block_table(const AnyArray& a, int64_t rows, int64_t* cols);
// A cache array's view as the kernels read it under kv_cache_dtype ("auto"; "int8": an int8 array; "fp8": a
// uint8 array of float8 e4m3fn bytes, vLLM's convention).
TensorView as_kv_cache(TensorView cache, const std::string& kv_cache_dtype, const char* name);
// Quantized-cache arguments are meaningless on plain k / v (or kv_latent): refused, naming the argument and
// `cache_arg`, the argument that would make the inputs a cache.
void refuse_quant_without_cache(bool has_k_scale, bool has_v_scale,
                                const std::string& kv_cache_dtype, const char* cache_arg);
template <class Array>
TensorView optional_view(const std::optional<Array>& a, const char* name) {
  return a ? as_view(*a, name) : TensorView{};
}

// The reference kernels and the finite-value scan read host memory: for device tensors both are refused by
// name (the Python wrappers scan CUDA tensors with torch before calling).
void refuse_host_only_options(Device device, bool reference, bool check_inputs);

// Softmax options from Python arguments (None = off); validates values and names the argument.
AttentionOptions make_attention_options(int64_t Hq, bool causal, std::optional<float> scale,
                                        std::optional<int64_t> window, std::optional<float> softcap,
                                        const std::optional<AnyArray>& sinks,
                                        const std::optional<AnyArray>& alibi_slopes, const BlockMask* block_mask);
// The packed (varlen) layout of the softmax and MLA prefill entries: cu_seqlens [num_seqs + 1] offsets into q,
// cu_seqlens_k (only with cu_seqlens) into k / v; both None: a padded batch (num_seqs 0).
VarlenInfo make_varlen(const std::optional<AnyArray>& cu_seqlens, const std::optional<AnyArray>& cu_seqlens_k);

// Sampling parameters from the Python side's keyword values, validated (ValueError naming the field); shared by
// the sampler, the generation loop and the serving engine's add_request.
SamplingParams make_params(float temperature, int64_t top_k, float top_p, float min_p, float repetition_penalty,
                           float presence_penalty, float frequency_penalty, uint64_t seed);

void bind_core(nb::module_& m);
void bind_softmax(nb::module_& m);
void bind_decode(nb::module_& m);
void bind_mla(nb::module_& m);
void bind_linear_gla(nb::module_& m);
void bind_linear_delta(nb::module_& m);
void bind_linear_ssm(nb::module_& m);
void bind_linear_s4(nb::module_& m);
void bind_bench(nb::module_& m);
void bind_tokenizer(nb::module_& m);
void bind_model(nb::module_& m);
void bind_gguf(nb::module_& m);
void bind_runtime(nb::module_& m);
void bind_engine(nb::module_& m);
void bind_serving(nb::module_& m);
void bind_explain(nb::module_& m);
void bind_quant(nb::module_& m);
void bind_chat(nb::module_& m);
void bind_cache_spec(nb::module_& m);
void bind_convert(nb::module_& m);
void bind_perplexity(nb::module_& m);

}  // namespace attnzoo::py
