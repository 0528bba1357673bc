// Scatter of new K/V rows into paged caches. Bandwidth-bound: each token's rows are converted straight into
// their slot with the vectorised converters (a whole token at once when its heads are contiguous on both
// sides), and tokens are spread over the thread pool in chunks big enough to amortise a task.
#include "kernels/softmax/kv_write.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/kv_write_device.h"
#include "kernels/softmax/kv_write_shape.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_rows_layout(const TensorView& t, const char* name) {
  if (t.numel() == 0) return;
  require(t.stride(-1) == 1, name,
          [&] { return "last dimension must be contiguous (stride 1), got stride " + str(t.stride(-1)); });
  for (int d = 0; d < t.ndim; ++d) require(t.strides[d] >= 0, name, "negative strides are not supported");
}

// Copies / converts n elements between float dtypes (f32 in the middle when both are half types).
void convert_row(const char* src, DType src_dtype, char* dst, DType dst_dtype, size_t n, AlignedBuffer<float>& tmp) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * dtype_size(dst_dtype));
  } else if (src_dtype == DType::f32) {
    convert_from_f32(reinterpret_cast<const float*>(src), dst, dst_dtype, n);
  } else if (dst_dtype == DType::f32) {
    convert_to_f32(src, src_dtype, reinterpret_cast<float*>(dst), n);
  } else {
    tmp.resize(n);
    convert_to_f32(src, src_dtype, tmp.data(), n);
    convert_from_f32(tmp.data(), dst, dst_dtype, n);
  }
}

// A validated scatter of `rows` into `cache`.
struct Scatter {
  TensorView rows, cache;
  const int64_t* slots;
  KvScaleView scale;  // quantized caches: where each row's scale goes (strides; data is scale_out)
  float* scale_out;
};

}  // namespace

KvScaleView check_paged_rows_shape(const TensorView& rows, const TensorView& cache, const char* rows_name,
                                   const char* cache_name, const TensorView& scale, const char* scale_name) {
  check_float_operand(rows, rows_name);
  check_kv_cache_operand(cache, cache_name);
  require(rows.ndim == 2 || rows.ndim == 3, rows_name,
          [&] { return "must be [tokens, heads, head_dim] or [tokens, dim], got " + rows.shape_str(); });
  require(cache.ndim == rows.ndim + 1, cache_name, [&] {
    return "must be [num_blocks, block_size, ...] with " + str(rows.ndim - 1) + " more dims matching " + rows_name +
           "'s, got " + cache.shape_str();
  });
  for (int d = 1; d < rows.ndim; ++d)
    require(cache.shape[d + 1] == rows.shape[d], cache_name, [&] {
      return "shape " + cache.shape_str() + " does not fit " + rows_name + " " + rows.shape_str() +
             " (expected [num_blocks, block_size] + its trailing dims)";
    });
  check_rows_layout(rows, rows_name);
  check_rows_layout(cache, cache_name);
  return check_kv_scale(cache, scale, cache_name, scale_name);
}

namespace {

Scatter check_scatter(const TensorView& rows, const int64_t* slot_mapping, const TensorView& cache,
                      const char* rows_name, const char* cache_name, const TensorView& scale,
                      const char* scale_name) {
  check_float_tensor(rows, rows_name);
  check_kv_cache_dtype(cache, cache_name);
  const KvScaleView scale_view = check_paged_rows_shape(rows, cache, rows_name, cache_name, scale, scale_name);
  const int64_t T = rows.shape[0];
  require(slot_mapping != nullptr || T == 0, "slot_mapping", "is required");
  const int64_t num_slots = cache.shape[0] * cache.shape[1];
  for (int64_t t = 0; t < T; ++t)
    require(slot_mapping[t] < num_slots, "slot_mapping", [&] {
      return "entry " + str(t) + " = " + str(slot_mapping[t]) + " is past the cache's " + str(num_slots) +
             " slots (num_blocks * block_size)";
    });
  return {rows, cache, slot_mapping, scale_view, static_cast<float*>(scale.data)};
}

// Quantized caches: each (token, head) row widened to f32, quantized into its slot, its scale stored beside.
void run_quantized_scatter(const Scatter& s) {
  const TensorView &rows = s.rows, &cache = s.cache;
  const int64_t T = rows.shape[0];
  const int64_t H = rows.ndim == 3 ? rows.shape[1] : 1, D = rows.shape[rows.ndim - 1];
  const int64_t src_head = rows.ndim == 3 ? rows.strides[1] : 0, dst_head = cache.ndim == 4 ? cache.strides[2] : 0;
  const int64_t block_size = cache.shape[1];
  const size_t src_elem = dtype_size(rows.dtype);
  const int64_t per_task = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(H * D, 1));
  ThreadPool::global().parallel_for((T + per_task - 1) / per_task, [&](int64_t task, int) {
    static thread_local AlignedBuffer<float> row;
    row.resize(size_t(D));
    for (int64_t t = task * per_task; t < std::min(T, (task + 1) * per_task); ++t) {
      const int64_t slot = s.slots[t];
      if (slot < 0) continue;
      const int64_t block = slot / block_size, off = slot % block_size;
      const int64_t dst = block * cache.strides[0] + off * cache.strides[1];
      for (int64_t h = 0; h < H; ++h) {
        convert_to_f32(static_cast<const char*>(rows.data) + (t * rows.strides[0] + h * src_head) * int64_t(src_elem),
                       rows.dtype, row.data(), size_t(D));
        const float scale =
            quantize_kv_row(row.data(), size_t(D), cache.dtype, static_cast<char*>(cache.data) + dst + h * dst_head);
        s.scale_out[block * s.scale.block + off * s.scale.token + h * s.scale.head] = scale;
      }
    }
  });
}

void run_scatter(const Scatter& s) {
  const TensorView &rows = s.rows, &cache = s.cache;
  const int64_t T = rows.shape[0];
  if (T == 0) return;
  if (is_quantized_kv(cache.dtype)) return run_quantized_scatter(s);
  const int64_t H = rows.ndim == 3 ? rows.shape[1] : 1, D = rows.shape[rows.ndim - 1];
  const int64_t src_head = rows.ndim == 3 ? rows.strides[1] : 0, dst_head = cache.ndim == 4 ? cache.strides[2] : 0;
  const int64_t block_size = cache.shape[1];
  // Heads back to back on both sides: one conversion per token.
  const bool whole_token = H == 1 || (src_head == D && dst_head == D);
  const int64_t run = whole_token ? H * D : D, runs = whole_token ? 1 : H;
  const size_t src_elem = dtype_size(rows.dtype), dst_elem = dtype_size(cache.dtype);
  const int64_t per_task = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(H * D, 1));
  ThreadPool::global().parallel_for((T + per_task - 1) / per_task, [&](int64_t task, int) {
    static thread_local AlignedBuffer<float> tmp;
    for (int64_t t = task * per_task; t < std::min(T, (task + 1) * per_task); ++t) {
      const int64_t slot = s.slots[t];
      if (slot < 0) continue;
      const int64_t dst = (slot / block_size) * cache.strides[0] + (slot % block_size) * cache.strides[1];
      for (int64_t h = 0; h < runs; ++h)
        convert_row(static_cast<const char*>(rows.data) + (t * rows.strides[0] + h * src_head) * int64_t(src_elem),
                    rows.dtype, static_cast<char*>(cache.data) + (dst + h * dst_head) * int64_t(dst_elem),
                    cache.dtype, size_t(run), tmp);
    }
  });
}

}  // namespace

void write_paged_rows(const TensorView& rows, const int64_t* slot_mapping, const TensorView& cache,
                      const char* rows_name, const char* cache_name, const TensorView& scale, const char* scale_name) {
  if (!rows.device.is_cpu() || !cache.device.is_cpu()) {
    const PagedRowsCuda w{rows, cache, scale, rows_name, cache_name, scale_name};
    return write_paged_rows_on_device({&w, 1}, slot_mapping);
  }
  run_scatter(check_scatter(rows, slot_mapping, cache, rows_name, cache_name, scale, scale_name));
}

void write_kv_paged(const TensorView& k_new, const TensorView& v_new, const int64_t* slot_mapping,
                    const TensorView& k_cache, const TensorView& v_cache, const TensorView& k_scale,
                    const TensorView& v_scale) {
  // Runs on every decode step, which allocates nothing: messages are formatted only on failure.
  require(k_new.ndim == 3, "k_new", [&] { return "must be [tokens, kv_heads, head_dim], got " + k_new.shape_str(); });
  require(v_new.ndim == 3, "v_new", [&] { return "must be [tokens, kv_heads, head_dim], got " + v_new.shape_str(); });
  require(v_new.shape[0] == k_new.shape[0], "v_new",
          [&] { return "has " + str(v_new.shape[0]) + " tokens, k_new has " + str(k_new.shape[0]); });
  require(k_cache.dtype == v_cache.dtype, "v_cache", [&] {
    return std::string("dtype ") + dtype_name(v_cache.dtype) + " differs from k_cache's " + dtype_name(k_cache.dtype);
  });
  require(v_cache.ndim == 4 && k_cache.ndim == 4 && k_cache.shape[0] == v_cache.shape[0] &&
              k_cache.shape[1] == v_cache.shape[1],
          "v_cache", [&] {
            return "must have k_cache's [num_blocks, block_size], got " + v_cache.shape_str() + " and " +
                   k_cache.shape_str();
          });
  // One array passed as both would have the values written over the keys. (Only the same start is refused: k and v
  // may be interleaved views of one [num_blocks, 2, ...] buffer, whose spans overlap while their elements do not.)
  // (Arrays with no elements may share an address and hold nothing to overwrite.)
  require(v_cache.data != k_cache.data || k_cache.numel() == 0, "v_cache",
          "is k_cache (the same memory); pass a cache for the values");
  require(v_scale.empty() || v_scale.data != k_scale.data || k_scale.numel() == 0, "v_scale",
          "is k_scale (the same memory); pass scales for the values");
  if (!k_new.device.is_cpu() || !k_cache.device.is_cpu()) {
    const PagedRowsCuda w[2] = {{k_new, k_cache, k_scale, "k_new", "k_cache", "k_scale"},
                                {v_new, v_cache, v_scale, "v_new", "v_cache", "v_scale"}};
    return write_paged_rows_on_device(w, slot_mapping);
  }
  // Both validated before either is written, so a bad argument leaves both caches untouched.
  const Scatter k = check_scatter(k_new, slot_mapping, k_cache, "k_new", "k_cache", k_scale, "k_scale");
  const Scatter v = check_scatter(v_new, slot_mapping, v_cache, "v_new", "v_cache", v_scale, "v_scale");
  run_scatter(k);
  run_scatter(v);
}

}  // namespace attnzoo
