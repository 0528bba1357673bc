// llama-quantize's mixtures, case by case (the whole-file comparison with llama.cpp's own rules and with
// llama-quantize is python/tests/test_quantize_mixtures.py).
#include "convert/ftype_mixture.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

using Q = QuantType;

// A Llama-shaped tensor list of `layers` blocks (rows of 256), listed in an order llama.cpp does not use.
std::vector<MixtureTensor> llama_tensors(int layers, bool tied) {
  std::vector<MixtureTensor> t;
  for (int i = layers - 1; i >= 0; --i)
    for (const char* n : {"ffn_up", "ffn_down", "attn_v", "attn_q", "attn_k", "attn_output", "attn_norm"})
      t.push_back({"blk." + std::to_string(i) + "." + n + ".weight",
                   n == std::string("attn_norm") ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 256}});
  t.push_back({"token_embd.weight", {320, 256}});
  if (!tied) t.push_back({"output.weight", {320, 256}});
  return t;
}

TensorPolicy mixture(const std::string& name) {
  TensorPolicy p;
  set_file_type(p, name, "--type");
  return p;
}

std::string blk(int i, const char* n) { return "blk." + std::to_string(i) + "." + n + ".weight"; }

TEST(FtypeMixture, Q4KMRaisesAttnVAndFfnDownWhereMoreBits) {
  TensorPolicy p = mixture("q4_k_m");
  ASSERT_NE(p.mixture, nullptr);
  EXPECT_EQ(p.type, Q::Q4_K);
  EXPECT_EQ(llama_file_type(p), 15u);
  const MixtureModel m{"llama", 16, 0, 8, 2, false};
  p.mixture_types = resolve_mixture(p, m, llama_tensors(16, false));
  // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2 -> 0 1 4 7 10 13 14 15
  for (int i = 0; i < 16; ++i) {
    const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_v"), {256, 256}, Q::F32), more ? Q::Q6_K : Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down"), {256, 256}, Q::F32), more ? Q::Q6_K : Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_k"), {256, 256}, Q::F32), Q::Q4_K);
  }
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q6_K);
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q4_K);  // untied: the main type
  EXPECT_EQ(choose_tensor_type(p, blk(0, "attn_norm"), {256}, Q::F32), Q::F32);
  EXPECT_EQ(choose_tensor_type(p, blk(0, "attn_v"), {256, 128}, Q::F32), Q::Q8_0);  // Q6_K's fallback
}

TEST(FtypeMixture, TiedEmbeddingTakesTheHeadsType) {
  TensorPolicy p = mixture("Q5_K_S");
  p.mixture_types = resolve_mixture(p, {"llama", 4, 0, 4, 4, false}, llama_tensors(4, true));
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q6_K);
  EXPECT_EQ(choose_tensor_type(p, blk(0, "ffn_down"), {256, 256}, Q::F32), Q::Q5_K);
  EXPECT_EQ(llama_file_type(p), 16u);
  p.output_type = Q::Q8_0;  // a tied embedding follows --output-tensor-type
  p.mixture_types = resolve_mixture(p, {"llama", 4, 0, 4, 4, false}, llama_tensors(4, true));
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q8_0);
}

TEST(FtypeMixture, Q4KSFirstFourAttnVAndFirstEighthFfnDown) {
  TensorPolicy p = mixture("Q4_K_S");
  p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 4, 4, false}, llama_tensors(16, false));
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_v"), {256, 256}, Q::F32), i < 4 ? Q::Q5_K : Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down"), {256, 256}, Q::F32), i < 2 ? Q::Q5_K : Q::Q4_K) << i;
  }
  // an override decides its tensor and is not counted: the first four are then layers 1 to 4
  p.tensor_types = {{"blk\\.0\\.attn_v", Q::Q8_0}};
  p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 4, 4, false}, llama_tensors(16, false));
  EXPECT_EQ(choose_tensor_type(p, blk(0, "attn_v"), {256, 256}, Q::F32), Q::Q8_0);
  EXPECT_EQ(choose_tensor_type(p, blk(4, "attn_v"), {256, 256}, Q::F32), Q::Q5_K);
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_v"), {256, 256}, Q::F32), Q::Q4_K);
}

TEST(FtypeMixture, Iq4BumpsNeedGqaFourAndNoImportance) {
  for (const char* name : {"IQ4_NL", "iq4_xs"}) {
    TensorPolicy p = mixture(name);
    const Q main = p.type;
    p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, llama_tensors(16, false));
    EXPECT_EQ(choose_tensor_type(p, blk(9, "attn_v"), {256, 256}, Q::F32), Q::Q5_K);
    EXPECT_EQ(choose_tensor_type(p, blk(1, "ffn_down"), {256, 256}, Q::F32), Q::Q5_K);
    EXPECT_EQ(choose_tensor_type(p, blk(2, "ffn_down"), {256, 256}, Q::F32), main);
    p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 8, 4, true}, llama_tensors(16, false));
    EXPECT_EQ(choose_tensor_type(p, blk(9, "attn_v"), {256, 256}, Q::F32), main);  // GQA 2
    EXPECT_EQ(choose_tensor_type(p, blk(1, "ffn_down"), {256, 256}, Q::F32), main);  // with an imatrix
    p.pure = true;  // llama-quantize's --pure: the head too
    EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), main);
  }
}

TEST(FtypeMixture, EightExpertsReadTheLayerFromTheName) {
  TensorPolicy p = mixture("Q4_K_M");
  std::vector<MixtureTensor> t = llama_tensors(8, false);
  for (int i = 0; i < 8; ++i) t.push_back({blk(i, "ffn_down_exps"), {8, 256, 256}});
  p.mixture_types = resolve_mixture(p, {"llama", 8, 8, 4, 4, false}, t);
  EXPECT_EQ(choose_tensor_type(p, blk(3, "attn_v"), {256, 256}, Q::F32), Q::Q8_0);
  EXPECT_EQ(choose_tensor_type(p, blk(3, "attn_k"), {256, 256}, Q::F32), Q::Q8_0);
  EXPECT_EQ(choose_tensor_type(p, blk(3, "attn_output"), {256, 256}, Q::F32), Q::Q5_K);
  // use_more_bits(i, 8): 0 3 6 7, per name, for the dense and the expert ffn_down alike
  for (int i = 0; i < 8; ++i) {
    const Q want = (i == 0 || i == 3 || i >= 6) ? Q::Q6_K : Q::Q4_K;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down_exps"), {8, 256, 256}, Q::F32), want) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down"), {256, 256}, Q::F32), want) << i;
  }
  t.push_back({"ffn_down_extra.weight", {256, 256}});
  EXPECT_THROW(resolve_mixture(p, {"llama", 8, 8, 4, 4, false}, t), ArgumentError);
}

TEST(FtypeMixture, SingleTypesReadTheRulesToo) {
  std::vector<MixtureTensor> t = llama_tensors(16, false);
  for (int i = 0; i < 16; ++i) t.push_back({blk(i, "ffn_down_exps"), {8, 256, 256}});
  for (Q main : {Q::Q4_0, Q::Q4_1, Q::Q5_0, Q::Q5_1, Q::Q8_0, Q::Q6_K}) {
    SCOPED_TRACE(quant_type_name(main));
    TensorPolicy p;
    set_file_type(p, quant_type_name(main), "--type");
    EXPECT_EQ(p.mixture, nullptr);
    // dense, untied: only the head leaves the main type (Q6_K, Q8_0's own); the embedding keeps it
    p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, llama_tensors(16, false));
    EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), main == Q::Q8_0 ? Q::Q8_0 : Q::Q6_K);
    EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), main);
    for (const char* n : {"attn_v", "attn_k", "attn_output", "ffn_down"})
      EXPECT_EQ(choose_tensor_type(p, blk(0, n), {256, 256}, Q::F32), main) << n;
    // 8 experts: attn_k and attn_v Q8_0, attn_output and the experts stay
    p.mixture_types = resolve_mixture(p, {"llama", 16, 8, 8, 2, false}, t);
    EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_v"), {256, 256}, Q::F32), Q::Q8_0);
    EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_k"), {256, 256}, Q::F32), Q::Q8_0);
    EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_output"), {256, 256}, Q::F32), main);
    EXPECT_EQ(choose_tensor_type(p, blk(5, "ffn_down_exps"), {8, 256, 256}, Q::F32), main);
    // with an imatrix, Q4_0 / Q5_0's ffn_down below n/8 in Q4_1 / Q5_1 (layers 0 and 1 of 16)
    p.mixture_types = resolve_mixture(p, {"llama", 16, 8, 8, 2, true}, t);
    const Q guarded = main == Q::Q4_0 ? Q::Q4_1 : main == Q::Q5_0 ? Q::Q5_1 : main;
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down_exps"), {8, 256, 256}, Q::F32), i < 2 ? guarded : main) << i;
    // tied: the embedding is the head; --pure: the main type everywhere, the head too
    p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, llama_tensors(16, true));
    EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), main == Q::Q8_0 ? Q::Q8_0 : Q::Q6_K);
    p.pure = true;
    p.mixture_types = resolve_mixture(p, {"llama", 16, 8, 8, 2, false}, t);
    EXPECT_TRUE(p.mixture_types.empty());
    EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_v"), {256, 256}, Q::F32), main);
    EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), main);
  }
  // falcon's head: Q8_0; the float types and a single K-quant (only --pure reaches one) read no rules
  TensorPolicy f;
  set_file_type(f, "Q4_0", "--type");
  f.mixture_types = resolve_mixture(f, {"falcon", 16, 0, 8, 8, false}, llama_tensors(16, false));
  EXPECT_EQ(choose_tensor_type(f, "output.weight", {320, 256}, Q::F32), Q::Q8_0);
  for (Q q : {Q::F16, Q::BF16, Q::F32, Q::Q4_K}) {
    f.type = q;
    EXPECT_TRUE(resolve_mixture(f, {"llama", 16, 8, 8, 2, true}, t).empty()) << quant_type_name(q);
  }
}

TEST(FtypeMixture, Q2KMRaisesVAndFfnDownAndAttnOutput) {
  TensorPolicy p = mixture("Q2_K_M");
  EXPECT_EQ(p.type, Q::Q2_K);
  p.mixture_types = resolve_mixture(p, {"llama", 8, 0, 8, 2, false}, llama_tensors(8, false));
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_v"), {256, 256}, Q::F32), Q::Q4_K);  // GQA 4
  EXPECT_EQ(choose_tensor_type(p, blk(5, "ffn_down"), {256, 256}, Q::F32), Q::Q3_K);
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_output"), {256, 256}, Q::F32), Q::Q3_K);
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_q"), {256, 256}, Q::F32), Q::Q2_K);
  EXPECT_EQ(choose_tensor_type(p, "token_embd.weight", {320, 256}, Q::F32), Q::Q2_K);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q6_K);
  p.mixture_types = resolve_mixture(p, {"llama", 8, 0, 8, 4, false}, llama_tensors(8, false));
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_v"), {256, 256}, Q::F32), Q::Q3_K);  // GQA 2
  // a Llama-70B shape widens the Q3_K attn_v to Q5_K
  p.mixture_types = resolve_mixture(p, {"llama", 80, 0, 8, 4, false}, llama_tensors(80, false));
  EXPECT_EQ(choose_tensor_type(p, blk(40, "attn_v"), {256, 256}, Q::F32), Q::Q5_K);
}

TEST(FtypeMixture, Q3KMFirstTwoAttnVAndSixteenthOfFfnDown) {
  TensorPolicy p = mixture("Q3_K_M");
  p.mixture_types = resolve_mixture(p, {"llama", 32, 0, 4, 4, false}, llama_tensors(32, false));
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_v"), {256, 256}, Q::F32), i < 2 ? Q::Q5_K : Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down"), {256, 256}, Q::F32), i < 2 ? Q::Q5_K : Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_output"), {256, 256}, Q::F32), Q::Q4_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_k"), {256, 256}, Q::F32), Q::Q3_K) << i;
  }
  // falcon: ffn_down Q4_K only where use_more_bits, else the main type; attn_output stays
  p.mixture_types = resolve_mixture(p, {"falcon", 32, 0, 4, 4, false}, llama_tensors(32, false));
  EXPECT_EQ(choose_tensor_type(p, blk(1, "ffn_down"), {256, 256}, Q::F32), Q::Q5_K);
  EXPECT_EQ(choose_tensor_type(p, blk(3, "ffn_down"), {256, 256}, Q::F32), Q::Q4_K);  // i < n/8
  EXPECT_EQ(choose_tensor_type(p, blk(5, "ffn_down"), {256, 256}, Q::F32), Q::Q3_K);
  EXPECT_EQ(choose_tensor_type(p, blk(6, "ffn_down"), {256, 256}, Q::F32), Q::Q4_K);  // (6 - 4) % 3 == 2
  EXPECT_EQ(choose_tensor_type(p, blk(5, "attn_output"), {256, 256}, Q::F32), Q::Q3_K);
  EXPECT_EQ(choose_tensor_type(p, "output.weight", {320, 256}, Q::F32), Q::Q8_0);
}

TEST(FtypeMixture, Q3KLAndQ3KSWithAndWithoutEightExperts) {
  std::vector<MixtureTensor> t = llama_tensors(8, false);
  TensorPolicy l = mixture("Q3_K_L"), s = mixture("Q3_K_S");
  l.mixture_types = resolve_mixture(l, {"llama", 8, 0, 4, 4, false}, t);
  s.mixture_types = resolve_mixture(s, {"llama", 8, 0, 4, 4, false}, t);
  for (const char* n : {"attn_v", "ffn_down", "attn_output"}) {
    EXPECT_EQ(choose_tensor_type(l, blk(6, n), {256, 256}, Q::F32), Q::Q5_K) << n;
    EXPECT_EQ(choose_tensor_type(s, blk(6, n), {256, 256}, Q::F32), Q::Q3_K) << n;
  }
  // 8 experts: Q3_K_S raises attn_output to Q5_K, Q3_K_L leaves it in Q3_K (llama.cpp's list leaves it out)
  l.mixture_types = resolve_mixture(l, {"llama", 8, 8, 4, 4, false}, t);
  s.mixture_types = resolve_mixture(s, {"llama", 8, 8, 4, 4, false}, t);
  EXPECT_EQ(choose_tensor_type(l, blk(6, "attn_output"), {256, 256}, Q::F32), Q::Q3_K);
  EXPECT_EQ(choose_tensor_type(s, blk(6, "attn_output"), {256, 256}, Q::F32), Q::Q5_K);
  EXPECT_EQ(choose_tensor_type(l, blk(6, "attn_v"), {256, 256}, Q::F32), Q::Q8_0);
  EXPECT_EQ(choose_tensor_type(l, blk(6, "ffn_down"), {256, 256}, Q::F32), Q::Q5_K);
}

TEST(FtypeMixture, Q2KSNeedsAnImportanceMatrix) {
  TensorPolicy p = mixture("Q2_K_S");
  const std::vector<MixtureTensor> t = llama_tensors(16, false);
  try {
    resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, t);
    ADD_FAILURE();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("would be Q2_K, which llama-quantize's Q2_K_S writes only with an "
                                         "importance matrix"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--calibration"), std::string::npos) << e.what();
  }
  p.pure = true;  // --pure keeps every matrix in Q2_K: refused as well
  EXPECT_THROW(resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, t), ArgumentError);
  p.pure = false;
  p.mixture_types = resolve_mixture(p, {"llama", 16, 0, 8, 2, true}, t);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_v"), {256, 256}, Q::F32), Q::Q4_K) << i;  // GQA 4
    EXPECT_EQ(choose_tensor_type(p, blk(i, "ffn_down"), {256, 256}, Q::F32), i < 2 ? Q::Q4_K : Q::Q2_K) << i;
    EXPECT_EQ(choose_tensor_type(p, blk(i, "attn_output"), {256, 256}, Q::F32), Q::Q2_K) << i;
  }
  // no matrix left in Q2_K (all overridden, or rows of 128 falling back to Q4_0): written without one
  p.tensor_types = {{"blk\\.", Q::Q4_K}};
  EXPECT_NO_THROW(resolve_mixture(p, {"llama", 16, 0, 8, 2, false}, t));
}

TEST(FtypeMixture, NamesAndRefusals) {
  TensorPolicy p;
  set_file_type(p, "q6_k", "--type");
  EXPECT_EQ(p.mixture, nullptr);
  EXPECT_EQ(p.type, Q::Q6_K);
  const std::pair<const char*, uint32_t> files[] = {{"q2_k_m", 10}, {"Q2_K_S", 21}, {"Q3_K_S", 11}, {"q3_k_m", 12},
                                                    {"Q3_K_L", 13}};
  for (const auto& [name, file_type] : files) {
    set_file_type(p, name, "--type");
    ASSERT_NE(p.mixture, nullptr) << name;
    EXPECT_EQ(llama_file_type(p), file_type) << name;
  }
  // llama-quantize's names: Q3_K / Q4_K / Q5_K are its aliases of the _M mixtures, its Q2_K a mixture (our Q2_K_M)
  const std::pair<const char*, const char*> aliases[] = {{"Q2_K", "Q2_K_M"}, {"q3_k", "Q3_K_M"}, {"Q4_K", "Q4_K_M"},
                                                         {"Q5_k", "Q5_K_M"}};
  for (const auto& [alias, mixture] : aliases) {
    set_file_type(p, alias, "--type");
    ASSERT_NE(p.mixture, nullptr) << alias;
    EXPECT_EQ(p.mixture->name, mixture) << alias;
  }
  set_file_type(p, "Q4_K", "--type");
  EXPECT_EQ(llama_file_type(p), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M, as llama-quantize writes for Q4_K
  EXPECT_EQ(p.type, Q::Q4_K);
  try {
    set_file_type(p, "Q4_K_X", "--type");
    ADD_FAILURE();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("or a mixture: Q2_K_M, Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M"),
              std::string::npos)
        << e.what();
  }
  // a mixture's type for a tensor its list did not hold is a bug, said so
  TensorPolicy q = mixture("Q5_K_M");
  EXPECT_THROW(choose_tensor_type(q, blk(0, "ffn_up"), {256, 256}, Q::F32), std::logic_error);
}

}  // namespace
}  // namespace attnzoo
