// llama-quantize's per-tensor choices, restated case by case.
#include "convert/tensor_policy.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

using Q = QuantType;

TEST(TensorPolicy, LlamaQuantizeDefaults) {
  TensorPolicy p;
  p.type = Q::Q4_K;
  EXPECT_EQ(choose_tensor_type(p, "blk.0.ffn_up.weight", {512, 256}, Q::BF16), Q::Q4_K);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_norm.weight", {256}, Q::BF16), Q::F32);  // 1-D: F32
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_q.bias", {256}, Q::F16), Q::F32);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q6_K);
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q6_K);
  // Rows that are not whole super-blocks: llama.cpp's fallbacks.
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::Q5_0);
  p.type = Q::Q5_K;
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::Q5_1);
  p.type = Q::Q6_K;
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::Q8_0);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 100}, Q::F32), Q::F16);  // not even 32s
  p.type = Q::IQ4_XS;
  EXPECT_EQ(choose_tensor_type(p, "blk.0.ffn_up.weight", {512, 256}, Q::BF16), Q::IQ4_XS);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::IQ4_NL);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 100}, Q::F32), Q::F16);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q6_K);
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 128}, Q::F32), Q::Q8_0);  // Q6_K's own fallback
  p.type = Q::IQ4_NL;
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::IQ4_NL);
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q6_K);
  for (Q low : {Q::Q2_K, Q::Q3_K}) {  // llama-quantize's fallback for both is Q4_0; head and embedding Q6_K
    p.type = low;
    EXPECT_EQ(choose_tensor_type(p, "blk.0.ffn_up.weight", {512, 256}, Q::BF16), low);
    EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 128}, Q::F32), Q::Q4_0);
    EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_output.weight", {256, 100}, Q::F32), Q::F16);
    EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q6_K);
    EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q6_K);
  }
  p.type = Q::Q8_0;
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 64}, Q::F32), Q::Q8_0);
  p.type = Q::BF16;  // float types keep themselves everywhere but 1-D tensors
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 64}, Q::F32), Q::BF16);
  EXPECT_EQ(choose_tensor_type(p, "blk.3.ffn_down.weight", {64, 100}, Q::F32), Q::BF16);
}

TEST(TensorPolicy, OverridesInOrderOfStrength) {
  TensorPolicy p;
  p.type = Q::Q4_0;
  p.tensor_types = {{"ffn_(up|gate)", Q::Q8_0}, {"blk\\.1\\.", Q::Q5_1}};
  p.keep = {"attn_v", "ffn_up"};
  p.output_type = Q::Q5_K;
  p.token_embedding_type = Q::F16;
  EXPECT_EQ(choose_tensor_type(p, "blk.1.ffn_up.weight", {64, 64}, Q::BF16), Q::Q8_0);  // first pattern wins
  EXPECT_EQ(choose_tensor_type(p, "blk.1.ffn_down.weight", {64, 64}, Q::BF16), Q::Q5_1);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_v.weight", {64, 64}, Q::BF16), Q::BF16);  // --keep
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_k.weight", {64, 64}, Q::BF16), Q::Q4_0);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q5_K);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 64}, Q::F32), Q::Q5_1);  // an override falls back too
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 64}, Q::F32), Q::F16);
  EXPECT_EQ(choose_tensor_type(p, "per_layer_token_embd.weight", {320, 64}, Q::F32), Q::F16);
  EXPECT_EQ(choose_tensor_type(p, "blk.0.attn_norm.weight", {64}, Q::F32), Q::F32);  // 1-D whatever the patterns
  p.tensor_types = {{"(", Q::Q8_0}};
  EXPECT_THROW(choose_tensor_type(p, "x.weight", {64, 64}, Q::F32), ArgumentError);
}

TEST(TensorPolicy, TypeNamesAndFileTypes) {
  EXPECT_EQ(parse_quant_type("q4_k", "--type"), Q::Q4_K);
  EXPECT_EQ(parse_quant_type("BF16", "--type"), Q::BF16);
  try {
    parse_quant_type("IQ2_XXS", "--type");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--type: unknown type 'IQ2_XXS' (choose from F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, "
              "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  }
  EXPECT_EQ(parse_quant_type("q2_k", "--type"), Q::Q2_K);
  EXPECT_EQ(llama_file_type(Q::Q2_K), 10u);  // LLAMA_FTYPE_MOSTLY_Q2_K
  EXPECT_EQ(llama_file_type(Q::Q3_K), 11u);  // LLAMA_FTYPE_MOSTLY_Q3_K_S
  EXPECT_EQ(llama_file_type(Q::Q4_K), 14u);  // LLAMA_FTYPE_MOSTLY_Q4_K_S
  EXPECT_EQ(llama_file_type(Q::Q8_0), 7u);
  EXPECT_EQ(llama_file_type(Q::BF16), 32u);
  EXPECT_EQ(parse_quant_type("iq4_xs", "--type"), Q::IQ4_XS);
  EXPECT_EQ(llama_file_type(Q::IQ4_NL), 25u);  // LLAMA_FTYPE_MOSTLY_IQ4_NL
  EXPECT_EQ(llama_file_type(Q::IQ4_XS), 30u);  // LLAMA_FTYPE_MOSTLY_IQ4_XS
}

}  // namespace
}  // namespace attnzoo
