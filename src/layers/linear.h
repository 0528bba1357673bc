#pragma once
// A dense projection y[T, out] = x[T, in] W^T (+ b), with W [out, in] as Hugging Face stores it.
// Weights are borrowed from the memory-mapped checkpoint when they are f32 or bf16 (the kernels widen bf16 on the
// fly, which is exact); f16 is converted once at load into an owned f32 copy, and where AMX runs, bf16 rows off a
// cache line (a safetensors file's) are copied once onto lines; a caller told of the copied source (CopiedSource:
// the loaders) drops the mapping's pages. Two paths:
//  - GEMV (T <= kGemvMaxTokens, i.e. decode): one pass over W, each weight row dotted with every token, rows split
//    over the thread pool, so the projection runs at memory bandwidth.
//  - GEMM (prefill): output features split into panels, one task per panel; the panel is widened to f32 (bf16)
//    and multiplied by single-threaded OpenBLAS (or our tile GEMM, see LinearGemmBackend). Measured on the
//    2-core AMD EPYC dev box (T=256, N=2048, K=1024, Linear.DISABLED_BenchPrefillGemmBackends): OpenBLAS
//    ~225-235 GFLOP/s for f32 and bf16 panels, the tile GEMM ~185 (its transposed packing is the extra cost),
//    so OpenBLAS is the default. With reduced-precision products (matmul_precision.h) on AVX-512-BF16 CPUs,
//    activations and weights are rounded to bf16 and multiplied on vdpbf16ps tiles (linear_bf16_gemm.cc).
// Block-quantized weights (GGUF formats, kernels/quant/) are borrowed as raw blocks (Q4_0 / Q4_1 / Q8_0 where
// the VNNI rows run: an owned copy regrouped 16 rows at a time, kernels/quant/row_groups.h): decode runs the quantized
// GEMV on them (f32 activations, or llama.cpp's integer dots over 8-bit activations where products may be
// reduced: by default, matmul precision "auto"), prefill dequantizes each panel to f32 (or rounds it to bf16
// pairs) and runs the same GEMM.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch_timeline.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"
#include "layers/linear_observer.h"
#include "layers/matmul_precision.h"
#include "layers/prompt_int8_route.h"

namespace attnzoo {

constexpr int64_t kGemvMaxTokens = 8;

// bf16_dot: bf16 products on bf16_pair_gemm (AMX tiles or vdpbf16ps), only where bf16_dot_available().
enum class LinearGemmBackend { openblas, tile, bf16_dot };

// Low-level entry points on raw views. w [N, K] contiguous f32 or bf16; x [T, K] f32 contiguous; y [T, N] f32
// with row stride ldy; bias [N] f32 or nullptr. Callers validate shapes.
void linear_forward(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);
void linear_gemv(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);
void linear_gemm(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                 LinearGemmBackend backend = LinearGemmBackend::openblas);
// The same for any weight format (F32, F16, BF16 or block-quantized): GEMV for T <= kGemvMaxTokens, else the
// GEMM with panels widened to f32 (openblas). With reduced-precision products (`reduced`: what
// reduced_products() says for these weights) block formats take 8-bit activations in the GEMV, and on
// AVX-512-BF16 dense weights take the bf16 GEMM from two tokens on, every format from kGemvMaxTokens + 1, except
// block weights whose integer rows take prompts (linear_prompt_int8_rows).
void linear_forward(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                    bool reduced);
// `reduced` as a Linear over `w` decides it (reduced weights: block formats).
void linear_forward(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);
void linear_gemm(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                 LinearGemmBackend backend = LinearGemmBackend::openblas);

// Prompts (T > kGemvMaxTokens) over block weights with reduced products take quant_gemv's integer rows or the
// panels as layers/prompt_int8_route.h decides (linear_prompt_takes_int8_rows, ATTNZOO_PROMPT_INT8).
// bf16 products (x and w rounded to bf16, f32 accumulation) on bf16_pair_gemm (AMX tiles where amx_bf16_enabled(),
// else vdpbf16ps); `panel` output rows per task. Needs bf16_dot_available().
void linear_gemm_bf16(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                      int64_t panel);
// x [T, K] rounded to bf16 pairs, and laid out as the bf16 GEMM's engine reads it, once for several projections of
// the same input (q / k / v, gate / up). The memory is the calling thread's scratch: valid until that thread
// prepares again, and read only by linear_gemm_bf16 calls from that thread.
struct Bf16Activations {
  const uint32_t* pairs = nullptr;       // [T][ceil(K / 2)]
  const uint32_t* transposed = nullptr;  // AMX token groups, or [K2][T rounded to 16] for few rows; else null
  int64_t T = 0, K = 0;
  bool amx = false;  // laid out for the AMX tiles (amx_bf16_enabled() when prepared)
};
Bf16Activations prepare_bf16_activations(const float* x, int64_t T, int64_t K);
void linear_gemm_bf16(const QuantMatrix& w, const float* bias, const Bf16Activations& x, float* y, int64_t ldy,
                      int64_t panel);
// The bf16-products GEMMs (linear_gemm_bf16 calls) run so far in this process on each engine of bf16_pair_gemm,
// and how many AMX ones copied W into aligned pairs rather than reading its rows in place (block formats, odd K,
// rows off a 64-byte line): what tests observe of the routing.
struct LinearBf16GemmCounts {
  uint64_t amx = 0, vdpbf16ps = 0, amx_staged = 0;
  uint64_t prepared = 0;  // activations rounded to bf16 pairs (prepare_bf16_activations calls)
  uint64_t straight_pairs = 0;  // regrouped row ranges decoded straight into pairs (row_group_pairs), not via f32
};
LinearBf16GemmCounts linear_bf16_gemm_counts();
// A dense [N, K] f32 / bf16 / f16 view as a QuantMatrix (F32 / BF16 / F16 rows).
QuantMatrix dense_matrix(const TensorView& w);
// Plain double-accumulation definition, for tests (w may be f32, bf16 or f16).
void linear_reference(const TensorView& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy);

// Told of a load-time copy's source as the copy reads it: [data, data + bytes) will not be read again by this
// Linear. A long copy reports slice by slice, each boundary at a 64 KiB-aligned address, so that no page is split
// between two reports; the spans cover the source once. Linear never touches the source's pages itself: only its
// caller knows whether they are a file mapping worth dropping (the loaders, models/weight_bytes.h) or memory of
// its own (a numpy array) that must stay as it is.
using CopiedSource = std::function<void(const void* data, size_t bytes)>;

class Linear {
 public:
  Linear() = default;
  // weight [out, in] f32/bf16/f16 (2-D, contiguous); bias [out] or an empty view. `name` appears in errors.
  // `store` chooses the weight precision: f32 keeps f32 and bf16 as they are (bf16 is exact in f32), bf16
  // rounds f32/f16 weights once into an owned bf16 copy (half the bytes streamed per decode step). Under matmul
  // precision "auto" a bf16 store (and any block format) takes reduced-precision products, an f32 store f32
  // products.
  // `copied`, when set, is told of the source spans an owned copy replaces (CopiedSource).
  static Linear from_weights(const TensorView& weight, const TensorView& bias, const std::string& name,
                             DType store = DType::f32, const CopiedSource& copied = {});
  // The GGUF loader's entry point: `nbytes` raw bytes holding an [out, in] matrix of `type` (rows of whole
  // blocks). F32 / F16 / BF16 behave as from_weights (with `store`); block formats are borrowed as they are and
  // computed on directly. ArgumentError naming `name` for an unsupported format or a size that does not fit.
  static Linear from_quantized(const void* data, uint64_t nbytes, QuantType type, int64_t out, int64_t in,
                               const TensorView& bias, const std::string& name, DType store = DType::f32,
                               const CopiedSource& copied = {});
  static Linear from_matrix(const QuantMatrix& w, const TensorView& bias, const std::string& name,
                            DType store = DType::f32, const CopiedSource& copied = {});

  int64_t in_features() const { return w_.cols; }
  int64_t out_features() const { return w_.rows; }
  const QuantMatrix& matrix() const { return w_; }
  bool is_quantized() const { return quant_is_blocked(w_.type); }
  // The dense weight [out, in] (f32 or bf16); ArgumentError naming the format for a block-quantized weight.
  TensorView weight() const;
  std::string shape_str() const;  // "[out, in]", with the format for block-quantized weights
  bool has_bias() const { return bias_ != nullptr; }
  // The bias as f32 (empty without one).
  std::span<const float> bias() const { return bias_ ? std::span<const float>(*bias_) : std::span<const float>(); }
  bool owns_weight() const { return owned_ != nullptr; }
  // The bytes of the source an owned copy stands in for (the source's size, what CopiedSource was told of; 0 for
  // borrowed weights and for copies kept beside their source, such as densified()).
  uint64_t replaced_source_bytes() const { return replaced_source_; }
  // The bytes one forward pass streams (quantized blocks for block formats).
  uint64_t weight_bytes() const { return w_.bytes(); }
  // An owned dense copy (f32 or bf16) of any weight, for consumers that need the matrix itself (MLA absorption).
  Linear densified(DType store = DType::f32) const;

  // ArgumentError naming `name` unless the weight is [out, in].
  void require_shape(int64_t out, int64_t in, const std::string& name) const;

  // x [T, in] f32 contiguous -> y [T, out] f32, rows ldy apart (contiguous by default).
  void forward(const float* x, int64_t T, float* y) const { forward(x, T, y, out_features()); }
  void forward(const float* x, int64_t T, float* y, int64_t ldy) const {
    if (LinearInputObserver* o = linear_input_observer()) o->observe(name(), x, T, in_features());
    const OpLabel label(name().c_str());
    linear_forward(w_, bias_ptr(), x, T, y, ldy, reduced_products(reduced_weights_));
  }
  // Block-quantized, or stored as bf16 on request: what matmul precision "auto" reduces the products of.
  bool reduced_weights() const { return reduced_weights_; }
  const std::string& name() const;  // as given at construction (the module's name)
  // Up to kMaxShared projections of the same x [T, in] (q / k / v, gate / up, a mixer's in_proj pieces): the
  // same results as forward() one by one; at decode sizes (f32 activations) the rows of all of them are split over
  // the pool in one dispatch instead of one each; grouped by route, those on the bf16 GEMM (a prefill) share one
  // rounding of x to bf16 pairs, those on the integer rows (8-bit activations, any T) one quantization of x and
  // one dispatch, and the rest run alone. Each y has its own row stride (ldy; 0: out_features),
  // so that projections may write side by side into columns of one buffer.
  struct SharedOutput {
    const Linear* linear = nullptr;
    float* y = nullptr;
    int64_t ldy = 0;
  };
  static constexpr int kMaxShared = 8;
  static void forward_shared(std::initializer_list<SharedOutput> outs, const float* x, int64_t T) {
    forward_shared(std::span<const SharedOutput>(outs.begin(), outs.size()), x, T);
  }
  static void forward_shared(std::span<const SharedOutput> outs, const float* x, int64_t T);
  // Test hook: off, forward_shared runs forward() one projection at a time (each quantizing or rounding x
  // itself), the path the mixers' tests compare the shared one to. Process-wide; on by default.
  static void set_sharing(bool on);
  static bool sharing();

 private:
  const float* bias_ptr() const { return bias_ ? bias_->data() : nullptr; }
  QuantMatrix w_;
  // Converted weights, or bf16 rows moved onto cache lines (aligned_copy_pays), when not borrowed; 64-byte aligned.
  std::shared_ptr<uint8_t> owned_;
  uint64_t replaced_source_ = 0;
  std::shared_ptr<std::vector<float>> bias_;
  std::shared_ptr<const std::string> name_;
  bool reduced_weights_ = false;
};

}  // namespace attnzoo
