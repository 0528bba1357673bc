// The Llama family's decoders (dense and MoE: Qwen3-MoE, GLM-4.5 with DeepSeek-V3 routing, gpt-oss), Mamba-2, Nemotron-H,
// dense Qwen3-Next, LFM2, Kimi Linear's KDA layers, DeepSeek-V3 / V2's MLA and the dense families' block forms
// (testing/tiny_dense_families.h: Gemma 2 / 3, OLMo 2, Cohere, Granite; Ministral 3's query temperature; Phi-3's
// head_dim 96) on a GPU against the same checkpoint on the CPU, and tiny GGUF files (Q8_0, Q4_K with expanded
// Q5_0 fallbacks, a tied quantized head): a ragged prefill batch, decode steps of one and of several tokens per sequence, a prompt that
// reuses a cached prefix (its new tokens attend over the paged cache in rounds; a recurrent layer's state comes back
// from its snapshot) and a chunk after it, blocks handed out in shuffled orders on both sides. Logits agree within
// bf16 tolerance and greedy tokens are equal wherever the CPU's margin is not a near-tie. Skipped without a GPU; the
// host half (refusals, plans) is models/decoder_cuda_plan_test.cc and models/decoder_cuda_gguf_test.cc.
#include "models/cuda/decoder_cuda_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "models/cuda/step_decode_plans.h"
#include "models/cuda/step_graphs.h"
#include "models/model.h"
#include "testing/device_test_util.h"
#include "testing/runner_scenario.h"
#include "layers/matmul_precision.h"
#include "testing/tiny_decoder.h"
#include "testing/tiny_dense_families.h"
#include "testing/tiny_gguf.h"
#include "testing/tiny_gpt_oss.h"
#include "testing/tiny_hybrid.h"
#include "testing/tiny_minimax.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyDecoder;
using testing::TinyHybrid;
using testing::argmax_logit;
using testing::expect_close_logits;
using testing::ScenarioSide;

constexpr int64_t V = testing::kTinyDecoderVocab;

// The same cache rounding on both sides.
std::unique_ptr<Model> load(const std::string& path, Device device, uint64_t shuffle_seed) {
  return testing::load_shuffled(path, device, shuffle_seed, DType::bf16);
}

// Every step's attention plans, its prefills' included, went up in the step's one copy: no layer copied a plan of
// its own (step_decode_plans.h), whatever its window, sinks or head dim.
void run_scenario_at(const std::string& path, const std::string& name, uint32_t seed) {
  const int64_t late_copies = step_plan_late_copies_total();
  testing::run_cpu_gpu_scenario(path, name, seed, DType::bf16, 5);
  EXPECT_EQ(step_plan_late_copies_total(), late_copies) << name << ": plans copied outside their step's upload";
}

void run_scenario(const TinyDecoder& t) {
  ScratchDir dir;
  write_tiny_decoder(dir, t);
  run_scenario_at(dir.str(), t.architecture + " " + t.dtype, t.seed);
}

// GGUF blocks: the GPU multiplies f32 / bf16 activations (decode rows through the quantized GEMV, longer steps
// through bf16-expanded panels), so the CPU is held to f32 products (its "auto" would take 8-bit activations,
// ~0.5% per projection, a different rounding than the one under test). The scenario's decode steps (3 and 6 rows)
// take the GEMV, its prefills and chunks the panels, the single-row heads the GEMV and the all-rows ones a panel.
void run_gguf_scenario(const TinyDecoder& t, QuantType type, const TensorPolicy& overrides = {}) {
  const ScopedMatmulPrecision f32_products(MatmulPrecision::highest);
  ScratchDir dir;
  run_scenario_at(testing::write_tiny_gguf(dir, t, type, overrides),
                  std::string("GGUF ") + quant_type_name(type) + (t.tied ? " tied" : ""), t.seed);
}

// A model with a recurrent mixer: its state also goes through the scenario (the prefix reuse restores a snapshot of
// it), and with graphs on, its decode steps run in place in the pool's slots (device_conv_state.h), from graphs
// where their signature recurs, padded from three sequences to four (the pad's state slot -1, which the kernels
// skip). How many replay is HybridGraphReplaysMatchStepsLaunchedOneByOne's to check, over 40 steps.
void run_recurrent_scenario(const ScratchDir& dir, const std::string& name, uint32_t seed) {
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  run_scenario_at(dir.str(), name, seed);
}

// `t` written by `write` (a tiny_hybrid.h writer), its seed also the scenario's.
template <typename Tiny>
void run_recurrent_scenario(const Tiny& t, void (*write)(const ScratchDir&, const Tiny&), const std::string& name) {
  ScratchDir dir;
  write(dir, t);
  run_recurrent_scenario(dir, name, t.seed);
}

void run_scenario(const TinyHybrid& t) {
  run_recurrent_scenario(t, testing::write_tiny_hybrid, t.architecture + " " + t.pattern + " " + t.dtype);
}

TEST(DecoderCudaRunner, LlamaMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{});
}

TEST(DecoderCudaRunner, Qwen3WithQkNormsMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "Qwen3ForCausalLM", .model_type = "qwen3", .qk_norm = true, .seed = 12});
}

TEST(DecoderCudaRunner, AnF32Qwen2WithBiasesAndHeadDim128MatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "Qwen2ForCausalLM", .model_type = "qwen2", .dtype = "F32",
                           .qkv_bias = true, .head_dim = 128, .seed = 13});
}

// bf16 biases on the stacked [q|k|v] projection (added by cuBLASLt where built), and a tied head: the GPU
// multiplies by the embedding's device table rather than a second upload.
TEST(DecoderCudaRunner, ABf16Qwen2WithBiasesAndATiedHeadMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "Qwen2ForCausalLM", .model_type = "qwen2", .qkv_bias = true,
                           .seed = 15, .tied = true});
}

TEST(DecoderCudaRunner, AWindowedMistralMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "MistralForCausalLM", .model_type = "mistral",
                           .extra_config = "\"sliding_window\": 24, ", .seed = 14});
}

// Every projection Q8_0 blocks.
TEST(DecoderCudaRunner, AQ8_0GgufMatchesTheCpu) {
  REQUIRE_GPU();
  run_gguf_scenario(TinyDecoder{.seed = 15}, QuantType::Q8_0);
}

// Q4_K blocks (o, down), Q5_0 expanded to bf16 at load (q / k / v, gate, up: rows of 128), a Q5_0 token table
// (which the gather does not read: expanded too) and a Q8_0 head.
TEST(DecoderCudaRunner, AQ4_KGgufWithExpandedFallbacksMatchesTheCpu) {
  REQUIRE_GPU();
  TensorPolicy q5_table;
  q5_table.token_embedding_type = QuantType::Q5_0;
  run_gguf_scenario(TinyDecoder{.seed = 16}, QuantType::Q4_K, q5_table);
}

// No output.weight: the head multiplies the Q8_0 token table.
TEST(DecoderCudaRunner, ATiedGgufHeadReadsTheQuantizedTable) {
  REQUIRE_GPU();
  run_gguf_scenario(TinyDecoder{.seed = 17, .tied = true}, QuantType::Q8_0);
}

// Mixture-of-experts feed-forwards (device_moe.h): routing, grouping, the grouped GEMMs and the combine on the
// device. Every expert is chosen (top_k = E): the two sides' hidden states differ at bf16's level, so a sparse
// choice at a near-tie could pick another expert on each side and move that row far past the tolerance; with all
// chosen, the weights move only as smoothly as the scores. Sparse loads with idle experts are
// layers/cuda/moe_cuda_test.cc's and the emulator's (moe_cases.cc), over one routing on both sides.
TEST(DecoderCudaRunner, AQwen3MoeMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "Qwen3MoeForCausalLM", .model_type = "qwen3_moe", .qk_norm = true,
                           .seed = 15, .moe_experts = 8, .moe_top_k = 8});
}

TEST(DecoderCudaRunner, AGlm45WithDeepseekRoutingAndASharedExpertMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "Glm4MoeForCausalLM", .model_type = "glm4_moe", .seed = 17,
                           .moe_experts = 8, .moe_top_k = 8, .deepseek_moe = true});
}

// The dense families' block forms (runner: staged sublayer outputs, no-norm copies, the logits epilogue; attention:
// q / k norms across heads).
// gpt-oss: sinks, a sliding layer then a full one, biased q / k / v / o, YaRN, the biased router, fused interleaved
// experts with biases and the clamped SwiGLU. bf16 with every expert chosen (no choice can flip), then f32 (the
// router as f32 dots plus its bias) with 3 of 8 experts kept by a router-bias margin (decoder_cuda_plan_test.cc
// checks it), idle experts between them, and a limit that clamps often.
TEST(DecoderCudaRunner, AGptOssMatchesTheCpu) {
  REQUIRE_GPU();
  for (const testing::TinyGptOss& t :
       {testing::TinyGptOss{}, testing::TinyGptOss{.dtype = "F32", .experts = 8, .top_k = 3, .swiglu_limit = 0.5f,
                                                   .chosen_bias = 16.f, .seed = 23}}) {
    ScratchDir dir;
    write_tiny_gpt_oss(dir, t);
    run_scenario_at(dir.str(), "GptOssForCausalLM " + t.dtype + " top " + std::to_string(t.top_k), t.seed);
  }
}

void run_family_scenario(testing::DenseFamily f, uint32_t seed) {
  ScratchDir dir;
  write_tiny_dense_family(dir, f, seed);
  run_scenario_at(dir.str(), testing::dense_family_name(f), seed);
}

// Sandwich norms of (1 + w) weights, GELU-tanh, a window of 8 on layer 0, attention and final logit softcaps.
TEST(DecoderCudaRunner, AGemma2WithSoftcapsAndSandwichNormsMatchesTheCpu) {
  REQUIRE_GPU();
  run_family_scenario(testing::DenseFamily::gemma2, 21);
}

// Per-head q / k norms, a local RoPE base on the sliding layer and a global one on the full layer.
TEST(DecoderCudaRunner, AGemma3WithLocalAndGlobalLayersMatchesTheCpu) {
  REQUIRE_GPU();
  run_family_scenario(testing::DenseFamily::gemma3, 22);
}

// No input norm, post-sublayer norms, q / k norms over all heads' row.
TEST(DecoderCudaRunner, AnOlmo2MatchesTheCpu) {
  REQUIRE_GPU();
  run_family_scenario(testing::DenseFamily::olmo2, 23);
}

// Parallel blocks over mean-centred LayerNorms, a logits multiplier.
TEST(DecoderCudaRunner, ACohereWithParallelBlocksMatchesTheCpu) {
  REQUIRE_GPU();
  run_family_scenario(testing::DenseFamily::cohere, 24);
}

// Embedding, attention and residual multipliers, logits scaling.
TEST(DecoderCudaRunner, AGraniteWithItsMultipliersMatchesTheCpu) {
  REQUIRE_GPU();
  run_family_scenario(testing::DenseFamily::granite, 25);
}

// Llama 4's query temperature after RoPE (query_temperature_cuda), growing over the scenario's positions.
TEST(DecoderCudaRunner, AMinistral3WithTheQueryTemperatureMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(testing::tiny_ministral3(26));
}

// Phi-3 / Phi-3.5 mini's head_dim 96 (the sm_80 prefill on every GPU, the paged decode's 16-row CTAs), its fused
// qkv_proj / gate_up_proj: full rotary, then partial rotary under Phi-3-mini-4k's window on every layer.
TEST(DecoderCudaRunner, APhi3WithHeadDim96MatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(testing::tiny_phi3(41));
  run_scenario(testing::tiny_phi3(42, R"("partial_rotary_factor": 0.5, "sliding_window": 8, )"));
}

// MiniMax-Text-01: lightning attention (simple GLA with a constant decay per head, its state through the prefix
// reuse's snapshot) beside a softmax layer, a top-2 MoE, postnorm residuals with every alpha / beta away from 1.
TEST(DecoderCudaRunner, AMiniMaxWithLightningAttentionMatchesTheCpu) {
  REQUIRE_GPU();
  ScratchDir dir;
  testing::write_tiny_minimax(dir, 43);
  run_recurrent_scenario(dir, "MiniMaxForCausalLM", 43);
}

// MLA (device_mla.h, mla_rows_plan.h): decode rows are absorbed-decode rows over the paged latent cache; prefill
// sequences of more than 8 new tokens (the ragged prefill, the prefix reuse and the chunk after it; not Tq 3) expand
// their whole context's latents into K / V padded to 64 for the softmax prefill. Every expert chosen in the MoE
// layer, as for GLM-4.5 above, so bf16-level differences cannot flip a near-tied choice.
TEST(DecoderCudaRunner, ADeepseekV3WithQLoraAndAnMoeLayerMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "DeepseekV3ForCausalLM", .model_type = "deepseek_v3", .seed = 18,
                           .moe_experts = 8, .moe_top_k = 8, .deepseek_moe = true, .mla_kv_lora_rank = 64});
}

// Both MLA paths in one step: decode rows absorbed around a fresh prompt expanded, a 300-token prompt (90,000
// row-key pairs the absorbed rows would read one by one), a fresh one-token prompt (absorbed), a prefix-cache hit
// whose new tokens expand the cached context with them, and a step of a 12-token chunk after that context beside
// decode rows of one and of three tokens (a verify step's: absorbed).
TEST(DecoderCudaRunner, ADeepseekV3MixesExpandedPrefillAndAbsorbedDecodeRows) {
  REQUIRE_GPU();
  ScratchDir dir;
  write_tiny_decoder(dir, TinyDecoder{.architecture = "DeepseekV3ForCausalLM", .model_type = "deepseek_v3",
                                      .seed = 23, .mla_kv_lora_rank = 64});
  ScenarioSide cpu{load(dir.str(), Device::cpu(), 3), {}}, gpu{load(dir.str(), Device::cuda(), 5), {}};
  testing::ScenarioTokens ids(23);
  testing::open_sequences({&cpu, &gpu}, 4);
  auto both = [&](const std::vector<std::vector<int32_t>>& step_ids, const std::vector<size_t>& which, bool last,
                  const std::string& what) {
    expect_close_logits(cpu.step(step_ids, which, last), gpu.step(step_ids, which, last), "MLA " + what);
  };
  const std::vector<int32_t> long_prompt = ids(300);
  both({long_prompt, ids(1)}, {0, 1}, false, "a long prompt beside a one-token one");
  both({ids(1), ids(150), ids(1)}, {0, 2, 1}, false, "decode rows around a fresh prompt");
  std::vector<int32_t> shared = long_prompt;
  for (int32_t id : ids(40)) shared.push_back(id);
  both({shared}, {3}, false, "a prefix-cache hit");
  both({ids(1), ids(12), ids(1), ids(3)}, {0, 3, 1, 2}, false, "a chunk after the hit beside decode rows");
  for (int s = 0; s < 3; ++s)
    both({ids(1), ids(1), ids(1), ids(1)}, {0, 1, 2, 3}, false, "decode " + std::to_string(s));
}

// A plain q_proj (DeepSeek-V2-Lite's form) and YaRN, whose mscale the softmax scale carries; f32 weights, so
// kv_b_proj stays f32 on the device and every row takes the absorbed decode (the expansion's GEMM takes bf16 /
// f16 weights).
TEST(DecoderCudaRunner, AnF32DeepseekV2LiteShapeWithYarnMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyDecoder{.architecture = "DeepseekV2ForCausalLM", .model_type = "deepseek_v2", .dtype = "F32",
                           .extra_config = R"("rope_scaling": {"type": "yarn", "factor": 4.0, )"
                                           R"("original_max_position_embeddings": 1024, "mscale": 1.0, )"
                                           R"("mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}, )",
                           .seed = 19, .mla_kv_lora_rank = 128, .mla_q_lora_rank = 0});
}

TEST(DecoderCudaRunner, Mamba2MatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyHybrid{});
}

TEST(DecoderCudaRunner, AnF32Mamba2WithAWideStateMatchesTheCpu) {
  REQUIRE_GPU();
  // N = 160 > 128: the chunked prefill falls back to the recurrent kernel.
  run_scenario(TinyHybrid{.dtype = "F32", .state_size = 160, .seed = 22});
}

TEST(DecoderCudaRunner, NemotronHMatchesTheCpu) {
  REQUIRE_GPU();
  // Mamba-2, NoPE attention and relu² MLP layers, each block with one sublayer.
  run_scenario(TinyHybrid{.architecture = "NemotronHForCausalLM", .pattern = "M*-M-", .seed = 23});
}

TEST(DecoderCudaRunner, MambaMatchesTheCpu) {
  REQUIRE_GPU();
  // The selective scan on prefills and chunks (transposed to its channel-major layout), the decode step on
  // single-token steps.
  run_recurrent_scenario(testing::TinyMamba{}, testing::write_tiny_mamba, "MambaForCausalLM BF16");
}

TEST(DecoderCudaRunner, AnF32FalconMambaWithItsDtBAndCNormsMatchesTheCpu) {
  REQUIRE_GPU();
  // Weightless RMSNorms of dt_low, B and C on column slices of x_proj's rows; N = 64, four entries a lane.
  run_recurrent_scenario(
      testing::TinyMamba{.architecture = "FalconMambaForCausalLM", .dtype = "F32", .state_size = 64, .seed = 24},
      testing::write_tiny_mamba, "FalconMambaForCausalLM F32");
}

TEST(DecoderCudaRunner, AMambaWithAWideStateMatchesTheCpu) {
  REQUIRE_GPU();
  // N = 160 and 256: the selective scan's eight and sixteen entries a lane, in the scan and the decode step.
  for (auto [N, seed] : {std::pair{int64_t(160), 25u}, {int64_t(256), 26u}}) {
    run_recurrent_scenario(testing::TinyMamba{.dtype = "F32", .state_size = N, .seed = seed}, testing::write_tiny_mamba,
                           "MambaForCausalLM F32 N " + std::to_string(N));
  }
}

TEST(DecoderCudaRunner, AJambaMatchesTheCpu) {
  REQUIRE_GPU();
  // Mamba-1 layers with their weighted dt / B / C norms, NoPE attention, a top-2 SparseMoe without renormalised
  // weights and dense SwiGLUs.
  run_recurrent_scenario(testing::TinyJamba{}, testing::write_tiny_jamba, "JambaForCausalLM BF16");
}

TEST(DecoderCudaRunner, AGatedDeltaNetQwen3NextMatchesTheCpu) {
  REQUIRE_GPU();
  // Gated DeltaNet layers and dense SwiGLU MLPs (the tiny writer has no experts).
  run_recurrent_scenario(testing::TinyQwen3Next{}, testing::write_tiny_qwen3_next,
                         "Qwen3NextForCausalLM linear_attention BF16");
}

TEST(DecoderCudaRunner, ADenseQwen3NextWithGatedAttentionMatchesTheCpu) {
  REQUIRE_GPU();
  // Gated DeltaNet, then full attention with q / k norms, partial RoPE and the sigmoid output gate.
  run_recurrent_scenario(testing::TinyQwen3Next{.layer_types = {"linear_attention", "full_attention"}, .seed = 32},
                         testing::write_tiny_qwen3_next, "Qwen3NextForCausalLM linear_attention + full_attention BF16");
}

TEST(DecoderCudaRunner, Lfm2MatchesTheCpu) {
  REQUIRE_GPU();
  // Short-conv and attention (q / k norms) layers, each with a SwiGLU.
  run_recurrent_scenario(testing::TinyLfm2{}, testing::write_tiny_lfm2, "Lfm2ForCausalLM BF16");
}

TEST(DecoderCudaRunner, AKimiLinearOfKdaLayersMatchesTheCpu) {
  REQUIRE_GPU();
  // Kimi Delta Attention layers and dense SwiGLU MLPs (the tiny writer's layers are all KDA).
  run_recurrent_scenario(testing::TinyKimiLinear{}, testing::write_tiny_kimi_linear,
                         "KimiLinearForCausalLM linear_attention BF16");
}

// testing::expect_replays_match_launches over `path` (`t` written as a checkpoint directory or a GGUF file).
void expect_replays_match_launches(const std::string& path, const TinyDecoder& t, const std::string& name) {
  testing::expect_replays_match_launches(path, DType::bf16, t.seed, name);
}

TEST(DecoderCudaRunner, GraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir dir;
  const TinyDecoder t{.architecture = "Qwen3ForCausalLM", .model_type = "qwen3", .qk_norm = true, .seed = 16};
  write_tiny_decoder(dir, t);
  expect_replays_match_launches(dir.str(), t, "Qwen3");
}

// The kinds marked replayable besides attention and the gated MLP: MoE feed-forwards (routing, grouping and the
// grouped GEMMs inside the graph; every expert chosen, as in the scenarios above) and GGUF projections (the
// quantized GEMV: decode steps of up to 8 rows).
TEST(DecoderCudaRunner, MoeAndGgufGraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir moe_dir, gguf_dir;
  const TinyDecoder moe{.architecture = "Glm4MoeForCausalLM", .model_type = "glm4_moe", .seed = 18,
                        .moe_experts = 8, .moe_top_k = 8, .deepseek_moe = true};
  write_tiny_decoder(moe_dir, moe);
  expect_replays_match_launches(moe_dir.str(), moe, "GLM-4.5 MoE");
  const ScopedMatmulPrecision f32_products(MatmulPrecision::highest);  // as run_gguf_scenario
  const TinyDecoder gguf{.seed = 19};
  expect_replays_match_launches(testing::write_tiny_gguf(gguf_dir, gguf, QuantType::Q8_0), gguf, "GGUF Q8_0");
}

// gpt-oss's decode steps replayed: the sinks in the decode plans, the sliding layer's window, the router's bias and
// the experts' bias and SwiGLU launches inside the graph (every expert chosen: no choice to flip).
TEST(DecoderCudaRunner, AGptOssGraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir dir;
  write_tiny_gpt_oss(dir, {.seed = 29});
  expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 29}, "gpt-oss");
}

// MLA's decode steps replayed (device_mla.cc): the step's absorbed-decode plan in the step's copy, its launches in
// the graph, the latent rows written by slot (a pad's -1 skipped: a pad that wrote a real row would show in the
// later steps); DeepSeek-V3's q LoRA and an MoE layer with every expert chosen, as above.
TEST(DecoderCudaRunner, ADeepseekV3GraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir dir;
  const TinyDecoder t{.architecture = "DeepseekV3ForCausalLM", .model_type = "deepseek_v3", .seed = 31,
                      .moe_experts = 8, .moe_top_k = 8, .deepseek_moe = true, .mla_kv_lora_rank = 64};
  write_tiny_decoder(dir, t);
  expect_replays_match_launches(dir.str(), t, "DeepSeek-V3");
}

// The dense families' launches around the blocks inside the graph too: Gemma 2's staged, post-normed sublayer
// outputs and final softcap, OLMo 2's un-normed rows rounded into bf16 and q / k norms across heads.
TEST(DecoderCudaRunner, DenseFamilyGraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  for (auto [f, seed] : {std::pair{testing::DenseFamily::gemma2, 27u}, {testing::DenseFamily::olmo2, 28u}}) {
    ScratchDir dir;
    write_tiny_dense_family(dir, f, seed);
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = seed}, testing::dense_family_name(f));
  }
}

// The recurrent mixers' decode in place in the pool's slots inside graphs, against the same steps launched kernel
// by kernel and the CPU: Gated DeltaNet beside attention (Qwen3-Next), KDA (Kimi Linear), the short conv (LFM2),
// Mamba-2 (Nemotron-H), Mamba-1 with an MoE (Jamba), Falcon-H1's parallel attention + Mamba-2 and MiniMax's
// lightning attention (simple GLA in the pool's slots) beside softmax attention, an MoE and postnorm residuals. The
// three-sequence steps are padded to four on the graphs' side: a pad that wrote any real slot would show in the later
// steps.
TEST(DecoderCudaRunner, HybridGraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  {
    ScratchDir dir;
    write_tiny_qwen3_next(dir, {.layer_types = {"linear_attention", "full_attention"}, .seed = 71});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 71}, "Qwen3-Next");
  }
  {
    ScratchDir dir;
    write_tiny_kimi_linear(dir, {});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 72}, "Kimi Linear");
  }
  {
    ScratchDir dir;
    write_tiny_lfm2(dir, {});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 73}, "LFM2");
  }
  {
    ScratchDir dir;
    write_tiny_hybrid(dir, TinyHybrid{.architecture = "NemotronHForCausalLM", .pattern = "M*-M-", .seed = 74});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 74}, "Nemotron-H");
  }
  {
    ScratchDir dir;
    write_tiny_jamba(dir, {});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 75}, "Jamba");
  }
  {
    ScratchDir dir;
    write_tiny_falcon_h1(dir, {});
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 76}, "Falcon-H1");
  }
  {
    ScratchDir dir;
    testing::write_tiny_minimax(dir, 77);
    expect_replays_match_launches(dir.str(), TinyDecoder{.seed = 77}, "MiniMax");
  }
}

TEST(DecoderCudaRunner, AFalconH1WithItsMultipliersMatchesTheCpu) {
  REQUIRE_GPU();
  // Attention beside Mamba-2 in every layer (device_parallel_mixer), every muP multiplier away from 1, each folded
  // into its projection's bf16 weights at load (device_weight_fold.h).
  ScratchDir dir;
  write_tiny_falcon_h1(dir, {});
  run_recurrent_scenario(dir, "FalconH1ForCausalLM BF16", 61);
}

TEST(DecoderCudaRunner, AFalconH1WithADownBiasBesideItsDownMultiplierMatchesTheCpu) {
  REQUIRE_GPU();
  // mlp_bias: the down multiplier (0.7) scales the bias too, as transformers' down_proj(...) * down_multiplier.
  ScratchDir dir;
  write_tiny_falcon_h1(dir, {.down_bias = true, .seed = 63});
  run_recurrent_scenario(dir, "FalconH1ForCausalLM BF16 mlp_bias", 63);
}

TEST(DecoderCudaRunner, AFalconH1WithATiedHeadMatchesTheCpu) {
  REQUIRE_GPU();
  // The multipliers folded into every projection at load but the head's: the head is the embedding's table, which
  // the gather reads unscaled, so lm_head_multiplier (0.75) stays the logits epilogue's.
  ScratchDir dir;
  write_tiny_falcon_h1(dir, {.seed = 64, .tied = true});
  run_recurrent_scenario(dir, "FalconH1ForCausalLM BF16 tied", 64);
}

TEST(DecoderCudaRunner, AFalconH1WithItsStateSize256MatchesTheCpu) {
  REQUIRE_GPU();
  // Falcon-H1's own N = 256: the chunked prefill falls back to the recurrent kernel.
  ScratchDir dir;
  write_tiny_falcon_h1(dir, {.layers = 1, .state_size = 256, .dtype = "F32", .seed = 62});
  run_recurrent_scenario(dir, "FalconH1ForCausalLM N 256 F32", 62);
}

TEST(DecoderCudaRunner, ArchitecturesItDoesNotCoverAreRefusedByName) {
  REQUIRE_GPU();
  ScratchDir dir;
  write_tiny_decoder(dir, TinyDecoder{.head_dim = 32});
  try {
    load(dir.str(), Device::cuda(), 0);
    FAIL() << "head_dim 32 was taken";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("device: head_dim 32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
