// GGUF weights on the GPU runner, its host half on every machine (models/cuda/device_weights.h): how each format
// goes up (the bytes too) and which kernel multiplies it for a step's row count, the slices of the shared bf16
// panel, the notice
// for formats expanded at load, and tiny GGUF decoders taken by check_decoder_runs_on_cuda, token tables the CUDA
// gather cannot read included (expanded at load).
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/quant/row_groups.h"
#include "layers/attention_layer.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/mlp.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_weights.h"
#include "models/model.h"
#include "testing/random_blocks.h"
#include "testing/tiny_gguf.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyDecoder;

TEST(DeviceWeights, EachFormatGoesUpAsItsKernelsReadIt) {
  for (QuantType t : {QuantType::F32, QuantType::BF16, QuantType::F16})
    EXPECT_EQ(device_weights(t), DeviceWeights::dense) << quant_type_name(t);
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_1, QuantType::Q4_K, QuantType::Q5_K,
                      QuantType::Q6_K})
    EXPECT_EQ(device_weights(t), DeviceWeights::blocks) << quant_type_name(t);
  for (QuantType t : {QuantType::Q5_0, QuantType::Q5_1, QuantType::Q2_K, QuantType::Q3_K, QuantType::MXFP4})
    EXPECT_EQ(device_weights(t), DeviceWeights::expanded) << quant_type_name(t);
}

TEST(DeviceWeights, BlocksTakeTheGemvUpToEightRowsAndThePanelPastThem) {
  for (int64_t rows : {1, 2, 5, 8}) EXPECT_EQ(device_product(DeviceWeights::blocks, rows), DeviceProduct::gemv);
  for (int64_t rows : {9, 64, 4096})
    EXPECT_EQ(device_product(DeviceWeights::blocks, rows), DeviceProduct::dequant_gemm);
  for (DeviceWeights w : {DeviceWeights::dense, DeviceWeights::expanded})
    for (int64_t rows : {1, 8, 9, 4096}) EXPECT_EQ(device_product(w, rows), DeviceProduct::gemm);
}

TEST(DeviceWeights, ThePanelHoldsWholeMatricesUpTo64MiBAndSlicesBiggerOnes) {
  EXPECT_EQ(dequant_panel_rows(49152, 576), 49152);  // SmolLM2-135M's head, 54 MiB of bf16: one slice
  EXPECT_EQ(dequant_panel_rows(128256, 4096), 8192);  // Llama 3's head: 16 slices of 64 MiB
  EXPECT_EQ(dequant_panel_rows(14336, 4096), 8192);
  EXPECT_EQ(dequant_panel_rows(100000, 3000), 11136);  // whole 64-row groups
  EXPECT_EQ(dequant_panel_rows(1000, int64_t(1) << 20), 64);  // never below 64 rows
  EXPECT_EQ(dequant_panel_rows(10, int64_t(1) << 20), 10);
}

// What goes up: GGUF rows back from the CPU's 16-row groups, and expanded weights bit for bit the reference's values
// rounded to bf16.
TEST(DeviceWeights, TheDeviceGetsGgufRowsAndTheReferencesBf16) {
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K}) {
    const int64_t rows = 32, cols = 512;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, rows, cols, 5 + uint64_t(t));
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, rows, cols, "w");
    ASSERT_TRUE(row_groups_format(t));
    std::vector<uint8_t> grouped_bytes(raw.size());
    const QuantMatrix grouped = to_row_groups(w, grouped_bytes.data());
    ASSERT_EQ(grouped.row_group, 16);
    EXPECT_NE(grouped_bytes, raw) << quant_type_name(t);  // the regrouping moved bytes
    EXPECT_EQ(device_gguf_rows(grouped), raw) << quant_type_name(t);
    EXPECT_EQ(device_gguf_rows(w), raw) << quant_type_name(t);
  }
  for (QuantType t : {QuantType::Q5_0, QuantType::Q3_K, QuantType::Q8_0}) {
    const int64_t rows = 5, cols = 256;
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, rows, cols, 9 + uint64_t(t));
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, rows, cols, "w");
    const std::vector<uint16_t> got = device_dense_rows(w);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row_reference(t, w.row(r), row.data(), cols);
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(got[size_t(r * cols + c)], f32_to_bf16(row[size_t(c)])) << quant_type_name(t) << " " << r << ", " << c;
    }
  }
  const std::vector<float> f32 = {1.f, 1.00390625f, -3.f, 1e-3f};  // 1 + 2^-8: a tie, to even (1)
  const QuantMatrix f32_w{f32.data(), QuantType::F32, 1, 4, 16};
  EXPECT_EQ(device_dense_rows(f32_w), (std::vector<uint16_t>{f32_to_bf16(1.f), f32_to_bf16(1.f), f32_to_bf16(-3.f),
                                                             f32_to_bf16(1e-3f)}));
}

TEST(DeviceWeights, ExpandedTensorsAreOneNotice) {
  WeightRounding r;
  EXPECT_EQ(expansion_notice(r, "cuda:0"), "");
  r.count_expanded(QuantType::Q5_0, 11 << 20, 32 << 20);
  r.count_expanded(QuantType::Q3_K, 3 << 20, 16 << 20);
  r.count_expanded(QuantType::Q5_0, 11 << 20, 32 << 20);
  EXPECT_EQ(expansion_notice(r, "cuda:0"),
            "attnzoo: 3 GGUF weight tensors (Q5_0, Q3_K) expanded to bf16 at load for cuda:0, which has no kernel "
            "for their blocks: 80.0 MiB there instead of 25.0\n");
  EXPECT_EQ(panel_notice(0, "cuda:0"), "");
  EXPECT_EQ(panel_notice(size_t(49152) * 576 * 2, "cuda:1"),
            "attnzoo: 54.0 MiB on cuda:1 for the bf16 panel GGUF projections expand into for steps of more than 8 rows\n");
}

DecoderParts parts_of(const Model& m) { return dynamic_cast<const DecoderModel&>(m).parts(); }

std::string refusal(const Model& m) {
  try {
    check_decoder_runs_on_cuda(parts_of(m));
  } catch (const ArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(DecoderCudaGguf, GgufDecodersAreTaken) {
  ScratchDir q8, q4k, tied;
  const auto q8_model = Model::load(write_tiny_gguf(q8, TinyDecoder{}, QuantType::Q8_0));
  EXPECT_EQ(refusal(*q8_model), "");
  const auto q4k_model = Model::load(write_tiny_gguf(q4k, TinyDecoder{}, QuantType::Q4_K));
  EXPECT_EQ(refusal(*q4k_model), "");
  // Q4_K asked: the 128-column projections fell back to Q5_0 (expanded at load), the 256-column ones kept Q4_K.
  const DecoderBlock& b = (*parts_of(*q4k_model).blocks)[0];
  const auto& attn = dynamic_cast<const AttentionLayer&>(*b.mixer);
  EXPECT_EQ(attn.q_proj().matrix().type, QuantType::Q5_0);
  EXPECT_EQ(device_weights(attn.q_proj().matrix().type), DeviceWeights::expanded);
  EXPECT_EQ(attn.o_proj().matrix().type, QuantType::Q4_K);
  EXPECT_EQ(device_weights(attn.o_proj().matrix().type), DeviceWeights::blocks);
  // No output.weight: the head is the Q8_0 token table, multiplied as blocks.
  const auto tied_model = Model::load(write_tiny_gguf(tied, TinyDecoder{.tied = true}, QuantType::Q8_0));
  EXPECT_EQ(refusal(*tied_model), "");
  EXPECT_EQ(parts_of(*tied_model).lm_head->matrix().type, QuantType::Q8_0);
}

// The gather reads Q8_0 / Q4_0 / Q4_K / Q6_K tables; a Q5_0 one is expanded to bf16 at load rather than refused.
TEST(DecoderCudaGguf, TokenTablesTheGatherCannotReadAreTaken) {
  ScratchDir dir;
  TensorPolicy q5_table;
  q5_table.token_embedding_type = QuantType::Q5_0;
  const auto model = Model::load(write_tiny_gguf(dir, TinyDecoder{}, QuantType::Q8_0, q5_table));
  EXPECT_EQ(parts_of(*model).embed->matrix().type, QuantType::Q5_0);
  EXPECT_FALSE(embedding_type_supported_cuda(QuantType::Q5_0));
  EXPECT_EQ(refusal(*model), "");
}

}  // namespace
}  // namespace attnzoo
