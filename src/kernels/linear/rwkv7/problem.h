#pragma once
// A validated RWKV-7 call, shared by the reference, recurrent and chunked paths. Device-neutral: for tensors on a
// GPU only shapes are read (the recurrent and chunked entries send those problems to rwkv7_*_on_device).
#include "core/device.h"
#include "kernels/linear/common/sequences.h"
#include "kernels/linear/rwkv7/rwkv7.h"

namespace attnzoo {

struct Rwkv7Problem {
  Device device{};  // where every tensor lives (make_rwkv7_problem checks they agree)
  int64_t batch = 0, T = 0, H = 0, K = 0, V = 0;
  SequenceSpans seqs;
  const void *r = nullptr, *w = nullptr, *k = nullptr, *v = nullptr, *a = nullptr, *b = nullptr;
  DType r_dtype{}, w_dtype{}, k_dtype{}, v_dtype{}, a_dtype{}, b_dtype{};
  float scale = 1.f;
  const float* h0 = nullptr;  // [Nseq, H, K, V], or the pool's rows with state_indices
  float* ht = nullptr;
  const int32_t* state_indices = nullptr;  // Rwkv7Args::ssm_state_indices (device memory), or null: row n
  int64_t state_stride = 0;                // floats from one state row to the next (H K V when dense)
  void* o = nullptr;
  DType o_dtype{};
};

Rwkv7Problem make_rwkv7_problem(const Rwkv7Args& a);

// ArgumentError naming the first tensor of `a` not in host memory, for the entry that runs on the CPU only (the
// reference).
void require_rwkv7_host(const Rwkv7Args& a, const char* entry);

// Runs a validated problem whose tensors live on a GPU on the current stream of their device: the CUDA path's own
// checks, then the kernel. DeviceError in a build without CUDA.
void rwkv7_recurrent_on_device(const Rwkv7Problem& p);
// The same for the chunked form (chunk_size already checked as chunk_rwkv7 does).
void rwkv7_chunk_on_device(const Rwkv7Problem& p, int64_t chunk_size);

}  // namespace attnzoo
