// quant_gemv: the decode projection over block-quantized weights, rows split over the thread pool.
#include <algorithm>
#include <atomic>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant_input_scope.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {
namespace {

constexpr int64_t kMaxTokens = 8;  // tokens per pass over the weights

// Rows per task: about 4 tasks per thread (claimed dynamically) and at least ~32 KiB of weights each; whole
// groups of regrouped rows.
int64_t rows_per_task(const QuantMatrix& w) {
  const int64_t tasks = int64_t(ThreadPool::global().num_threads()) * 4;
  const int64_t min_rows = std::max<int64_t>(1, 32768 / std::max<int64_t>(w.row_bytes, 1));
  const int64_t rows = std::max(min_rows, (w.rows + tasks - 1) / tasks);
  return w.row_group ? (rows + w.row_group - 1) / w.row_group * w.row_group : rows;
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
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0 || type == QuantType::Q4_K ||
         type == QuantType::Q5_K || type == QuantType::Q6_K || type == QuantType::IQ4_NL || type == QuantType::IQ4_XS;
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

namespace {

enum class IntRows { vnni, avx2, portable };

// Which integer rows run w (the lane arrays and their sums depend on it). IQ4_NL / IQ4_XS take the AVX2 rows
// regrouped only (gemv_groups_avx2.cc); their GGUF rows there are the portable ones.
IntRows int_rows_of(const QuantMatrix& w) {
  const QuantType type = w.type;
  const bool avx2 = quant_gemv_avx2_handles(type) || (w.row_group && row_groups_iq4(type));
  return quant_gemv_vnni_handles(type) && quant_gemv_vnni_enabled() ? IntRows::vnni
         : avx2 && quant_gemv_avx2_enabled()                         ? IntRows::avx2
                                                                     : IntRows::portable;
}

std::atomic<uint64_t> quantizations{0};

// The activation arrays of rows [t0, ...) of a quantized batch (QuantActivations or QuantActivationsOut, which
// name their arrays alike): every array is row-major in tokens, xs8 and the lane arrays ld8 (ld8 / 4) apart.
template <class Arrays>
Arrays from_row(Arrays a, size_t t0, size_t K) {
  const size_t ld8 = a.ld8;
  if (a.q) a.q += t0 * K;
  if (a.xs8) a.xs8 += t0 * ld8;
  if (a.dx8) {
    a.dx8 += t0 * (ld8 / 4);
    a.xsum4_neg8 += t0 * (ld8 / 4);
    a.xsum4_neg128 += t0 * (ld8 / 4);
    a.dxsum4 += t0 * (ld8 / 4);
  }
  a.d += t0 * (K / 32);
  a.dsum16 += t0 * (K / 16);
  a.dsum32 += t0 * (K / 32);
  a.xsum16 += t0 * (K / 16);
  return a;
}

// Where the 8-bit activation rows of one call live (per calling thread: a call runs on one thread at a time).
struct ActivationBuffers {
  AlignedBuffer<int16_t> q;
  AlignedBuffer<float> d, dsum16, dsum32, dx8, dxsum4;
  AlignedBuffer<int8_t> xs8;
  AlignedBuffer<int32_t> xsum4_neg8, xsum4_neg128, xsum16;
};

// What the integer rows of a call read of the quantized x. The arrays are all written from the same q and d
// (quantize_activations), so one quantization serves every route at once, each reading its own: the portable rows
// the int16 copy, the VNNI and AVX2 rows xs8, and their GGUF rows the per-lane arrays too, whose sums are the same
// integers from either route's instruction (vpdpbusd or vpmaddubsw); the regrouped rows (gemv_groups_*.cc) read
// xs8 with d and the sums of 16 / 32.
struct ActivationReads {
  bool q16 = false, xs8 = false, lanes = false;
  IntRows sums = IntRows::avx2;  // whose instruction forms the lane sums: VNNI's where a matrix runs those rows
};

ActivationReads reads_of(std::span<const QuantGemvOutput> outs) {
  ActivationReads r;
  for (const QuantGemvOutput& o : outs) {
    const IntRows kind = int_rows_of(*o.w);
    if (kind == IntRows::portable) {
      r.q16 = true;
      continue;
    }
    r.xs8 = true;
    r.lanes = r.lanes || o.w->row_group == 0;
    if (kind == IntRows::vnni) r.sums = IntRows::vnni;
  }
  return r;
}

// Quantizes the T rows of x [T, K] into `b`, each row on its own (its values depend on no other row), in
// parallel for many rows; of the arrays only those `r` names.
QuantActivations quantize_rows(const float* x, int64_t T, int64_t K, const ActivationReads& r, ActivationBuffers& b) {
  const bool lanes = r.xs8, sums4 = r.xs8 && r.lanes;
  const size_t ld8 = size_t(K + 63) / 64 * 64, rows = size_t(T);
  // The int16 copy is the portable rows' alone (gemv_kernels.cc): the VNNI and AVX2 rows, GGUF and regrouped,
  // read xs8 and the sums.
  if (r.q16) b.q.resize(rows * size_t(K));
  b.d.resize(rows * size_t(K / 32));
  b.dsum16.resize(rows * size_t(K / 16));
  b.dsum32.resize(rows * size_t(K / 32));
  b.xsum16.resize(rows * size_t(K / 16));
  if (lanes) b.xs8.resize(rows * ld8);
  if (sums4) {
    for (auto* l : {&b.dx8, &b.dxsum4}) l->resize(rows * ld8 / 4);
    for (auto* l : {&b.xsum4_neg8, &b.xsum4_neg128}) l->resize(rows * ld8 / 4);
  }
  auto when = [](bool used, auto& buf) { return used ? buf.data() : nullptr; };
  const QuantActivationsOut all{.q = when(r.q16, b.q),
                                .d = b.d.data(),
                                .dsum16 = b.dsum16.data(),
                                .dsum32 = b.dsum32.data(),
                                .xsum16 = b.xsum16.data(),
                                .xs8 = when(lanes, b.xs8),
                                .dx8 = when(sums4, b.dx8),
                                .xsum4_neg8 = when(sums4, b.xsum4_neg8),
                                .xsum4_neg128 = when(sums4, b.xsum4_neg128),
                                .dxsum4 = when(sums4, b.dxsum4),
                                .ld8 = ld8};
  const QuantActivations act{.q = all.q,
                             .xs8 = all.xs8,
                             .dx8 = all.dx8,
                             .xsum4_neg8 = all.xsum4_neg8,
                             .xsum4_neg128 = all.xsum4_neg128,
                             .dxsum4 = all.dxsum4,
                             .d = all.d,
                             .dsum16 = all.dsum16,
                             .dsum32 = all.dsum32,
                             .xsum16 = all.xsum16,
                             .ld8 = ld8};
  quantizations.fetch_add(1, std::memory_order_relaxed);
  constexpr int64_t kRowsPerTask = 16;
  auto quantize = [&](int64_t t0, int64_t n) {
    const QuantActivationsOut o = from_row(all, size_t(t0), size_t(K));
    quantize_activations(x + t0 * K, size_t(n), size_t(K), o);
    if (sums4 && r.sums == IntRows::vnni) quant_vnni_lane_sums(size_t(n), o);
    if (sums4 && r.sums == IntRows::avx2) quant_avx2_lane_sums(size_t(n), o);
  };
  if (T <= kRowsPerTask) {
    quantize(0, T);
  } else {
    ThreadPool::global().parallel_for((T + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task, int) {
      const int64_t t0 = task * kRowsPerTask;
      quantize(t0, std::min(kRowsPerTask, T - t0));
    });
  }
  return act;
}

// The quantization a QuantInputScope shares (per thread: a scope is one thread's sequence of calls).
struct InputScope {
  bool active = false, quantized = false;
  const float* x = nullptr;
  int64_t T = 0, K = 0;
  ActivationReads reads;
  ActivationBuffers buffers;
  QuantActivations act{};
};

InputScope& input_scope() {
  thread_local InputScope s;
  return s;
}

// x quantized for rows that read `r`: into `own`, or, for the rows an open scope names, the scope's quantization
// (written once more, with the union of the arrays, where these rows read one it lacks).
QuantActivations activations_of(const float* x, int64_t T, int64_t K, const ActivationReads& r,
                                ActivationBuffers& own) {
  InputScope& s = input_scope();
  if (!s.active || s.x != x || s.T != T || s.K != K) return quantize_rows(x, T, K, r, own);
  const bool covered = (s.reads.q16 || !r.q16) && (s.reads.xs8 || !r.xs8) && (s.reads.lanes || !r.lanes);
  if (s.quantized && covered) return s.act;
  if (s.quantized) {
    s.reads.q16 = s.reads.q16 || r.q16;
    s.reads.xs8 = s.reads.xs8 || r.xs8;
    s.reads.lanes = s.reads.lanes || r.lanes;
    if (r.sums == IntRows::vnni) s.reads.sums = IntRows::vnni;
  } else {
    // The lane arrays too, whatever these rows read: a later call's GGUF rows beside these regrouped ones (a
    // branch's in_proj of 16k + 4 rows) would otherwise quantize again, for arrays of K / 4 values per token.
    s.reads = r;
    s.reads.lanes = r.xs8;
  }
  s.act = quantize_rows(x, T, K, s.reads, s.buffers);
  s.quantized = true;
  return s.act;
}

void run_int_rows(IntRows kind, const QuantGemvTask& g) {
  if (kind == IntRows::vnni)
    quant_gemv_rows_vnni(g);
  else if (kind == IntRows::avx2)
    quant_gemv_rows_avx2(g);
  else
    quant_gemv_rows_int8(g);
}

// Many rows (a prefill chunk, a large batch of decodes) of every output over one quantized x, in one dispatch:
// tasks of a panel of weight rows (~16 KiB, kept in L1) times a run of tokens, each run taken kMaxTokens at a
// time by the same row kernels. Every token's result is the one a call with that token alone gives (the kernels
// compute each token on its own), and each output element is written by one task whatever the others are, so
// one output or several give the same bits.
void run_prompt_rows(std::span<const QuantGemvOutput> outs, const QuantActivations& act, const IntRows* kinds,
                     const float* x, int64_t T) {
  constexpr int64_t kRun = 64;
  const int64_t K = outs[0].w->cols, runs = (T + kRun - 1) / kRun;
  thread_local std::vector<int64_t> panel, task0;
  panel.resize(outs.size());
  task0.assign(outs.size() + 1, 0);
  for (size_t i = 0; i < outs.size(); ++i) {
    const QuantMatrix& w = *outs[i].w;
    panel[i] = std::max<int64_t>(1, std::min<int64_t>(16384 / std::max<int64_t>(w.row_bytes, 1), 64));
    if (w.row_group) panel[i] = (panel[i] + w.row_group - 1) / w.row_group * w.row_group;
    task0[i + 1] = task0[i] + (w.rows + panel[i] - 1) / panel[i] * runs;
  }
  const int64_t* p = panel.data();
  const int64_t* t0s = task0.data();
  ThreadPool::global().parallel_for(t0s[outs.size()], [&](int64_t task, int) {
    size_t i = 0;
    while (task >= t0s[i + 1]) ++i;
    const QuantGemvOutput& o = outs[i];
    const int64_t local = task - t0s[i], n0 = (local / runs) * p[i], r0 = (local % runs) * kRun;
    QuantGemvTask g{*o.w, x, nullptr, act, 0, size_t(n0), size_t(std::min(o.w->rows, n0 + p[i])), o.bias, o.y,
                    size_t(o.ldy)};
    for (int64_t t0 = r0; t0 < std::min(T, r0 + kRun); t0 += kMaxTokens) {
      g.T = size_t(std::min(kMaxTokens, T - t0));
      g.act = from_row(act, size_t(t0), size_t(K));
      g.x = x + t0 * K;
      g.y = o.y + t0 * o.ldy;
      run_int_rows(kinds[i], g);
    }
  });
}

}  // namespace

void quant_gemv(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  if (!quant_gemv_has_int8(w.type)) return quant_gemv_f32(w, bias, x, T, y, ldy);
  if (T <= 0) return;
  active_target();
  const int64_t K = w.cols;
  // Both lane rows read the packed blocks against 8-bit activation rows padded to 64 with per-lane sums.
  const IntRows kind = int_rows_of(w);
  thread_local ActivationBuffers buffers;
  const QuantGemvOutput out{&w, bias, y, ldy};
  const QuantActivations act = activations_of(x, T, K, reads_of({&out, 1}), buffers);
  if (T > kMaxTokens) return run_prompt_rows({&out, 1}, act, &kind, x, T);
  const QuantGemvTask base{w, x, nullptr, act, size_t(T), 0, 0, bias, y, size_t(ldy)};
  run_rows(w, base, [kind](const QuantGemvTask& g) { run_int_rows(kind, g); });
}

void quant_gemv_shared(std::span<const QuantGemvOutput> outs, const float* x, int64_t T) {
  if (outs.empty() || T <= 0) return;
  const QuantMatrix& first = *outs[0].w;
  bool shared = outs.size() > 1;
  for (const QuantGemvOutput& o : outs) shared = shared && quant_gemv_has_int8(o.w->type) && o.w->cols == first.cols;
  if (!shared) {
    for (const QuantGemvOutput& o : outs) quant_gemv(*o.w, o.bias, x, T, o.y, o.ldy);
    return;
  }
  active_target();
  // Each matrix on its own rows (Q5_0's AVX2 rows beside Q4_0's VNNI ones), all over one quantization of x.
  thread_local std::vector<IntRows> kinds;
  kinds.resize(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) kinds[i] = int_rows_of(*outs[i].w);
  thread_local ActivationBuffers buffers;
  const QuantActivations act = activations_of(x, T, first.cols, reads_of(outs), buffers);
  if (T > kMaxTokens) return run_prompt_rows(outs, act, kinds.data(), x, T);
  // Task ranges of each matrix as quant_gemv splits it alone, numbered one after the other.
  thread_local std::vector<int64_t> rows, task0;
  rows.resize(outs.size());
  task0.assign(outs.size() + 1, 0);
  for (size_t i = 0; i < outs.size(); ++i) {
    rows[i] = rows_per_task(*outs[i].w);
    task0[i + 1] = task0[i] + (outs[i].w->rows + rows[i] - 1) / rows[i];
  }
  const int64_t* r = rows.data();
  const int64_t* t0 = task0.data();
  const IntRows* k = kinds.data();
  ThreadPool::global().parallel_for(t0[outs.size()], [&](int64_t task, int) {
    size_t i = 0;
    while (task >= t0[i + 1]) ++i;
    const QuantGemvOutput& o = outs[i];
    const int64_t n0 = (task - t0[i]) * r[i];
    run_int_rows(k[i], QuantGemvTask{*o.w, x, nullptr, act, size_t(T), size_t(n0),
                                     size_t(std::min(o.w->rows, n0 + r[i])), o.bias, o.y, size_t(o.ldy)});
  });
}

QuantInputScope::QuantInputScope(const float* x, int64_t T, int64_t K) {
  InputScope& s = input_scope();
  if (s.active) return;  // inside another scope: that one's rows stay shared
  s.active = active_ = true;
  s.quantized = false;
  s.x = x;
  s.T = T;
  s.K = K;
}

QuantInputScope::~QuantInputScope() {
  if (active_) input_scope().active = false;
}

uint64_t quant_gemv_quantizations() { return quantizations.load(std::memory_order_relaxed); }

void quant_matmul_reference(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y,
                            int64_t ldy) {
  std::vector<float> row(size_t(w.cols));
  AlignedBuffer<uint8_t> blocks;
  for (int64_t n = 0; n < w.rows; ++n) {
    dequantize_row_reference(w.type, row_of_group(w, n, blocks), row.data(), w.cols);
    for (int64_t t = 0; t < T; ++t) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < w.cols; ++k) s += double(row[size_t(k)]) * x[t * w.cols + k];
      y[t * ldy + n] = float(s);
    }
  }
}

}  // namespace attnzoo
