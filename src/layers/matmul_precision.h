#pragma once
// Process-wide precision of projections (prefill, batched decode), named and behaving like
// torch.set_float32_matmul_precision:
//   highest (default): f32 products (bf16 weights are widened exactly), matching transformers' f32 path to 1e-4;
//   high: the same on CPU (torch's TF32 has no CPU counterpart);
//   medium: activations and weights rounded to bf16, products accumulated in f32 with AVX-512-BF16 (vdpbf16ps),
//           twice the f32 FMA rate; what llama.cpp and torch's bf16 CPU path do for bf16 models. CPUs or forced
//           targets without AVX-512-BF16 keep f32 products.
// Dense weights: every projection of more than one token (prefill, and a serving engine's batch of decodes) is
// affected; a single token's GEMV is bound by memory bandwidth, where rounding activations buys nothing. Block-quantized weights: "medium" also lets
// decode GEMVs quantize activations to 8 bits for integer dot products (llama.cpp's trade). Read once per
// projection call, set rarely.
#include <string>

namespace attnzoo {

enum class MatmulPrecision { highest, high, medium };

MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);

// "highest" / "high" / "medium"; parse throws ArgumentError naming `precision` for anything else.
const char* matmul_precision_name(MatmulPrecision p);
MatmulPrecision parse_matmul_precision(const std::string& name);

}  // namespace attnzoo
