#include "models/cuda/decoder_cuda_plan.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.h"
#include "kernels/softmax/decode.h"
#include "layers/attention_layer.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/deepseek_moe.h"
#include "layers/gpt_oss_moe.h"
#include "layers/mla_mixer.h"
#include "layers/gated_deltanet_mixer.h"
#include "layers/kda_mixer.h"
#include "layers/lightning_attention_mixer.h"
#include "layers/mamba2_mixer.h"
#include "layers/mamba_mixer.h"
#include "layers/mlp.h"
#include "layers/moe.h"
#include "layers/parallel_mixer.h"
#include "layers/scaled_gated_mlp.h"
#include "layers/short_conv_mixer.h"

namespace attnzoo {
namespace {

[[noreturn]] void refuse(const DecoderParts& p, const std::string& feature, const std::string& where = "") {
  throw ArgumentError("device: " + feature + " (" + p.info->architecture + (where.empty() ? "" : ", " + where) +
                      ") runs on the CPU only so far");
}

// Every format the CPU computes with goes up (device_weights.h): dense as bf16 / f16, GGUF blocks as they are or
// expanded to bf16 at load.
void check_projection(const DecoderParts& p, const Linear& l) {
  const QuantType t = l.matrix().type;
  if (!quant_supported(t)) refuse(p, std::string("GGUF ") + quant_type_name(t) + " weights", l.name());
}

// One check per mixer kind that has a CUDA block (device_blocks.h).
void check_attention(const DecoderParts& p, const AttentionLayer& attn, const std::string& where) {
  const AttentionConfig& c = attn.config();
  // Sinks and the query temperature go to the CUDA attention; the output gate's q is strided among its gates, so
  // q / k norms across heads and the temperature (which read whole rows) are refused beside it.
  if (c.output_gate && c.temperature_beta != 0.f)
    refuse(p, "the attention output gate with the query temperature", where);
  if (c.output_gate)
    for (const std::optional<RmsNorm>* n : {&attn.q_norm(), &attn.k_norm()})
      if (*n && (*n)->dim() != c.head_dim) refuse(p, "the attention output gate with q / k norms across heads", where);
  if (c.head_dim != 64 && c.head_dim != 96 && c.head_dim != 128 && c.head_dim != 256)
    refuse(p, "head_dim " + std::to_string(c.head_dim) + " (the CUDA attention takes 64, 96, 128 or 256)", where);
  // q / k norms run per head (Qwen3, Gemma 3) or across all heads' row (OLMo 2), the only widths AttentionLayer
  // takes; sinks go to the CUDA attention with its other options.
  for (const Linear* l : {&attn.q_proj(), &attn.k_proj(), &attn.v_proj(), &attn.o_proj()}) check_projection(p, *l);
}

// MLA (device_mla.h) within the CUDA MLA decode's limits (kernels/softmax/cuda/mla_decode_cuda.h).
void check_mla(const DecoderParts& p, const MlaMixer& mla, DType kv_dtype, const std::string& where) {
  const MlaConfig& c = mla.config();
  if (is_quantized_kv(kv_dtype))
    refuse(p, std::string("a ") + dtype_name(kv_dtype) + " latent cache (the CUDA MLA decode reads bf16 / f16 ones)",
           where);
  auto limit = [&](int64_t value, int64_t most, const char* what) {
    if (value > most)
      refuse(p, std::string(what) + " " + std::to_string(value) + " (the CUDA MLA decode takes up to " +
                    std::to_string(most) + ")", where);
  };
  limit(c.kv_lora_rank, 512, "kv_lora_rank");
  limit(c.qk_nope_head_dim, 512, "qk_nope_head_dim");
  limit(c.qk_rope_head_dim, 128, "qk_rope_head_dim");
  limit(c.num_heads, 65535, "num_heads");
  const MlaLayerWeights& w = mla.weights();
  if (w.kv_a_norm.mean_centered() || (w.q_a_norm && w.q_a_norm->mean_centered()))
    refuse(p, "mean-centred (LayerNorm) norms", where);
  for (const std::optional<Linear>* l : {&w.q_proj, &w.q_a_proj, &w.q_b_proj})
    if (*l) check_projection(p, **l);
  for (const Linear* l : {&w.kv_a_proj, &w.o_proj}) check_projection(p, *l);
}

// device_mamba2.cc: the conv and scans of kernels/linear/mamba2 and short_conv, in place in the pool's slots.
void check_mamba2(const DecoderParts& p, const Mamba2Mixer& m, const std::string& where) {
  const Mamba2MixerConfig& c = m.config();
  if (c.state_size > 256)
    refuse(p, "Mamba-2 state size " + std::to_string(c.state_size) + " (the CUDA scans take up to 256)", where);
  for (const Linear* l : {&m.in_proj(), &m.out_proj()}) check_projection(p, *l);
}

// device_mamba.cc: kernels/linear/mamba's selective scan and decode step, which keep a lane's share of the N state
// entries in registers (up to 256: kMaxN).
void check_mamba(const DecoderParts& p, const MambaMixer& m, const std::string& where) {
  if (m.config().state_size > 256)
    refuse(p, "Mamba state size " + std::to_string(m.config().state_size) + " (the CUDA selective scan takes up to 256)",
           where);
  const MambaMixerWeights& w = m.weights();
  for (const Linear* l : {&w.in_proj, &w.x_proj, &w.dt_proj, &w.out_proj}) check_projection(p, *l);
}

// device_gated_deltanet.cc: the chunked delta rule's CUDA kernels stage K and V <= 128 (Qwen3-Next's 128).
void check_gated_deltanet(const DecoderParts& p, const GatedDeltaNetMixer& m, const std::string& where) {
  const GatedDeltaNetConfig& c = m.config();
  if (c.head_k_dim > 128 || c.head_v_dim > 128)
    refuse(p, "Gated DeltaNet head dims " + std::to_string(c.head_k_dim) + " / " + std::to_string(c.head_v_dim) +
                  " (the CUDA chunked delta rule takes up to 128)",
           where);
  for (const Linear& l : m.in_proj()) check_projection(p, l);
  check_projection(p, m.out_proj());
}

// device_kda.cc: the chunked KDA kernels stage head dims <= 128 (Kimi Linear's 128).
void check_kda(const DecoderParts& p, const KdaMixer& m, const std::string& where) {
  if (m.config().head_dim > 128)
    refuse(p, "KDA head_dim " + std::to_string(m.config().head_dim) + " (the CUDA chunked KDA takes up to 128)", where);
  const KdaWeights& w = m.weights();
  for (const Linear* l : {&w.q_proj, &w.k_proj, &w.v_proj, &w.f_a_proj, &w.f_b_proj, &w.b_proj, &w.g_a_proj,
                          &w.g_b_proj, &w.o_proj})
    check_projection(p, *l);
}

// device_lightning.cc: MiniMax's lightning attention on simple GLA's CUDA kernels, whose chunked form stages head
// dims <= 128 (MiniMax-Text-01's 128).
void check_lightning(const DecoderParts& p, const LightningAttentionMixer& m, const std::string& where) {
  if (m.config().head_dim > 128)
    refuse(p, "lightning attention head_dim " + std::to_string(m.config().head_dim) +
                  " (the CUDA chunked simple GLA takes up to 128)", where);
  const LightningAttentionWeights& w = m.weights();
  for (const Linear* l : {&w.qkv_proj, &w.output_gate, &w.out_proj}) check_projection(p, *l);
}

void check_mixer(const DecoderParts& p, const SequenceMixer& mixer, DType kv_dtype, const std::string& where);

// device_parallel_mixer.cc: each branch as its own kind. The branches read the layer's pool memory from its start,
// so only the first branch with a fixed state may have one (Falcon-H1: attention, then Mamba-2).
void check_parallel(const DecoderParts& p, const ParallelMixer& par, DType kv_dtype, const std::string& where) {
  bool stateful = false;
  for (const ParallelBranch& b : par.branches()) {
    if (dynamic_cast<const ParallelMixer*>(b.mixer.get())) refuse(p, "parallel mixers nested in one", where);
    check_mixer(p, *b.mixer, kv_dtype, where);
    if (b.mixer->cache_spec().state_floats == 0) continue;
    if (stateful) refuse(p, "a parallel mixer with more than one recurrent branch", where);
    stateful = true;
  }
}

void check_mixer(const DecoderParts& p, const SequenceMixer& mixer, DType kv_dtype, const std::string& where) {
  if (const auto* par = dynamic_cast<const ParallelMixer*>(&mixer)) return check_parallel(p, *par, kv_dtype, where);
  if (const auto* attn = dynamic_cast<const AttentionLayer*>(&mixer)) return check_attention(p, *attn, where);
  if (const auto* mla = dynamic_cast<const MlaMixer*>(&mixer)) return check_mla(p, *mla, kv_dtype, where);
  if (const auto* mamba2 = dynamic_cast<const Mamba2Mixer*>(&mixer)) return check_mamba2(p, *mamba2, where);
  if (const auto* mamba = dynamic_cast<const MambaMixer*>(&mixer)) return check_mamba(p, *mamba, where);
  if (const auto* gdn = dynamic_cast<const GatedDeltaNetMixer*>(&mixer)) return check_gated_deltanet(p, *gdn, where);
  if (const auto* kda = dynamic_cast<const KdaMixer*>(&mixer)) return check_kda(p, *kda, where);
  if (const auto* la = dynamic_cast<const LightningAttentionMixer*>(&mixer)) return check_lightning(p, *la, where);
  if (const auto* conv = dynamic_cast<const ShortConvMixer*>(&mixer)) {  // device_short_conv.cc: any width
    for (const Linear* l : {&conv->in_proj(), &conv->out_proj()}) check_projection(p, *l);
    return;
  }
  refuse(p, mixer.kind() + " layers", where);
}

void check_mlp(const DecoderParts& p, const GatedMlp& mlp) {
  for (const Linear* l : {&mlp.gate_proj(), &mlp.up_proj(), &mlp.down_proj()}) check_projection(p, *l);
}

void check_mlp(const DecoderParts& p, const PlainMlp& mlp) {
  for (const Linear* l : {&mlp.up_proj(), &mlp.down_proj()}) check_projection(p, *l);
}

// The routing kernels' limits (routing_cuda.h).
void check_routing(const DecoderParts& p, int64_t E, int64_t top_k, int64_t n_group, const std::string& where) {
  if (E > kMaxExpertsCuda)
    refuse(p, std::to_string(E) + " experts (the CUDA routing takes " + std::to_string(kMaxExpertsCuda) + ")", where);
  if (top_k > kMaxTopKCuda)
    refuse(p, std::to_string(top_k) + " experts per token (the CUDA routing takes " + std::to_string(kMaxTopKCuda) +
                  ")", where);
  if (n_group > kMaxGroupsCuda)
    refuse(p, std::to_string(n_group) + " expert groups (the CUDA routing takes " + std::to_string(kMaxGroupsCuda) +
                  ")", where);
}

// The MoE blocks (device_moe.h): the routing kernels' limits, the experts stacked as one array each (one
// intermediate size and activation; biases, a router's too, added after the products), any weight format (GGUF
// blocks expanded to bf16 at load).
template <class Expert>
void check_moe(const DecoderParts& p, const Linear& router, const std::vector<Expert>& experts, int64_t top_k,
               int64_t n_group, const std::string& where) {
  check_routing(p, int64_t(experts.size()), top_k, n_group, where);
  check_projection(p, router);
  for (const Expert& e : experts) {
    check_mlp(p, e);
    if (e.intermediate() != experts[0].intermediate()) refuse(p, "experts of different sizes", where);
    if (e.activation() != experts[0].activation()) refuse(p, "experts of different activations", where);
  }
}

// gpt-oss's (device_moe.h): its experts are of one shape (GptOssMoe checks it at load), so only the limits remain.
void check_gpt_oss_moe(const DecoderParts& p, const GptOssMoe& moe, const std::string& where) {
  check_routing(p, moe.num_experts(), moe.config().top_k, 1, where);
  check_projection(p, moe.router());
  for (const GptOssExpert& e : moe.experts())
    for (const Linear* l : {&e.gate, &e.up, &e.down}) check_projection(p, *l);
}

template <class Expert>
void check_deepseek_moe(const DecoderParts& p, const BasicDeepseekMoe<Expert>& moe, const std::string& where) {
  check_moe(p, moe.router(), moe.experts(), moe.config().top_k, moe.config().n_group, where);
  if (moe.shared_experts()) check_mlp(p, *moe.shared_experts());
}

void check_ffn(const DecoderParts& p, const FeedForward& ffn, const std::string& where) {
  if (const auto* mlp = dynamic_cast<const GatedMlp*>(&ffn)) return check_mlp(p, *mlp);
  // device_mlp.cc: the down multiplier on the down projection's input, the rest of a down bias's share after it.
  if (const auto* mlp = dynamic_cast<const ScaledGatedMlp*>(&ffn)) return check_mlp(p, mlp->mlp());
  if (const auto* moe = dynamic_cast<const SparseMoe*>(&ffn)) {
    check_moe(p, moe->router(), moe->experts(), moe->config().top_k, 1, where);
    if (moe->shared_expert()) check_mlp(p, *moe->shared_expert());
    if (moe->shared_gate()) check_projection(p, *moe->shared_gate());
    return;
  }
  if (const auto* mlp = dynamic_cast<const PlainMlp*>(&ffn)) {
    for (const Linear* l : {&mlp->up_proj(), &mlp->down_proj()}) check_projection(p, *l);
    return;
  }
  if (const auto* moe = dynamic_cast<const DeepseekMoe*>(&ffn)) return check_deepseek_moe(p, *moe, where);
  if (const auto* moe = dynamic_cast<const NemotronHMoe*>(&ffn)) return check_deepseek_moe(p, *moe, where);
  if (const auto* moe = dynamic_cast<const GptOssMoe*>(&ffn)) return check_gpt_oss_moe(p, *moe, where);
  refuse(p, "feed-forwards other than a gated (muP-scaled too) or plain MLP or a softmax / DeepSeek / gpt-oss MoE",
         where);
}

}  // namespace

void check_decoder_runs_on_cuda(const DecoderParts& p, DType kv_dtype) {
  // Every DecoderOptions multiplier and softcap, mean-centred norms, post-sublayer norms, blocks without an input
  // norm and parallel blocks run as DecoderModel's CPU forward has them (decoder_cuda_runner.cc).
  // Tables the CUDA gather does not read go up expanded to bf16 (make_device_embedding).
  if (!quant_supported(p.embed->matrix().type))
    refuse(p, std::string("a ") + quant_type_name(p.embed->matrix().type) + " embedding table");
  check_projection(p, *p.lm_head);
  for (size_t i = 0; i < p.blocks->size(); ++i) {
    const DecoderBlock& b = (*p.blocks)[i];
    const std::string where = "layer " + std::to_string(i);
    // Postnorm residuals (MiniMax's alpha / beta over the normed input) run in the runner; a parallel block has
    // none on the CPU either.
    if (b.parallel && (b.residual_is_normed || b.mixer_alpha != 1.f || b.mixer_beta != 1.f || b.ffn_alpha != 1.f ||
                       b.ffn_beta != 1.f))
      refuse(p, "a parallel block with postnorm residuals", where);
    if (!b.mixer && !b.ffn) refuse(p, "a block without a mixer or a feed-forward", where);
    if (b.parallel && (!b.mixer || !b.ffn)) refuse(p, "a parallel block without both sublayers", where);
    if (b.mixer) check_mixer(p, *b.mixer, kv_dtype, where);  // none: a feed-forward-only block (Nemotron-H's MLPs)
    if (b.ffn) check_ffn(p, *b.ffn, where);                  // none: Mamba-2's and Nemotron-H's mixer-only blocks
  }
}

bool head_shares_embedding(const DecoderParts& p) {
  const QuantMatrix& table = p.embed->matrix();
  const QuantMatrix& head = p.lm_head->matrix();
  return head.data == table.data && head.type == table.type && head.rows == table.rows && head.cols == table.cols &&
         !p.lm_head->has_bias() && (table.type == QuantType::BF16 || table.type == QuantType::F16) &&
         table.row_bytes == table.cols * 2;
}

StepLayout plan_step_layout(int64_t num_tokens, int64_t block_groups, int64_t num_seqs) {
  auto aligned = [](size_t n) { return (n + 15) / 16 * 16; };
  const size_t T = size_t(num_tokens);
  StepLayout l;
  l.tokens = 0;
  l.positions = aligned(T * sizeof(int32_t));
  size_t at = l.positions + aligned(T * sizeof(int32_t));
  for (int64_t g = 0; g < block_groups; ++g) {
    l.slot_mapping.push_back(at);
    at += aligned(T * sizeof(int64_t));
  }
  l.state_slots = at;
  at += aligned(size_t(num_seqs) * sizeof(int32_t));
  l.bytes = at;
  return l;
}

void pack_step(const Batch& batch, const StepLayout& layout, std::vector<uint8_t>& staging) {
  const size_t T = size_t(batch.num_tokens());
  require(layout.slot_mapping.size() == batch.block_groups.size(), "layout", "needs one slot mapping per block group");
  staging.assign(layout.bytes, 0);
  std::memcpy(staging.data() + layout.tokens, batch.tokens.data(), T * sizeof(int32_t));
  std::memcpy(staging.data() + layout.positions, batch.positions.data(), T * sizeof(int32_t));
  for (size_t g = 0; g < layout.slot_mapping.size(); ++g) {
    const std::vector<int64_t>& slots = batch.block_groups[g].slot_mapping;
    require(slots.size() == T, "slot_mapping", "needs one slot per token");
    std::memcpy(staging.data() + layout.slot_mapping[g], slots.data(), T * sizeof(int64_t));
  }
  require(layout.bytes - layout.state_slots >= batch.state_slots.size() * sizeof(int32_t), "layout",
          "has no room for the batch's state slots");
  std::memcpy(staging.data() + layout.state_slots, batch.state_slots.data(),
              batch.state_slots.size() * sizeof(int32_t));
}

int64_t decode_bucket(int64_t seqs) {
  require(seqs >= 1, "seqs", "a decode step has at least one sequence");
  if (seqs > 64) return (seqs + 63) / 64 * 64;
  int64_t b = 1;
  while (b < seqs) b *= 2;
  return b;
}

bool pads_to_bucket(const Batch& batch, std::span<const int64_t> rows) {
  const int64_t S = batch.num_sequences();
  if (S < 1 || batch.num_tokens() != S || int64_t(rows.size()) != S) return false;
  if (int64_t(batch.context_lens.size()) != S) return false;
  for (int64_t s = 0; s < S; ++s)
    if (batch.context_lens[size_t(s)] <= 0 || rows[size_t(s)] != s) return false;
  return true;
}

void pad_decode_batch(const Batch& batch, int64_t bucket, Batch& padded) {
  const int64_t S = batch.num_sequences(), pads = bucket - S;
  require(batch.num_tokens() == S && pads >= 0, "bucket",
          "must hold the batch's sequences, each of one new token");
  auto grown = [&](auto& dst, const auto& src, auto pad_value) {
    dst.assign(src.begin(), src.end());
    dst.insert(dst.end(), size_t(pads), pad_value);
  };
  grown(padded.tokens, batch.tokens, int32_t(0));
  grown(padded.positions, batch.positions, int32_t(0));
  grown(padded.context_lens, batch.context_lens, int32_t(1));
  grown(padded.cache_seqlens, batch.cache_seqlens, int32_t(2));
  grown(padded.state_slots, batch.state_slots, int32_t(-1));
  grown(padded.sequences, batch.sequences, static_cast<Sequence*>(nullptr));
  padded.cu_seqlens.assign(batch.cu_seqlens.begin(), batch.cu_seqlens.end());
  for (int64_t i = 1; i <= pads; ++i) padded.cu_seqlens.push_back(int32_t(S + i));
  padded.checkpoint_each_token = batch.checkpoint_each_token;
  padded.reuse_cached_prefix = batch.reuse_cached_prefix;
  padded.block_groups.resize(batch.block_groups.size());
  for (size_t g = 0; g < batch.block_groups.size(); ++g) {
    const BlockTables& src = batch.block_groups[g];
    BlockTables& dst = padded.block_groups[g];
    dst.max_blocks = src.max_blocks;
    grown(dst.slot_mapping, src.slot_mapping, int64_t(-1));
    dst.block_tables.assign(src.block_tables.begin(), src.block_tables.end());
    for (int64_t i = 0; i < pads; ++i)
      for (int64_t j = 0; j < src.max_blocks; ++j) dst.block_tables.push_back(j == 0 ? 0 : -1);
  }
}

const Batch& DecodePadding::step(const Batch& requested, std::span<const int64_t>& rows, bool graphs) {
  if (!graphs || !pads_to_bucket(requested, rows)) return requested;
  const int64_t bucket = decode_bucket(requested.num_sequences());
  if (bucket == requested.num_sequences()) return requested;
  pad_decode_batch(requested, bucket, padded_);
  rows_.resize(size_t(bucket));
  std::iota(rows_.begin(), rows_.end(), int64_t(0));
  rows = rows_;
  return padded_;
}

std::vector<AttentionCall> plan_attention_calls(std::span<const int32_t> cu_seqlens,
                                                std::span<const int32_t> context_lens) {
  const int64_t S = int64_t(context_lens.size());
  require(int64_t(cu_seqlens.size()) == S + 1, "cu_seqlens", "needs one entry per sequence and one more");
  std::vector<AttentionCall> calls;
  auto len = [&](int64_t s) { return int64_t(cu_seqlens[size_t(s) + 1]) - cu_seqlens[size_t(s)]; };
  for (int64_t s = 0; s < S;) {
    const int64_t n = len(s), context = context_lens[size_t(s)];
    AttentionCall c;
    c.first_seq = s;
    c.first_row = cu_seqlens[size_t(s)];
    if (context == 0) {  // fresh: this and the following fresh sequences in one varlen prefill
      c.kind = AttentionCall::Kind::prefill;
      c.cu_seqlens.push_back(0);
      for (; s < S && context_lens[size_t(s)] == 0; ++s) c.cu_seqlens.push_back(int32_t(c.cu_seqlens.back() + len(s)));
    } else if (n <= kMaxDecodeQueries) {  // decode: this and the following cached sequences of as many new tokens
      c.kind = AttentionCall::Kind::decode;
      c.tq = n;
      for (; s < S && context_lens[size_t(s)] > 0 && len(s) == n; ++s)
        c.cache_seqlens.push_back(int32_t(context_lens[size_t(s)] + n));
    } else {  // a long chunk after a cached prefix: rounds of kMaxDecodeQueries queries, each causal by its cut
      for (int64_t done = 0; done < n; done += kMaxDecodeQueries) {
        AttentionCall r;
        r.kind = AttentionCall::Kind::decode;
        r.first_seq = s;
        r.num_seqs = 1;
        r.first_row = cu_seqlens[size_t(s)] + done;
        r.tq = std::min(kMaxDecodeQueries, n - done);
        r.rows = r.tq;
        r.cache_seqlens.push_back(int32_t(context + done + r.tq));
        calls.push_back(std::move(r));
      }
      ++s;
      continue;
    }
    c.num_seqs = s - c.first_seq;
    c.rows = cu_seqlens[size_t(s)] - c.first_row;
    calls.push_back(std::move(c));
  }
  return calls;
}

}  // namespace attnzoo
