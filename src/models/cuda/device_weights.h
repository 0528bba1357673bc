#pragma once
// How a projection's weights go to a GPU and which kernels multiply them there (device_linear.h runs the choice).
// Plain C++, tested on every machine.
//  dense:    F32 / BF16 / F16 as gemm_cuda reads them (f32 rounded to bf16 at load).
//  blocks:   a GGUF format the CUDA kernels read (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K): the blocks go up as the
//            file stores them (rows the CPU regrouped for its VNNI decode turned back into GGUF rows). A step of
//            up to kQuantGemvMaxRows rows multiplies them in the quantized GEMV; a longer one expands them into
//            a shared bf16 panel (kDequantPanelMaxBytes at most: big matrices go through it a slice of rows at a
//            time) and runs gemm_cuda over it.
//  expanded: every other GGUF format (Q5_0, Q5_1, Q2_K, Q3_K, IQ*, MXFP4 ...): dequantized on the host at load
//            and sent up as bf16, counted for one notice of what it costs. Token tables the CUDA gather does not
//            read (embedding_type_supported_cuda) are expanded the same way.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/quant_type.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

enum class DeviceWeights : uint8_t { dense, blocks, expanded };
DeviceWeights device_weights(QuantType type);

enum class DeviceProduct : uint8_t { gemm, gemv, dequant_gemm };
// How a step of `rows` activation rows multiplies weights kept as `w`.
DeviceProduct device_product(DeviceWeights w, int64_t rows);

// The bytes a GPU gets for w, on the host: `blocks` as GGUF rows (rows the CPU regrouped for its VNNI decode turned
// back, row_of_group), the others as bf16 / f16 rows (16-bit rows as stored; f32 rounded; other GGUF formats
// dequantized as dequantize_row_reference defines them, then rounded to nearest-even bf16).
std::vector<uint8_t> device_gguf_rows(const QuantMatrix& w);
std::vector<uint16_t> device_dense_rows(const QuantMatrix& w);

// The shared bf16 panel's cap, and the rows of a [rows, cols] matrix expanded into it at a time.
constexpr size_t kDequantPanelMaxBytes = size_t(64) << 20;
int64_t dequant_panel_rows(int64_t rows, int64_t cols);

// What going to a GPU cost a model's weights beyond their own bytes, for the notices at load.
struct WeightRounding {
  int64_t tensors = 0;  // f32 tensors rounded to bf16
  uint64_t f32_bytes = 0;
  int64_t expanded = 0;  // GGUF tensors of formats no CUDA kernel reads, expanded to bf16 on the host
  uint64_t expanded_gguf_bytes = 0, expanded_bf16_bytes = 0;
  std::string expanded_formats;  // their formats, ", "-separated, each once
  void count_expanded(QuantType type, uint64_t gguf_bytes, uint64_t bf16_bytes);
};
// The one line on stderr about expanded tensors ("" when none); `device` as Device::str spells it.
std::string expansion_notice(const WeightRounding& r, const std::string& device);
// The line saying what the shared bf16 panel costs ("" for none: no block-quantized projection).
std::string panel_notice(size_t panel_bytes, const std::string& device);

}  // namespace attnzoo
