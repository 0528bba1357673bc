// The GPU runner's host half on every machine: which decoders it takes and refuses by name, the step's metadata
// layout and the attention calls a ragged batch becomes (models/cuda/decoder_cuda_plan.h).
#include "models/cuda/decoder_cuda_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "core/error.h"
#include "layers/gpt_oss_moe.h"
#include "layers/lightning_attention_mixer.h"
#include "layers/scaled_gated_mlp.h"
#include "testing/tiny_decoder.h"
#include "testing/tiny_dense_families.h"
#include "testing/tiny_gpt_oss.h"
#include "testing/tiny_hybrid.h"
#include "testing/tiny_minimax.h"

namespace attnzoo {
namespace {

using testing::DenseFamily;
using testing::ScratchDir;
using testing::TinyDecoder;
using testing::TinyHybrid;
using testing::TinyQwen3Next;

std::unique_ptr<Model> load_cpu(const TinyDecoder& t, const ScratchDir& dir) {
  write_tiny_decoder(dir, t);
  return Model::load(dir.str());
}

std::string refusal(const DecoderParts& parts, DType kv_dtype = DType::bf16) {
  try {
    check_decoder_runs_on_cuda(parts, kv_dtype);
  } catch (const ArgumentError& e) {
    return e.what();
  }
  return "";
}

std::string refusal(const Model& model, DType kv_dtype = DType::bf16) {
  return refusal(dynamic_cast<const DecoderModel&>(model).parts(), kv_dtype);
}

// Why the checkpoint `write` makes of `t` does not run on the GPU ("" when it does).
template <typename Tiny>
std::string refusal_of(void (*write)(const ScratchDir&, const Tiny&), const Tiny& t) {
  ScratchDir dir;
  write(dir, t);
  return refusal(*Model::load(dir.str()));
}

TEST(DecoderCudaPlan, TheLlamaFamilyIsTaken) {
  TinyDecoder qwen3{.architecture = "Qwen3ForCausalLM", .model_type = "qwen3", .qk_norm = true};
  TinyDecoder qwen2{.architecture = "Qwen2ForCausalLM", .model_type = "qwen2", .qkv_bias = true};
  TinyDecoder mistral{.architecture = "MistralForCausalLM", .model_type = "mistral", .dtype = "F32",
                      .extra_config = "\"sliding_window\": 8, "};
  TinyDecoder qwen3_moe{.architecture = "Qwen3MoeForCausalLM", .model_type = "qwen3_moe", .qk_norm = true,
                        .moe_experts = 8, .moe_top_k = 2};
  TinyDecoder glm45{.architecture = "Glm4MoeForCausalLM", .model_type = "glm4_moe", .moe_experts = 8,
                    .deepseek_moe = true};
  TinyDecoder deepseek_v3{.architecture = "DeepseekV3ForCausalLM", .model_type = "deepseek_v3", .moe_experts = 8,
                          .deepseek_moe = true, .mla_kv_lora_rank = 64};
  TinyDecoder deepseek_v2_lite{.architecture = "DeepseekV2ForCausalLM", .model_type = "deepseek_v2",
                               .dtype = "F32",
                               .extra_config = R"("rope_scaling": {"type": "yarn", "factor": 4.0, )"
                                               R"("original_max_position_embeddings": 1024, "mscale": 1.0, )"
                                               R"("mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}, )",
                               .mla_kv_lora_rank = 128, .mla_q_lora_rank = 0};
  for (const TinyDecoder& t : {TinyDecoder{}, qwen3, qwen2, mistral, qwen3_moe, glm45, deepseek_v3, deepseek_v2_lite,
                               testing::tiny_ministral3()}) {
    ScratchDir dir;
    const auto model = load_cpu(t, dir);
    const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
    EXPECT_EQ(refusal(parts), "") << t.architecture;
    if (t.model_type == "ministral3")  // the query temperature is there, not silently dropped by the builder
      EXPECT_EQ(dynamic_cast<const AttentionLayer&>(*parts.blocks->front().mixer).config().temperature_beta, 0.5f);
  }
}

// The block forms beside Llama's, each family's checkpoint loaded by its CPU builder (which must put the feature
// there: the test would pass vacuously otherwise).
// Phi-3 / Phi-3.5 mini's head_dim 96 on the CUDA attention, with full or partial rotary, LongRoPE and Phi-3-mini-4k's
// window; its fused qkv_proj / gate_up_proj are row views the device weights take as separate projections.
TEST(DecoderCudaPlan, Phi3WithHeadDim96IsTaken) {
  const std::string longrope = R"("rope_scaling": {"type": "longrope", "short_factor": [)" + [] {
    std::string f;
    for (int i = 0; i < 48; ++i) f += (i ? ", " : "") + std::to_string(1.0 + 0.05 * i);
    return f;
  }() + R"(], "long_factor": [)" + [] {
    std::string f;
    for (int i = 0; i < 48; ++i) f += (i ? ", " : "") + std::to_string(1.0 + 0.5 * i);
    return f;
  }() + R"(]}, "original_max_position_embeddings": 1024, )";
  for (const TinyDecoder& t : {testing::tiny_phi3(), testing::tiny_phi3(12, R"("partial_rotary_factor": 0.5, )"),
                               testing::tiny_phi3(13, R"("sliding_window": 8, )"), testing::tiny_phi3(14, longrope)}) {
    SCOPED_TRACE(t.extra_config);
    ScratchDir dir;
    const auto model = load_cpu(t, dir);
    const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
    EXPECT_EQ(refusal(parts), "");
    const auto& attn = dynamic_cast<const AttentionLayer&>(*parts.blocks->front().mixer);
    EXPECT_EQ(attn.config().head_dim, 96);
    EXPECT_EQ(attn.rope().rotary_dim(), t.seed == 12 ? 48 : 96);
    EXPECT_EQ(attn.config().window, t.seed == 13 ? 8 : 0);
    EXPECT_EQ(attn.rope().config().type, t.seed == 14 ? "longrope" : "default");
  }
}

// MiniMax-Text-01's lightning attention (device_lightning.h) beside softmax attention, its MoE, and the postnorm
// residuals the runner applies (alpha / beta per kind of sublayer over the normed input).
TEST(DecoderCudaPlan, AMiniMaxWithLightningAttentionAndPostnormBlocksIsTaken) {
  ScratchDir dir;
  write_tiny_minimax(dir);
  const auto model = Model::load(dir.str());
  const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
  EXPECT_EQ(refusal(parts), "");
  const DecoderBlock& b = parts.blocks->front();
  ASSERT_TRUE(dynamic_cast<const LightningAttentionMixer*>(b.mixer.get()));
  EXPECT_TRUE(b.residual_is_normed);
  EXPECT_EQ(b.mixer_alpha, 1.3f);
  EXPECT_EQ(b.ffn_beta, 0.9f);
  EXPECT_TRUE(dynamic_cast<const AttentionLayer*>((*parts.blocks)[1].mixer.get()));

  // Past the chunked simple GLA's staging: head dims up to 128.
  ScratchDir wide_dir;
  write_tiny_minimax(wide_dir, 12, 256);
  const auto wide = Model::load(wide_dir.str());
  EXPECT_EQ(refusal(*wide),
            "device: lightning attention head_dim 256 (the CUDA chunked simple GLA takes up to 128) "
            "(MiniMaxForCausalLM, layer 0) runs on the CPU only so far");
}

TEST(DecoderCudaPlan, TheDenseFamiliesAreTaken) {
  for (DenseFamily f : {DenseFamily::gemma2, DenseFamily::gemma3, DenseFamily::olmo2, DenseFamily::cohere,
                        DenseFamily::granite}) {
    SCOPED_TRACE(testing::dense_family_name(f));
    ScratchDir dir;
    write_tiny_dense_family(dir, f);
    std::unique_ptr<Model> model;
    try {
      model = Model::load(dir.str());
    } catch (const std::exception& e) {
      FAIL() << testing::dense_family_name(f) << ": " << e.what();
    }
    const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
    EXPECT_EQ(refusal(parts), "");
    const DecoderBlock& b = parts.blocks->front();
    const auto& attn = dynamic_cast<const AttentionLayer&>(*b.mixer);
    switch (f) {
      case DenseFamily::gemma2:
        EXPECT_EQ(parts.options->final_logit_softcap, 10.f);
        EXPECT_TRUE(b.post_mixer_norm && b.post_ffn_norm);
        EXPECT_EQ(attn.config().window, 8);
        EXPECT_EQ(dynamic_cast<const GatedMlp&>(*b.ffn).activation(), Activation::gelu_tanh);
        break;
      case DenseFamily::gemma3:
        ASSERT_TRUE(attn.q_norm());
        EXPECT_EQ(attn.q_norm()->dim(), 64);
        EXPECT_NE(attn.rope().config().theta,
                  dynamic_cast<const AttentionLayer&>(*parts.blocks->back().mixer).rope().config().theta);
        break;
      case DenseFamily::olmo2:
        EXPECT_FALSE(b.input_norm);
        EXPECT_FALSE(b.pre_ffn_norm);
        ASSERT_TRUE(attn.q_norm() && attn.k_norm());
        EXPECT_EQ(attn.q_norm()->dim(), 4 * 64);
        EXPECT_EQ(attn.k_norm()->dim(), 2 * 64);
        break;
      case DenseFamily::cohere:
        EXPECT_TRUE(b.parallel);
        EXPECT_TRUE(b.input_norm->mean_centered());
        EXPECT_EQ(parts.options->logits_scale, 0.25f);
        break;
      case DenseFamily::granite:
        EXPECT_EQ(parts.options->residual_scale, 0.22f);
        EXPECT_EQ(parts.options->logits_scale, 0.25f);
        EXPECT_EQ(attn.config().scale, 0.015625f);
        break;
    }
  }
}

// gpt-oss whole: sinks, the sliding then full layer, its MoE (biased router, biased experts, clamped SwiGLU); the
// GPU test's second checkpoint keeps experts 1, 4 and 7 for any normed row by a wide router margin.
TEST(DecoderCudaPlan, GptOssIsTaken) {
  using testing::TinyGptOss;
  for (const TinyGptOss& t : {TinyGptOss{}, TinyGptOss{.dtype = "F32", .experts = 8, .top_k = 3, .swiglu_limit = 0.5f,
                                                       .chosen_bias = 16.f, .seed = 23}}) {
    SCOPED_TRACE(t.dtype);
    ScratchDir dir;
    write_tiny_gpt_oss(dir, t);
    const auto model = Model::load(dir.str());
    const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
    EXPECT_EQ(refusal(parts), "");
    const auto& attn = dynamic_cast<const AttentionLayer&>(*parts.blocks->front().mixer);
    EXPECT_EQ(attn.sinks().size(), 4u);
    EXPECT_EQ(attn.config().window, 8);
    EXPECT_EQ(dynamic_cast<const AttentionLayer&>(*parts.blocks->back().mixer).config().window, 0);
    for (const DecoderBlock& b : *parts.blocks) {
      const auto& moe = dynamic_cast<const GptOssMoe&>(*b.ffn);
      EXPECT_TRUE(moe.router().has_bias());
      EXPECT_TRUE(moe.expert(0).gate.has_bias() && moe.expert(0).up.has_bias() && moe.expert(0).down.has_bias());
      EXPECT_EQ(moe.config().limit, t.swiglu_limit);
      if (t.chosen_bias == 0.f) continue;
      // Rows of unit RMS (what the input norm hands the router, times weights near 1): the kept experts' lowest
      // logit clears the others' highest by far more than bf16 rounding moves a logit.
      const int64_t T = 64, H = moe.hidden(), E = moe.num_experts();
      std::mt19937 rng(5);
      std::normal_distribution<float> normal(0.f, 1.5f);
      std::vector<float> x(size_t(T * H)), logits(size_t(T * E));
      for (float& v : x) v = normal(rng);
      moe.router().forward(x.data(), T, logits.data());
      for (int64_t r = 0; r < T; ++r) {
        float kept = 1e30f, other = -1e30f;
        for (int64_t e = 0; e < E; ++e) {
          const float l = logits[size_t(r * E + e)];
          if (e % 3 == 1) kept = std::min(kept, l);
          else other = std::max(other, l);
        }
        EXPECT_GT(kept - other, 4.f) << "row " << r;
      }
    }
  }
}

TEST(DecoderCudaPlan, ATiedSixteenBitHeadSharesTheEmbeddingsTable) {
  auto shares = [](const TinyDecoder& t) {
    ScratchDir dir;
    const auto model = load_cpu(t, dir);
    const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
    EXPECT_EQ(refusal(parts), "") << t.architecture;
    return head_shares_embedding(parts);
  };
  EXPECT_TRUE(shares(TinyDecoder{.tied = true}));
  EXPECT_FALSE(shares(TinyDecoder{}));                            // its own lm_head.weight
  EXPECT_FALSE(shares(TinyDecoder{.dtype = "F32", .tied = true}));  // an f32 table: the head goes up rounded
}

TEST(DecoderCudaPlan, WhatItDoesNotCoverIsRefusedByName) {
  EXPECT_EQ(refusal_of(testing::write_tiny_decoder, TinyDecoder{.head_dim = 32}),
            "device: head_dim 32 (the CUDA attention takes 64, 96, 128 or 256) (LlamaForCausalLM, layer 0) runs on the "
            "CPU only so far");

  ScratchDir dir;
  const auto model = load_cpu(TinyDecoder{}, dir);
  const DecoderParts parts = dynamic_cast<const DecoderModel&>(*model).parts();
  // Past the routing kernels' limits: a lane per chosen expert.
  EXPECT_EQ(refusal_of(testing::write_tiny_decoder, TinyDecoder{.architecture = "Qwen3MoeForCausalLM",
                                                                .model_type = "qwen3_moe", .moe_experts = 40,
                                                                .moe_top_k = 33}),
            "device: 33 experts per token (the CUDA routing takes 32) (Qwen3MoeForCausalLM, layer 0) runs on the CPU "
            "only so far");

  // MLA past the CUDA MLA decode's latent rank.
  EXPECT_EQ(refusal_of(testing::write_tiny_decoder, TinyDecoder{.architecture = "DeepseekV3ForCausalLM",
                                                                .model_type = "deepseek_v3",
                                                                .mla_kv_lora_rank = 576}),
            "device: kv_lora_rank 576 (the CUDA MLA decode takes up to 512) (DeepseekV3ForCausalLM, layer 0) runs on "
            "the CPU only so far");
  // ... and over an 8-bit latent cache (the softmax attention reads those; the MLA decode does not).
  ScratchDir dir5;
  const auto mla = load_cpu(TinyDecoder{.architecture = "DeepseekV3ForCausalLM", .model_type = "deepseek_v3",
                                        .mla_kv_lora_rank = 64},
                            dir5);
  const DecoderParts mla_parts = dynamic_cast<const DecoderModel&>(*mla).parts();
  EXPECT_EQ(refusal(mla_parts, DType::f16), "");
  EXPECT_NE(refusal(mla_parts, DType::i8).find("latent cache (the CUDA MLA decode reads bf16 / f16 ones) "
                                               "(DeepseekV3ForCausalLM, layer 0)"),
            std::string::npos)
      << refusal(mla_parts, DType::i8);
  EXPECT_EQ(refusal(parts, DType::i8), "");  // Llama's 8-bit cache stays taken

  std::vector<DecoderBlock> empty(1);  // Nemotron-H's layers have one sublayer or the other, never neither
  DecoderParts p = parts;
  p.blocks = &empty;
  EXPECT_EQ(refusal(p), "device: a block without a mixer or a feed-forward (LlamaForCausalLM, layer 0) runs on the "
                        "CPU only so far");
}

TEST(DecoderCudaPlan, Mamba2AndNemotronHAreTaken) {
  // Nemotron-H: Mamba-2 and attention blocks without a feed-forward, relu² MLP blocks without a mixer.
  for (const TinyHybrid& t : {TinyHybrid{}, TinyHybrid{.architecture = "NemotronHForCausalLM", .pattern = "M*-M-"}})
    EXPECT_EQ(refusal_of(testing::write_tiny_hybrid, t), "") << t.architecture;
}

TEST(DecoderCudaPlan, MambaAndFalconMambaAreTaken) {
  for (const char* arch : {"MambaForCausalLM", "FalconMambaForCausalLM"}) {
    EXPECT_EQ(refusal_of(testing::write_tiny_mamba, testing::TinyMamba{.architecture = arch}), "") << arch;
  }
}

TEST(DecoderCudaPlan, AJambaIsTaken) {
  // Mamba-1 and NoPE attention mixers, softmax-routed SparseMoe and dense SwiGLU feed-forwards.
  EXPECT_EQ(refusal_of(testing::write_tiny_jamba, testing::TinyJamba{}), "");
}

TEST(DecoderCudaPlan, AMambaStateWiderThanTheSelectiveScanIsRefusedByName) {
  EXPECT_EQ(refusal_of(testing::write_tiny_mamba, testing::TinyMamba{.state_size = 264}),
            "device: Mamba state size 264 (the CUDA selective scan takes up to 256) (MambaForCausalLM, layer 0) runs "
            "on the CPU only so far");
  // Up to 256 is taken: sixteen entries a lane.
  EXPECT_EQ(refusal_of(testing::write_tiny_mamba, testing::TinyMamba{.state_size = 256}), "");
}

TEST(DecoderCudaPlan, ADenseQwen3NextIsTaken) {
  // Gated DeltaNet layers alone, and beside gated full attention (dense MLPs: the tiny writer has no experts).
  const TinyQwen3Next mixed{.layer_types = {"linear_attention", "full_attention"}};
  for (const TinyQwen3Next& t : {TinyQwen3Next{}, mixed}) {
    EXPECT_EQ(refusal_of(testing::write_tiny_qwen3_next, t), "") << t.layer_types.size();
  }
}

TEST(DecoderCudaPlan, Lfm2IsTaken) {
  EXPECT_EQ(refusal_of(testing::write_tiny_lfm2, testing::TinyLfm2{}), "");
}

TEST(DecoderCudaPlan, AKimiLinearOfKdaLayersIsTaken) {
  // The tiny writer's layers are KDA's (its MLA layers would go to device_mla, as DeepSeek's).
  EXPECT_EQ(refusal_of(testing::write_tiny_kimi_linear, testing::TinyKimiLinear{}), "");
}

TEST(DecoderCudaPlan, AMamba2StateWiderThanTheScansIsRefusedByName) {
  EXPECT_EQ(refusal_of(testing::write_tiny_hybrid, TinyHybrid{.state_size = 264}),
            "device: Mamba-2 state size 264 (the CUDA scans take up to 256) (Mamba2ForCausalLM, layer 0) runs on the "
            "CPU only so far");
}

TEST(DecoderCudaPlan, DecodeStepsArePaddedToTheirBucket) {
  EXPECT_EQ(decode_bucket(1), 1);
  EXPECT_EQ(decode_bucket(3), 4);
  EXPECT_EQ(decode_bucket(33), 64);
  EXPECT_EQ(decode_bucket(64), 64);
  EXPECT_EQ(decode_bucket(65), 128);
  EXPECT_EQ(decode_bucket(130), 192);

  // Three cached sequences, one new token each, two block groups (a window layer's own tables).
  Batch b;
  b.tokens = {7, 8, 9};
  b.positions = {40, 5, 70};
  b.cu_seqlens = {0, 1, 2, 3};
  b.context_lens = {40, 5, 70};
  b.cache_seqlens = {41, 6, 71};
  b.state_slots = {-1, -1, -1};
  b.sequences = {nullptr, nullptr, nullptr};
  b.block_groups.resize(2);
  for (BlockTables& t : b.block_groups) {
    t.max_blocks = 5;
    t.block_tables = {3, 4, 5, -1, -1, 6, -1, -1, -1, -1, 7, 8, 9, 10, 11};
    t.slot_mapping = {72, 101, 187};
  }
  const std::vector<int64_t> all = {0, 1, 2}, last_two = {1, 2}, shuffled = {0, 2, 1};
  EXPECT_TRUE(pads_to_bucket(b, all));
  EXPECT_FALSE(pads_to_bucket(b, last_two));
  EXPECT_FALSE(pads_to_bucket(b, shuffled));
  Batch fresh = b;
  fresh.context_lens[1] = 0;  // a prefill
  EXPECT_FALSE(pads_to_bucket(fresh, all));

  Batch padded;
  pad_decode_batch(b, 4, padded);
  EXPECT_EQ(padded.tokens, (std::vector<int32_t>{7, 8, 9, 0}));
  EXPECT_EQ(padded.positions, (std::vector<int32_t>{40, 5, 70, 0}));
  EXPECT_EQ(padded.cu_seqlens, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(padded.context_lens, (std::vector<int32_t>{40, 5, 70, 1}));
  // The pad has no state slot (the recurrent mixers' in-place decode skips -1), and the padded step packs into the
  // layout of its four sequences.
  EXPECT_EQ(padded.state_slots, (std::vector<int32_t>{-1, -1, -1, -1}));
  const StepLayout layout = plan_step_layout(4, 2, 4);
  std::vector<uint8_t> staging;
  pack_step(padded, layout, staging);
  int32_t pad_slot = 0;
  std::memcpy(&pad_slot, staging.data() + layout.state_slots + 3 * sizeof(int32_t), sizeof(int32_t));
  EXPECT_EQ(pad_slot, -1);
  ASSERT_EQ(padded.block_groups.size(), 2u);
  for (const BlockTables& t : padded.block_groups) {
    EXPECT_EQ(t.slot_mapping, (std::vector<int64_t>{72, 101, 187, -1}));  // the K/V write skips -1
    ASSERT_EQ(t.block_tables.size(), 20u);
    EXPECT_EQ(std::vector<int32_t>(t.block_tables.begin() + 15, t.block_tables.end()),
              (std::vector<int32_t>{0, -1, -1, -1, -1}));
  }
  // One decode call over all four: the pad attends over two keys of block 0.
  const std::vector<AttentionCall> calls = plan_attention_calls(padded.cu_seqlens, padded.context_lens);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].kind, AttentionCall::Kind::decode);
  EXPECT_EQ(calls[0].num_seqs, 4);
  EXPECT_EQ(calls[0].cache_seqlens, (std::vector<int32_t>{41, 6, 71, 2}));
  // Padding again into the same batch reuses it.
  pad_decode_batch(b, 8, padded);
  EXPECT_EQ(padded.num_sequences(), 8);
  EXPECT_EQ(padded.block_groups[0].slot_mapping.size(), 8u);
}

// What a runner computes for a step: padded only with graphs on, only a decode step, only below its bucket.
TEST(DecoderCudaPlan, DecodePaddingPadsOnlyGraphedDecodeSteps) {
  Batch b;
  b.tokens = {7, 8, 9};
  b.positions = {40, 5, 70};
  b.cu_seqlens = {0, 1, 2, 3};
  b.context_lens = {40, 5, 70};
  b.cache_seqlens = {41, 6, 71};
  b.state_slots = {2, 0, 5};
  b.sequences = {nullptr, nullptr, nullptr};
  const std::vector<int64_t> all = {0, 1, 2}, last = {2};
  DecodePadding padding;
  std::span<const int64_t> rows = all;
  EXPECT_EQ(&padding.step(b, rows, false), &b);  // graphs off
  EXPECT_EQ(rows.data(), all.data());
  rows = last;
  EXPECT_EQ(&padding.step(b, rows, true), &b);  // not every token's logits
  EXPECT_EQ(rows.data(), last.data());
  rows = all;
  const Batch& padded = padding.step(b, rows, true);
  EXPECT_NE(&padded, &b);
  EXPECT_EQ(padded.state_slots, (std::vector<int32_t>{2, 0, 5, -1}));
  EXPECT_EQ(std::vector<int64_t>(rows.begin(), rows.end()), (std::vector<int64_t>{0, 1, 2, 3}));
  Batch four = padded;  // already a bucket's size
  std::span<const int64_t> four_rows = rows;
  EXPECT_EQ(&padding.step(four, four_rows, true), &four);
}

TEST(DecoderCudaPlan, AStepsMetadataIsOneAlignedBuffer) {
  const StepLayout l = plan_step_layout(5, 2, 2);
  EXPECT_EQ(l.tokens, 0u);
  EXPECT_EQ(l.positions, 32u);  // 20 bytes of ids, rounded up to 16
  ASSERT_EQ(l.slot_mapping.size(), 2u);
  EXPECT_EQ(l.slot_mapping[0], 64u);
  EXPECT_EQ(l.slot_mapping[1], 112u);  // 40 bytes of slots, rounded up to 48
  EXPECT_EQ(l.state_slots, 160u);
  EXPECT_EQ(l.bytes, 176u);  // 8 bytes of state slots, rounded up to 16

  Batch b;
  b.tokens = {3, 1, 4, 1, 5};
  b.positions = {0, 1, 2, 7, 8};
  b.cu_seqlens = {0, 3, 5};
  b.block_groups.resize(2);
  b.block_groups[0].slot_mapping = {16, 17, 18, 40, 41};
  b.block_groups[1].slot_mapping = {-1, 1, 2, 3, 4};
  b.state_slots = {6, 2};
  std::vector<uint8_t> staging;
  pack_step(b, l, staging);
  ASSERT_EQ(staging.size(), l.bytes);
  EXPECT_EQ(std::memcmp(staging.data() + l.tokens, b.tokens.data(), 20), 0);
  EXPECT_EQ(std::memcmp(staging.data() + l.positions, b.positions.data(), 20), 0);
  EXPECT_EQ(std::memcmp(staging.data() + l.slot_mapping[0], b.block_groups[0].slot_mapping.data(), 40), 0);
  EXPECT_EQ(std::memcmp(staging.data() + l.slot_mapping[1], b.block_groups[1].slot_mapping.data(), 40), 0);
  EXPECT_EQ(std::memcmp(staging.data() + l.state_slots, b.state_slots.data(), 8), 0);
  b.state_slots = {6, 2, 1, 0, 3};  // more sequences than the layout was planned for
  EXPECT_THROW(pack_step(b, l, staging), ArgumentError);
  b.state_slots = {6, 2};
  b.block_groups[1].slot_mapping.pop_back();
  EXPECT_THROW(pack_step(b, l, staging), ArgumentError);
}

TEST(DecoderCudaPlan, ARaggedBatchBecomesPrefillAndDecodeCalls) {
  // fresh 5, fresh 3 | decode 1 (10 cached), decode 1 (7) | 2 new over 4 cached | 19 new over 20 cached | fresh 1
  const std::vector<int32_t> len = {5, 3, 1, 1, 2, 19, 1}, context = {0, 0, 10, 7, 4, 20, 0};
  std::vector<int32_t> cu = {0};
  for (int32_t n : len) cu.push_back(cu.back() + n);
  const std::vector<AttentionCall> calls = plan_attention_calls(cu, context);
  using K = AttentionCall::Kind;
  ASSERT_EQ(calls.size(), 7u);
  EXPECT_EQ(calls[0].kind, K::prefill);
  EXPECT_EQ(calls[0].first_seq, 0);
  EXPECT_EQ(calls[0].num_seqs, 2);
  EXPECT_EQ(calls[0].rows, 8);
  EXPECT_EQ(calls[0].cu_seqlens, (std::vector<int32_t>{0, 5, 8}));
  EXPECT_EQ(calls[1].kind, K::decode);
  EXPECT_EQ(calls[1].first_seq, 2);
  EXPECT_EQ(calls[1].num_seqs, 2);
  EXPECT_EQ(calls[1].first_row, 8);
  EXPECT_EQ(calls[1].tq, 1);
  EXPECT_EQ(calls[1].cache_seqlens, (std::vector<int32_t>{11, 8}));
  EXPECT_EQ(calls[2].first_seq, 4);
  EXPECT_EQ(calls[2].tq, 2);
  EXPECT_EQ(calls[2].first_row, 10);
  EXPECT_EQ(calls[2].cache_seqlens, (std::vector<int32_t>{6}));
  // The long chunk: rounds of 8, 8, 3 queries, each seeing the keys up to its own last query.
  for (int r = 0; r < 3; ++r) {
    const AttentionCall& c = calls[size_t(3 + r)];
    EXPECT_EQ(c.kind, K::decode);
    EXPECT_EQ(c.first_seq, 5);
    EXPECT_EQ(c.num_seqs, 1);
    EXPECT_EQ(c.first_row, 12 + 8 * r);
    EXPECT_EQ(c.tq, r < 2 ? 8 : 3);
    EXPECT_EQ(c.rows, c.tq);
    EXPECT_EQ(c.cache_seqlens, (std::vector<int32_t>{20 + 8 * r + int32_t(c.tq)}));
  }
  EXPECT_EQ(calls[6].kind, K::prefill);
  EXPECT_EQ(calls[6].first_row, 31);
  EXPECT_EQ(calls[6].cu_seqlens, (std::vector<int32_t>{0, 1}));
  int64_t rows = 0;
  for (const AttentionCall& c : calls) rows += c.rows;
  EXPECT_EQ(rows, cu.back());  // every query row in exactly one call
}

TEST(DecoderCudaPlan, FalconH1IsTaken) {
  // Attention beside Mamba-2 (a ParallelMixer) with every muP multiplier, at the tiny and the real state size.
  for (int64_t N : {32, 256})
    EXPECT_EQ(refusal_of(testing::write_tiny_falcon_h1, testing::TinyFalconH1{.state_size = N}), "") << N;
  // A tied head: the logits multiplier stays the epilogue's (it cannot fold into the shared table).
  EXPECT_EQ(refusal_of(testing::write_tiny_falcon_h1, testing::TinyFalconH1{.layers = 1, .tied = true}), "");
  // Each branch goes through its own kind's checks: a state past the CUDA scans' is refused by name.
  EXPECT_EQ(refusal_of(testing::write_tiny_falcon_h1, testing::TinyFalconH1{.layers = 1, .state_size = 288}),
            "device: Mamba-2 state size 288 (the CUDA scans take up to 256) (FalconH1ForCausalLM, layer 0) runs on "
            "the CPU only so far");

  // mlp_bias: a down bias beside the down multiplier (the GPU adds the bias's scaled share after the projection).
  ScratchDir biased;
  write_tiny_falcon_h1(biased, {.layers = 1, .down_bias = true});
  const auto with_bias = Model::load(biased.str());
  const DecoderParts biased_parts = dynamic_cast<const DecoderModel&>(*with_bias).parts();
  EXPECT_EQ(refusal(biased_parts), "");
  const auto& mlp = dynamic_cast<const ScaledGatedMlp&>(*biased_parts.blocks->front().ffn);
  EXPECT_TRUE(mlp.mlp().down_proj().has_bias());
  EXPECT_NE(mlp.down_multiplier(), 1.f);
}

}  // namespace
}  // namespace attnzoo
