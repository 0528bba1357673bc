// quant_gemv: the decode projection over block-quantized weights, rows split over the thread pool.
#include <algorithm>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"

namespace attnzoo {
namespace {

constexpr int64_t kMaxTokens = 8;  // tokens per pass over the weights

// Rows per task: about 4 tasks per thread (claimed dynamically) and at least ~32 KiB of weights each.
int64_t rows_per_task(const QuantMatrix& w) {
  const int64_t tasks = int64_t(ThreadPool::global().num_threads()) * 4;
  const int64_t min_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(w.row_bytes, 1));
  return std::max(min_rows, (w.rows + tasks - 1) / tasks);
}

template <class RowFn>
void run_rows(const QuantMatrix& w, const QuantGemvTask& base, RowFn fn) {
  const int64_t rows = rows_per_task(w);
  ThreadPool::global().parallel_for((w.rows + rows - 1) / rows, [&](int64_t task, int) {
    QuantGemvTask g = base;
    g.n0 = size_t(task * rows);
    g.n1 = size_t(std::min(w.rows, (task + 1) * rows));
    fn(g);
  });
}

}  // namespace

bool quant_gemv_has_int8(QuantType type) { return quant_supported(type) && quant_is_blocked(type); }

bool quant_gemv_vnni_handles(QuantType type) {
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0 || type == QuantType::Q4_K || type == QuantType::Q6_K;
}

bool quant_gemv_vnni_enabled() { return vnni_int8_enabled(); }

void quant_gemv_f32(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  active_target();
  const int64_t K = w.cols;
  thread_local AlignedBuffer<float> xsum16;
  const bool blocked = quant_is_blocked(w.type);
  for (int64_t t0 = 0; t0 < T; t0 += kMaxTokens) {
    const int64_t tb = std::min(kMaxTokens, T - t0);
    if (blocked) {
      xsum16.resize(size_t(tb * K / 16));
      activation_sums16(x + t0 * K, size_t(tb), size_t(K), xsum16.data());
    }
    run_rows(w, QuantGemvTask{w, x + t0 * K, xsum16.data(), {}, size_t(tb), 0, 0, bias, y + t0 * ldy, size_t(ldy)},
             quant_gemv_rows_f32);
  }
}

void quant_gemv(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  if (!quant_gemv_has_int8(w.type)) return quant_gemv_f32(w, bias, x, T, y, ldy);
  active_target();
  const int64_t K = w.cols;
  thread_local AlignedBuffer<int16_t> q;
  thread_local AlignedBuffer<float> d, dsum16, dsum32, dx8, dxsum4;
  thread_local AlignedBuffer<int8_t> xs8;
  thread_local AlignedBuffer<int32_t> xsum4_neg8, xsum4_neg128;
  // Both rows read the packed blocks against 8-bit activation rows padded to 64 with per-lane sums.
  const bool vnni = quant_gemv_vnni_handles(w.type) && quant_gemv_vnni_enabled();
  const bool avx2 = !vnni && quant_gemv_avx2_handles(w.type) && quant_gemv_avx2_enabled();
  const bool lanes = vnni || avx2;
  const int64_t ld8 = (K + 63) / 64 * 64;
  for (int64_t t0 = 0; t0 < T; t0 += kMaxTokens) {
    const int64_t tb = std::min(kMaxTokens, T - t0);
    q.resize(size_t(tb * K));
    d.resize(size_t(tb * K / 32));
    dsum16.resize(size_t(tb * K / 16));
    dsum32.resize(size_t(tb * K / 32));
    if (lanes) {
      xs8.resize(size_t(tb * ld8));
      for (auto* lanes : {&dx8, &dxsum4}) lanes->resize(size_t(tb * ld8 / 4));
      for (auto* lanes : {&xsum4_neg8, &xsum4_neg128}) lanes->resize(size_t(tb * ld8 / 4));
    }
    auto when = [&](auto& buf) { return lanes ? buf.data() : nullptr; };
    const QuantActivationsOut out{q.data(),  d.data(),         dsum16.data(),       dsum32.data(),
                                  when(xs8), when(dx8),        when(xsum4_neg8),    when(xsum4_neg128),
                                  when(dxsum4), size_t(ld8)};
    quantize_activations(x + t0 * K, size_t(tb), size_t(K), out);
    if (vnni) quant_vnni_lane_sums(size_t(tb), out);
    if (avx2) quant_avx2_lane_sums(size_t(tb), out);
    const QuantActivations act{out.q,      out.xs8, out.dx8,    out.xsum4_neg8, out.xsum4_neg128,
                               out.dxsum4, out.d,   out.dsum16, out.dsum32};
    const QuantGemvTask task{w, x + t0 * K, nullptr, act, size_t(tb), 0, 0, bias, y + t0 * ldy, size_t(ldy)};
    if (vnni)
      run_rows(w, task, [](const QuantGemvTask& g) { quant_gemv_rows_vnni(g); });
    else if (avx2)
      run_rows(w, task, [](const QuantGemvTask& g) { quant_gemv_rows_avx2(g); });
    else
      run_rows(w, task, quant_gemv_rows_int8);
  }
}

void quant_matmul_reference(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y,
                            int64_t ldy) {
  std::vector<float> row(size_t(w.cols));
  for (int64_t n = 0; n < w.rows; ++n) {
    dequantize_row_reference(w.type, w.row(n), row.data(), w.cols);
    for (int64_t t = 0; t < T; ++t) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < w.cols; ++k) s += double(row[size_t(k)]) * x[t * w.cols + k];
      y[t * ldy + n] = float(s);
    }
  }
}

}  // namespace attnzoo
