#include "layers/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/aligned_buffer.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "layers/linear_kernels.h"
#include "layers/matmul_precision.h"

namespace attnzoo {
namespace {

// OpenBLAS runs inside our tasks; its own threads would oversubscribe the cores.
void init_blas_once() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Splits [0, n) into about 4 tasks per thread (dynamic claiming balances them), each a multiple of `align` rows
// and at least `min_rows`.
int64_t panel_rows(int64_t n, int64_t min_rows, int64_t align) {
  const int64_t tasks = int64_t(ThreadPool::global().num_threads()) * 4;
  int64_t rows = std::max<int64_t>(min_rows, (n + tasks - 1) / tasks);
  return (rows + align - 1) / align * align;
}

}  // namespace

void linear_gemv(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  active_target();
  const int64_t N = w.shape[0], K = w.shape[1];
  for (int64_t t0 = 0; t0 < T; t0 += kGemvMaxTokens) {
    const int64_t tb = std::min(kGemvMaxTokens, T - t0);
    // Rows per task: enough bytes (~64 KiB) that task overhead stays small.
    const int64_t bytes_per_row = K * int64_t(dtype_size(w.dtype));
    const int64_t rows = panel_rows(N, std::max<int64_t>(1, 65536 / std::max<int64_t>(bytes_per_row, 1)), 1);
    ThreadPool::global().parallel_for((N + rows - 1) / rows, [&](int64_t task, int) {
      GemvTask g{w.data, w.dtype, size_t(K), x + t0 * K, size_t(tb), size_t(task * rows),
                 size_t(std::min(N, (task + 1) * rows)), bias, y + t0 * ldy, size_t(ldy)};
      gemv_rows(g);
    });
  }
}

void linear_gemm(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                 LinearGemmBackend backend) {
  active_target();
  const int64_t N = w.shape[0], K = w.shape[1];
  const int64_t rows = panel_rows(N, 32, 16);
  const int64_t tasks = (N + rows - 1) / rows;
  if (backend == LinearGemmBackend::bf16_dot) {
    require(bf16_dot_enabled(), "backend", "bf16_dot needs AVX-512-BF16 and the avx512_bf16 target");
    linear_gemm_bf16(w, bias, x, T, y, ldy, rows);
    return;
  }
  if (backend == LinearGemmBackend::tile) {
    ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
      tile_gemm_panel({w.data, w.dtype, size_t(K), x, size_t(T), size_t(task * rows),
                       size_t(std::min(N, (task + 1) * rows)), bias, y, size_t(ldy)});
    });
    return;
  }
  init_blas_once();
  ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
    const int64_t n0 = task * rows, nb = std::min(N, n0 + rows) - n0;
    const float* panel;
    thread_local AlignedBuffer<float> widened;
    if (w.dtype == DType::f32) {
      panel = w.ptr<float>() + n0 * K;  // borrowed: BLAS reads the mapping directly
    } else {
      // A panel's rows are contiguous in W, so one bulk conversion widens it.
      widened.resize(size_t(nb * K));
      convert_to_f32(static_cast<const uint8_t*>(w.data) + n0 * K * int64_t(dtype_size(w.dtype)), w.dtype,
                     widened.data(), size_t(nb * K));
      panel = widened.data();
    }
    float* out = y + n0;
    float beta = 0.f;
    if (bias) {
      for (int64_t t = 0; t < T; ++t) std::copy(bias + n0, bias + n0 + nb, out + t * ldy);
      beta = 1.f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(T), blasint(nb), blasint(K), 1.f, x, blasint(K),
                panel, blasint(K), beta, out, blasint(ldy));
  });
}

void linear_forward(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  if (T <= 0) return;
  if (T <= kGemvMaxTokens)
    linear_gemv(w, bias, x, T, y, ldy);
  else if (matmul_precision() == MatmulPrecision::medium && bf16_dot_enabled())
    linear_gemm(w, bias, x, T, y, ldy, LinearGemmBackend::bf16_dot);
  else
    linear_gemm(w, bias, x, T, y, ldy);
}

void linear_reference(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  const int64_t N = w.shape[0], K = w.shape[1];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(load_as_f32(w.data, w.dtype, n * K + k)) * x[t * K + k];
      y[t * ldy + n] = float(s);
    }
}

void Linear::require_shape(int64_t out, int64_t in, const std::string& name) const {
  require(out_features() == out && in_features() == in, name.c_str(),
          "expected weight [" + std::to_string(out) + ", " + std::to_string(in) + "], got " + w_.shape_str());
}

Linear Linear::from_weights(const TensorView& weight, const TensorView& bias, const std::string& name, DType store) {
  require(weight.ndim == 2, name.c_str(), "weight must be 2-D [out, in], got " + weight.shape_str());
  require(weight.is_contiguous(), name.c_str(), "weight must be contiguous");
  if (weight.dtype != DType::f32 && weight.dtype != DType::bf16 && weight.dtype != DType::f16)
    throw DTypeError(name + ": weight dtype " + dtype_name(weight.dtype) + " is not f32, bf16 or f16");
  require(store == DType::f32 || store == DType::bf16, name.c_str(), "weights are held as f32 or bf16");
  Linear l;
  l.w_ = weight;
  const bool keep = weight.dtype == DType::bf16 || (weight.dtype == DType::f32 && store == DType::f32);
  if (!keep) {
    const size_t n = size_t(weight.numel());
    auto widened = std::vector<float>(n);
    convert_to_f32(weight.data, weight.dtype, widened.data(), n);
    l.owned_ = std::make_shared<std::vector<uint8_t>>(n * dtype_size(store));
    if (store == DType::f32)
      std::memcpy(l.owned_->data(), widened.data(), n * 4);
    else
      convert_from_f32(widened.data(), l.owned_->data(), DType::bf16, n);
    l.w_ = TensorView::contiguous(l.owned_->data(), store, {weight.shape[0], weight.shape[1]});
  }
  if (!bias.empty()) {
    require(bias.ndim == 1 && bias.shape[0] == weight.shape[0], name.c_str(),
            "bias must be [" + std::to_string(weight.shape[0]) + "], got " + bias.shape_str());
    l.bias_ = std::make_shared<std::vector<float>>(size_t(bias.shape[0]));
    convert_to_f32(bias.data, bias.dtype, l.bias_->data(), l.bias_->size());
  }
  return l;
}

}  // namespace attnzoo
