#pragma once
// Process-wide precision of projections, named like torch.set_float32_matmul_precision, plus "auto":
//   auto (default): each projection at the precision its weights were stored in. Block-quantized weights (GGUF
//           Q4_0 ... Q8_0, K-quants, MXFP4) and weights loaded with dtype bfloat16 take reduced-precision
//           products, as "medium" below: the weights' own rounding error is far larger than that of 8-bit / bf16
//           activations, and it is what llama.cpp does for such files and torch for a bf16 model. f32 weights
//           (and bf16 checkpoints loaded with the default dtype float32, which asks for f32 arithmetic) keep f32
//           products, matching transformers' f32 path to 1e-4.
//   highest: f32 products for every weight (bf16 weights are widened exactly, blocks dequantized exactly);
//   high: the same on CPU (torch's TF32 has no CPU counterpart);
//   medium: reduced-precision products for every weight: activations and weights rounded to bf16, products
//           accumulated in f32 with AVX-512-BF16 (vdpbf16ps), twice the f32 FMA rate (CPUs or forced targets
//           without AVX-512-BF16 keep f32 products for dense weights); decode GEMVs over block-quantized weights
//           quantize the activations to 8 bits for integer dot products (llama.cpp's trade, ~0.5% error per
//           projection), and so do prompts over them where the VNNI rows run without AMX (linear_prompt_int8_rows,
//           layers/linear.h).
// Dense weights: every projection of more than one token (prefill, and a serving engine's batch of decodes) is
// affected; a single token's GEMV is bound by memory bandwidth, where rounding activations buys nothing. A softmax
// layer whose q projection takes reduced products also rounds its prefill queries to bf16 over a bf16 cache, so
// the attention runs on the bf16 tiles (layers/paged_attention.h). Read once per projection call, set rarely.
#include <string>

namespace attnzoo {

enum class MatmulPrecision { automatic, highest, high, medium };

MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);

// Sets the precision for a scope and puts the previous one back (tests, benchmarks).
class ScopedMatmulPrecision {
 public:
  explicit ScopedMatmulPrecision(MatmulPrecision p) : saved_(matmul_precision()) { set_matmul_precision(p); }
  ~ScopedMatmulPrecision() { set_matmul_precision(saved_); }
  ScopedMatmulPrecision(const ScopedMatmulPrecision&) = delete;
  ScopedMatmulPrecision& operator=(const ScopedMatmulPrecision&) = delete;

 private:
  MatmulPrecision saved_;
};

// Whether a projection takes reduced-precision products under the current setting; `reduced_weights`: its
// weights are block-quantized or were stored as bf16 on request (what "auto" decides by).
bool reduced_products(bool reduced_weights);

// "auto" / "highest" / "high" / "medium"; parse throws ArgumentError naming `precision` for anything else.
const char* matmul_precision_name(MatmulPrecision p);
MatmulPrecision parse_matmul_precision(const std::string& name);

}  // namespace attnzoo
