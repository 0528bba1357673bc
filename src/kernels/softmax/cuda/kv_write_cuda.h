#pragma once
// The paged KV-cache write on an NVIDIA GPU, the twin of kernels/softmax/kv_write.h (vLLM's reshape_and_cache):
// rows [T, H, D] or [T, D] (f32 / bf16 / f16, last dim contiguous, any other strides) scattered by slot_mapping
// into paged caches [num_blocks, block_size, (H,) D] of f32 / bf16 / f16, or quantized into int8 / e4m3 caches
// with one f32 scale per row and head, the bytes and scales kv_quant.h's quantize_kv_row gives. write_kv_paged /
// write_paged_rows branch here for device tensors (kv_write_device.cc), so callers keep the one entry.
// slot_mapping is then an int64 array in the caches' device memory; negative slots skip their token.
#include <cstdint>
#include <span>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

// One scatter: rows into cache (and scale for a quantized cache), with the names errors give them.
struct PagedRowsCuda {
  TensorView rows, cache, scale;
  const char* rows_name = "rows";
  const char* cache_name = "cache";
  const char* scale_name = "scale";
};

// Every host-side refusal of one scatter, before any CUDA call (and in every build): the CPU entry's shape and
// dtype checks, plus device memory of one CUDA device for rows, cache and scale. ArgumentError / DTypeError
// naming the argument.
void check_paged_rows_cuda(const PagedRowsCuda& w);

// CUDA builds only; the writes must have passed check_paged_rows_cuda and share the slots (k and v of a layer),
// and run on the current device. With check_slots, slot_mapping is first scanned on the device and a slot past
// the smallest cache is an ArgumentError naming slot_mapping, before anything is written (as on the CPU); the
// scan reads its result back, so a checked call synchronises the stream. Unchecked (a model step's), such a
// token is skipped instead: nothing is ever written outside a cache.
void write_paged_rows_cuda(std::span<const PagedRowsCuda> writes, const int64_t* slot_mapping, bool check_slots,
                           Stream stream);

}  // namespace attnzoo
