#include "layers/linear.h"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/amx.h"
#include "core/batch_invariance.h"
#include "core/convert.h"
#include "core/bf16_dot.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "layers/blas_core.h"
#include "layers/linear_kernels.h"
#include "layers/matmul_precision.h"

namespace attnzoo {
namespace {

// bf16 rows that the AMX projection would read off a cache line. Its tile rows are 64 bytes: off a line each
// straddles two and the loads pull twice the lines, so the GEMM copies such rows aligned on every call of a long
// prompt (linear_bf16_gemm.cc; ~10% of a 512-token prefill of a safetensors checkpoint, whose tensors sit at
// 8-byte offsets). Copied once at load instead, into the same layout, every path reads them as before with the
// same bits. Rows of a width that is not whole lines stay where they are: the GEMM pads those per call anyway.
// Only where the AMX tiles run: the GEMV and the vdpbf16ps GEMM (which transposes W's panels) gain nothing from it.
bool aligned_copy_pays(const QuantMatrix& w) {
  return w.type == QuantType::BF16 && reinterpret_cast<uintptr_t>(w.data) % 64 != 0 && w.row_bytes % 64 == 0 &&
         w.rows > 0 && amx_bf16_enabled();
}

// Owned weights on cache lines; from 1 MiB on, pages of their own, mapped and unmapped whole. From malloc, whose
// mmap threshold grows after large frees, a model's few-MiB copies landed in the heap, and freeing the model
// returned none of it (a process after a bench model run of the Qwen3-0.6B-shaped safetensors file: 908 MiB
// resident instead of 188). Smaller ones stay in the heap: a map each would spend the process's map count.
std::shared_ptr<uint8_t> owned_bytes(size_t n) {
  n = std::max<size_t>(n, 1);
  if (n < (size_t(1) << 20)) {
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  }
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [n](uint8_t* q) { munmap(q, n); });
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

QuantMatrix dense_matrix(const TensorView& w) {
  return QuantMatrix{w.data, *quant_type_of(w.dtype), w.shape[0], w.shape[1], w.shape[1] * int64_t(dtype_size(w.dtype))};
}

namespace {

TensorView dense_view(const QuantMatrix& w) {
  return TensorView::contiguous(const_cast<void*>(w.data), *dtype_of(w.type), {w.rows, w.cols});
}

}  // namespace

void linear_gemm(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                 LinearGemmBackend backend) {
  if (backend != LinearGemmBackend::tile) return linear_gemm(dense_matrix(w), bias, x, T, y, ldy, backend);
  active_target();
  const int64_t N = w.shape[0], K = w.shape[1];
  const int64_t rows = panel_rows(N, 32, 16);
  ThreadPool::global().parallel_for((N + rows - 1) / rows, [&](int64_t task, int) {
    tile_gemm_panel({w.data, w.dtype, size_t(K), x, size_t(T), size_t(task * rows),
                     size_t(std::min(N, (task + 1) * rows)), bias, y, size_t(ldy)});
  });
}

void linear_gemm(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                 LinearGemmBackend backend) {
  active_target();
  const int64_t N = w.rows, K = w.cols;
  const int64_t rows = panel_rows(N, 32, 16);
  const int64_t tasks = (N + rows - 1) / rows;
  if (backend == LinearGemmBackend::bf16_dot) {
    // Named explicitly (tests, `bench kernels`): runs wherever the CPU can, whatever the vendor rule prefers, on
    // AMX tiles where amx_bf16_enabled() (bf16_pair_gemm's choice), else on vdpbf16ps.
    require(bf16_dot_available(), "backend", "bf16_dot needs AVX-512-BF16 and the avx512_bf16 target");
    linear_gemm_bf16(w, bias, x, T, y, ldy, rows);
    return;
  }
  if (backend == LinearGemmBackend::tile) {
    require(w.type == QuantType::F32 || w.type == QuantType::BF16, "backend",
            std::string("the tile GEMM takes f32 or bf16 weights, not ") + quant_type_name(w.type));
    return linear_gemm(dense_view(w), bias, x, T, y, ldy, backend);
  }
  configure_blas();  // single-threaded, and off a fallback core, before the first GEMM
  ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
    const int64_t n0 = task * rows, nb = std::min(N, n0 + rows) - n0;
    const float* panel;
    thread_local AlignedBuffer<float> widened;
    if (w.type == QuantType::F32) {
      panel = static_cast<const float*>(w.data) + n0 * K;  // borrowed: BLAS reads the mapping directly
    } else {
      // A panel's rows are contiguous in W: widened (bf16, f16) or dequantized (blocks) in one pass.
      widened.resize(size_t(nb * K));
      dequantize_rows(w, n0, nb, widened.data());
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
  linear_forward(dense_matrix(w), bias, x, T, y, ldy);
}

void linear_forward(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy) {
  linear_forward(w, bias, x, T, y, ldy, reduced_products(quant_is_blocked(w.type)));
}

namespace {

enum class Route { quant_gemv_invariant, gemv, bf16_gemm, gemm };

Route route_of(const QuantMatrix& w, int64_t T, bool reduced) {
  // bf16 products run on bf16_pair_gemm: AMX tiles where the CPU has them, else vdpbf16ps where preferred.
  const bool bf16_products = reduced && bf16_tiles_enabled();
  const bool dense = w.type == QuantType::F32 || w.type == QuantType::BF16;
  // Several rows of dense weights with reduced products (a batch of decodes) are a compute-bound product, not a
  // bandwidth-bound one: the bf16 tiles beat dotting every weight row with every token in f32 (bench serve, 8
  // clients). One row stays on the GEMV, at bandwidth either way.
  // Batch-invariant numerics: block weights take the integer dots for every token count (each token's sums on
  // their own, as a lone decode computes them), never the bf16 tiles, whose result differs from the GEMV's; dense
  // weights take the tiles for one row too (their rows are independent: a token's sums do not depend on the rows
  // beside it), since the GEMV's f32 products differ from the tiles' bf16 ones.
  const bool dense_tiles = dense && bf16_products && (T > 1 || batch_invariant());
  if (!dense && reduced && quant_gemv_has_int8(w.type) && batch_invariant()) return Route::quant_gemv_invariant;
  if (T <= kGemvMaxTokens && !dense_tiles) return Route::gemv;
  if (!dense && reduced && linear_prompt_takes_int8_rows(w.type, T, w.row_group != 0)) return Route::gemv;
  return bf16_products ? Route::bf16_gemm : Route::gemm;
}

}  // namespace

void linear_forward(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                    bool reduced) {
  if (T <= 0) return;
  const bool dense = w.type == QuantType::F32 || w.type == QuantType::BF16;
  const Route route = route_of(w, T, reduced);
  if (route == Route::quant_gemv_invariant) {
    quant_gemv(w, bias, x, T, y, ldy);
  } else if (route == Route::gemv) {
    // Block weights: f32 activations when products stay exact (the products of the dequantized weights, as
    // exact as the GEMM); llama.cpp's 8-bit activations (integer dots, ~0.5% error per projection, enough to flip
    // near-tied greedy choices of a small model) where they may be reduced, as matmul precision "auto" allows.
    if (dense)
      linear_gemv(dense_view(w), bias, x, T, y, ldy);
    else if (reduced)
      quant_gemv(w, bias, x, T, y, ldy);
    else
      quant_gemv_f32(w, bias, x, T, y, ldy);
  } else if (route == Route::bf16_gemm) {
    linear_gemm(w, bias, x, T, y, ldy, LinearGemmBackend::bf16_dot);
  } else {
    linear_gemm(w, bias, x, T, y, ldy);
  }
}

namespace {
std::atomic<bool> g_sharing{true};
}  // namespace

void Linear::set_sharing(bool on) { g_sharing.store(on, std::memory_order_relaxed); }
bool Linear::sharing() { return g_sharing.load(std::memory_order_relaxed); }

void Linear::forward_shared(std::span<const SharedOutput> outs, const float* x, int64_t T) {
  if (int(outs.size()) > kMaxShared)
    throw ArgumentError("outs: at most " + std::to_string(kMaxShared) + " projections");
  if (outs.empty()) return;
  for (const SharedOutput& o : outs)
    if (o.linear == nullptr || o.y == nullptr || (o.ldy != 0 && o.ldy < o.linear->out_features()))
      throw ArgumentError("outs: each projection needs a Linear, an output and ldy 0 or >= its out_features" +
                          (o.linear ? " (" + o.linear->name() + ")" : std::string()));
  const auto ldy_of = [](const SharedOutput& o) { return o.ldy ? o.ldy : o.linear->out_features(); };
  if (T <= 0) return;
  if (!sharing()) {
    for (const SharedOutput& o : outs) o.linear->forward(x, T, o.y, ldy_of(o));
    return;
  }
  // Fused only where linear_forward would take the f32-activation GEMV for every projection, so the results stay
  // those of forward() one by one: with reduced products the integer path quantizes x per call, and several rows
  // of dense weights go to the bf16 tiles.
  bool fused = T >= 1 && T <= kGemvMaxTokens, blocked = false;
  for (const auto& [l, y, ld] : outs) {
    const bool reduced = reduced_products(l->reduced_weights_);
    if (l->in_features() != outs[0].linear->in_features()) fused = false;
    if (l->is_quantized()) {
      blocked = true;
      if (reduced) fused = false;
    } else if (l->w_.type != QuantType::F32 && l->w_.type != QuantType::BF16) {
      fused = false;
    } else if (reduced && bf16_tiles_enabled() && (T > 1 || batch_invariant())) {
      fused = false;
    }
  }
  if (!fused) {
    // Grouped by route: block weights on the integer rows share one quantization of x and one dispatch (q / k /
    // v, gate / up, at decode sizes and on the prompt rows); those on the bf16 GEMM share one rounding (and
    // transpose) of x; the rest (a dense router beside quantized experts) run alone. The products are forward()'s.
    const int64_t K = outs[0].linear->in_features();
    QuantGemvOutput int8[kMaxShared];
    const SharedOutput* int8_of[kMaxShared];
    const SharedOutput* bf16[kMaxShared];
    const SharedOutput* alone[kMaxShared];
    size_t n_int8 = 0, n_bf16 = 0, n_alone = 0;
    for (const SharedOutput& o : outs) {
      const Linear* l = o.linear;
      const bool reduced = reduced_products(l->reduced_weights_);
      const Route route = route_of(l->w_, T, reduced);
      if (l->in_features() != K)
        alone[n_alone++] = &o;
      else if (l->is_quantized() && reduced && (route == Route::gemv || route == Route::quant_gemv_invariant))
        int8_of[n_int8] = &o, int8[n_int8++] = {&l->w_, l->bias_ptr(), o.y, ldy_of(o)};
      else if (route == Route::bf16_gemm)
        bf16[n_bf16++] = &o;
      else
        alone[n_alone++] = &o;
    }
    if (n_int8 >= 2) {
      if (LinearInputObserver* obs = linear_input_observer())
        for (size_t i = 0; i < n_int8; ++i) obs->observe(int8_of[i]->linear->name(), x, T, K);
      quant_gemv_shared({int8, n_int8}, x, T);
    } else if (n_int8 == 1) {
      int8_of[0]->linear->forward(x, T, int8_of[0]->y, ldy_of(*int8_of[0]));
    }
    if (n_bf16 >= 2) {
      active_target();
      const Bf16Activations prepared = prepare_bf16_activations(x, T, K);
      for (size_t i = 0; i < n_bf16; ++i) {
        const Linear* l = bf16[i]->linear;
        if (LinearInputObserver* o = linear_input_observer()) o->observe(l->name(), x, T, l->in_features());
        const OpLabel label(l->name().c_str());
        linear_gemm_bf16(l->w_, l->bias_ptr(), prepared, bf16[i]->y, ldy_of(*bf16[i]), panel_rows(l->w_.rows, 32, 16));
      }
    } else if (n_bf16 == 1) {
      bf16[0]->linear->forward(x, T, bf16[0]->y, ldy_of(*bf16[0]));
    }
    for (size_t i = 0; i < n_alone; ++i) alone[i]->linear->forward(x, T, alone[i]->y, ldy_of(*alone[i]));
    return;
  }
  if (LinearInputObserver* o = linear_input_observer())  // calibration sees each projection, as forward() shows it
    for (const auto& [l, y, ld] : outs) o->observe(l->name(), x, T, l->in_features());
  active_target();
  const int64_t K = outs[0].linear->in_features();
  thread_local AlignedBuffer<float> xsum16_scratch;  // the tasks read it through `xsum16`, not by name
  const float* xsum16 = nullptr;
  if (blocked) {
    xsum16_scratch.resize(size_t(T * K / 16));
    activation_sums16(x, size_t(T), size_t(K), xsum16_scratch.data());
    xsum16 = xsum16_scratch.data();
  }
  // Task ranges of each projection, rows per task as in linear_gemv (~64 KiB of weights, ~4 tasks per thread).
  const Linear* ls[kMaxShared];
  float* ys[kMaxShared];
  int64_t lds[kMaxShared], rows[kMaxShared], first[kMaxShared + 1] = {0};
  int n = 0;
  for (const auto& [l, y, ld] : outs) {
    ls[n] = l;
    ys[n] = y;
    lds[n] = ld ? ld : l->w_.rows;
    rows[n] = panel_rows(l->w_.rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(l->w_.row_bytes, 1)), 1);
    first[n + 1] = first[n] + (l->w_.rows + rows[n] - 1) / rows[n];
    ++n;
  }
  ThreadPool::global().parallel_for(first[n], [&](int64_t task, int) {
    int i = 0;
    while (task >= first[i + 1]) ++i;
    const QuantMatrix& w = ls[i]->w_;
    const int64_t n0 = (task - first[i]) * rows[i], n1 = std::min(w.rows, n0 + rows[i]);
    const float* bias = ls[i]->bias_ptr();
    if (quant_is_blocked(w.type)) {
      quant_gemv_rows_f32({w, x, xsum16, {}, size_t(T), size_t(n0), size_t(n1), bias, ys[i],
                           size_t(lds[i])});
    } else {
      gemv_rows({w.data, w.type == QuantType::F32 ? DType::f32 : DType::bf16, size_t(K), x, size_t(T), size_t(n0),
                 size_t(n1), bias, ys[i], size_t(lds[i])});
    }
  });
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

TensorView Linear::weight() const {
  require(!is_quantized(), "weight",
          std::string("the weight is block-quantized (") + quant_type_name(w_.type) + "); use matrix() or densified()");
  return dense_view(w_);
}

std::string Linear::shape_str() const {
  std::string s("[");  // appended piecewise: g++ 12 misreports "[" + std::string as an overlapping copy
  s += std::to_string(w_.rows);
  s += ", ";
  s += std::to_string(w_.cols);
  s += "]";
  if (is_quantized()) s += std::string(" ") + quant_type_name(w_.type);
  return s;
}

void Linear::require_shape(int64_t out, int64_t in, const std::string& name) const {
  require(out_features() == out && in_features() == in, name.c_str(),
          "expected weight [" + std::to_string(out) + ", " + std::to_string(in) + "], got " + shape_str());
}

Linear Linear::from_weights(const TensorView& weight, const TensorView& bias, const std::string& name, DType store,
                            const CopiedSource& copied) {
  require(weight.ndim == 2, name.c_str(), "weight must be 2-D [out, in], got " + weight.shape_str());
  require(weight.is_contiguous(), name.c_str(), "weight must be contiguous");
  if (weight.dtype != DType::f32 && weight.dtype != DType::bf16 && weight.dtype != DType::f16)
    throw DTypeError(name + ": weight dtype " + dtype_name(weight.dtype) + " is not f32, bf16 or f16");
  return from_matrix(dense_matrix(weight), bias, name, store, copied);
}

Linear Linear::from_quantized(const void* data, uint64_t nbytes, QuantType type, int64_t out, int64_t in,
                              const TensorView& bias, const std::string& name, DType store,
                              const CopiedSource& copied) {
  return from_matrix(make_quant_matrix(data, nbytes, type, out, in, name), bias, name, store, copied);
}

Linear Linear::from_matrix(const QuantMatrix& w, const TensorView& bias, const std::string& name, DType store,
                           const CopiedSource& copied) {
  require(store == DType::f32 || store == DType::bf16, name.c_str(), "weights are held as f32 or bf16");
  Linear l;
  l.w_ = w;
  l.name_ = std::make_shared<const std::string>(name);
  // Block formats and bf16 are kept as they are; f16 (and f32 when bf16 is asked for) become an owned copy.
  const bool keep = quant_is_blocked(w.type) || w.type == QuantType::BF16 || (w.type == QuantType::F32 && store == DType::f32);
  if (!keep) l = l.densified(store);
  if (row_groups_pay(w)) {
    // Regrouped once into an owned copy for the VNNI / AVX2 decode rows (row_groups.h): the same bytes, moved.
    l.owned_ = owned_bytes(size_t(w.bytes()));
    l.w_ = to_row_groups(w, l.owned_.get());
  }
  if (l.owned_ == nullptr && aligned_copy_pays(w)) {
    // Its size once, resident where the source's pages were (where the caller drops them), instead of a copy per
    // prefill. Reported slice by slice, so that a loader dropping the mapping's pages as they are read peaks at the
    // copies' size, not at that plus the largest tensor (the tied 300 MiB embedding of Qwen3-0.6B raised the peak
    // by its size when dropped whole). Slices end on 64 KiB-aligned source addresses: no page is split between two.
    l.owned_ = owned_bytes(size_t(w.bytes()));
    const auto* src = static_cast<const uint8_t*>(w.data);
    const size_t total = size_t(w.bytes());
    constexpr uintptr_t kSlice = uintptr_t(8) << 20, kBoundary = uintptr_t(64) << 10;
    for (size_t o = 0; o < total;) {
      const uintptr_t end = (uintptr_t(src + o) + kSlice) / kBoundary * kBoundary;
      const size_t n = std::min(size_t(end - uintptr_t(src + o)), total - o);
      std::memcpy(l.owned_.get() + o, src + o, n);
      if (copied) copied(src + o, n);
      o += n;
    }
    l.w_.data = l.owned_.get();
  } else if (l.owned_ != nullptr && copied) {
    copied(w.data, size_t(w.bytes()));
  }
  if (l.owned_ != nullptr) l.replaced_source_ = w.bytes();
  l.reduced_weights_ = quant_is_blocked(w.type) || store == DType::bf16;
  if (!bias.empty()) {
    require(bias.ndim == 1 && bias.shape[0] == w.rows, name.c_str(),
            "bias must be [" + std::to_string(w.rows) + "], got " + bias.shape_str());
    l.bias_ = std::make_shared<std::vector<float>>(size_t(bias.shape[0]));
    convert_to_f32(bias.data, bias.dtype, l.bias_->data(), l.bias_->size());
  }
  return l;
}

const std::string& Linear::name() const {
  static const std::string kUnnamed;
  return name_ ? *name_ : kUnnamed;
}

Linear Linear::densified(DType store) const {
  if ((w_.type == QuantType::F32 && store == DType::f32) || (w_.type == QuantType::BF16 && store == DType::bf16))
    return *this;
  require(store == DType::f32 || store == DType::bf16, "store", "weights are held as f32 or bf16");
  Linear l = *this;
  const size_t n = size_t(w_.rows * w_.cols);
  std::vector<float> widened(n);
  dequantize_rows(w_, 0, w_.rows, widened.data());
  l.owned_ = owned_bytes(n * dtype_size(store));
  l.replaced_source_ = 0;  // a copy beside this Linear's weight, which stays (from_matrix sets it where it replaces one)
  convert_from_f32(widened.data(), l.owned_.get(), store, n);
  l.w_ = dense_matrix(TensorView::contiguous(l.owned_.get(), store, {w_.rows, w_.cols}));
  // The values keep the blocks' rounding (or the bf16 store that was asked for), so "auto" still reduces.
  l.reduced_weights_ = reduced_weights_ || store == DType::bf16;
  return l;
}

}  // namespace attnzoo
