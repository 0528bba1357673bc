#include "layers/mla_mixer.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/softmax/decode.h"
#include "kernels/softmax/kv_write.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {
MlaMixer::MlaMixer(const MlaConfig& config, MlaLayerWeights weights, Rope rope, const std::string& name)
    : config_(config), w_(std::move(weights)), rope_(std::move(rope)) {
  const auto& c = config_;
  require(c.hidden > 0 && c.num_heads > 0 && c.kv_lora_rank > 0 && c.qk_nope_head_dim > 0 && c.qk_rope_head_dim > 0 &&
              c.v_head_dim > 0 && c.q_lora_rank >= 0,
          (name + ".config").c_str(), "hidden, heads, kv_lora_rank and head dims must be positive");
  const int64_t qw = c.num_heads * c.qk_head_dim();
  if (c.q_lora_rank > 0) {
    require(w_.q_a_proj && w_.q_b_proj && w_.q_a_norm, (name + ".q_a_proj").c_str(),
            "q_lora_rank is set: q_a_proj, q_a_layernorm and q_b_proj are required");
    w_.q_a_proj->require_shape(c.q_lora_rank, c.hidden, name + ".q_a_proj.weight");
    w_.q_b_proj->require_shape(qw, c.q_lora_rank, name + ".q_b_proj.weight");
    require(w_.q_a_norm->dim() == c.q_lora_rank, (name + ".q_a_layernorm.weight").c_str(),
            "must have q_lora_rank entries");
  } else {
    require(w_.q_proj.has_value(), (name + ".q_proj").c_str(), "required without q_lora_rank");
    w_.q_proj->require_shape(qw, c.hidden, name + ".q_proj.weight");
  }
  w_.kv_a_proj.require_shape(c.latent_dim(), c.hidden, name + ".kv_a_proj_with_mqa.weight");
  require(w_.kv_a_norm.dim() == c.kv_lora_rank, (name + ".kv_a_layernorm.weight").c_str(),
          "must have kv_lora_rank entries");
  w_.kv_b_proj.require_shape(c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank,
               name + ".kv_b_proj.weight");
  require(!w_.kv_b_proj.has_bias(), (name + ".kv_b_proj.bias").c_str(), "is not supported (the kernels absorb kv_b_proj)");
  // The absorbed kernels multiply by kv_b_proj's blocks as a matrix: a block-quantized one is widened once.
  if (w_.kv_b_proj.is_quantized()) w_.kv_b_proj = w_.kv_b_proj.densified();
  w_.o_proj.require_shape(c.hidden, c.num_heads * c.v_head_dim, name + ".o_proj.weight");
  require(rope_.config().head_dim == c.qk_rope_head_dim, "rope", "head_dim must be qk_rope_head_dim");
}

uint64_t MlaMixer::weight_bytes() const {
  uint64_t b = w_.kv_a_proj.weight_bytes() + w_.kv_b_proj.weight_bytes() + w_.o_proj.weight_bytes();
  if (w_.q_proj) b += w_.q_proj->weight_bytes();
  if (w_.q_a_proj) b += w_.q_a_proj->weight_bytes() + w_.q_b_proj->weight_bytes();
  return b;
}

MlaWeights MlaMixer::kernel_weights() const {
  const auto& c = config_;
  MlaWeights mw;
  mw.w_kv_b = w_.kv_b_proj.weight();
  mw.num_heads = c.num_heads;
  mw.qk_nope_head_dim = c.qk_nope_head_dim;
  mw.qk_rope_head_dim = c.qk_rope_head_dim;
  mw.v_head_dim = c.v_head_dim;
  mw.kv_lora_rank = c.kv_lora_rank;
  return mw;
}

void MlaMixer::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim();
  const int64_t dn = c.qk_nope_head_dim, r = c.kv_lora_rank, dv = c.v_head_dim;
  std::vector<float> q(size_t(T * H * Dq)), latent(size_t(T * L)), attn(size_t(T * H * dv));
  // q (or q_a) and kv_a share one quantization (or bf16 rounding) of x and one dispatch: the same bits as one by one.
  if (w_.q_proj) {
    Linear::forward_shared({{&*w_.q_proj, q.data()}, {&w_.kv_a_proj, latent.data()}}, x, T);
  } else {
    std::vector<float> qa(size_t(T * c.q_lora_rank));
    Linear::forward_shared({{&*w_.q_a_proj, qa.data()}, {&w_.kv_a_proj, latent.data()}}, x, T);
    w_.q_a_norm->forward(qa.data(), T, c.q_lora_rank, qa.data(), c.q_lora_rank);
    w_.q_b_proj->forward(qa.data(), T, q.data());
  }
  w_.kv_a_norm.forward(latent.data(), T, L, latent.data(), L);

  // q_pe sits after q_nope inside each head: rotate it as T * H one-head rows, each at its token's position.
  std::vector<int32_t> head_positions(size_t(T * H));
  for (int64_t t = 0; t < T; ++t)
    std::fill_n(head_positions.begin() + t * H, H, batch.positions[size_t(t)]);
  if (c.rope) {
    rope_.apply(q.data() + dn, T * H, 1, Dq, head_positions.data());
    rope_.apply(latent.data() + r, T, 1, L, batch.positions.data());
  }

  MlaOptions opts;
  opts.scale = c.scale;
  opts.causal = true;
  const MlaWeights mw = kernel_weights();
  const BlockTables& tables = batch.tables(memory);
  write_paged_rows(TensorView::contiguous(latent.data(), DType::f32, {T, 1, L}), tables.slot_mapping.data(), memory.k,
                   "latent", "latent_cache", memory.k_scale, "latent_scale");
  // The kernels read the latent cache as [num_blocks, block_size, r + dr]: the pool's single head folded away.
  const TensorView paged = TensorView::contiguous(memory.k.data, memory.k.dtype,
                                                  {memory.k.shape[0], memory.k.shape[1], L});
  const TensorView scale = memory.k_scale.data ? TensorView::contiguous(memory.k_scale.data, DType::f32,
                                                                        {memory.k.shape[0], memory.k.shape[1]})
                                               : TensorView{};
  auto cache_view = [&](const int32_t* cache_seqlens, const int32_t* block_table) {
    LatentCacheView view;
    view.latent = paged;
    view.scale = scale;
    view.cache_seqlens = cache_seqlens;
    view.block_table = block_table;
    view.max_blocks_per_seq = tables.max_blocks;
    return view;
  };
  // Decoding sequences on the absorbed kernel (one task each when the whole batch decodes), ...
  for_each_sequence(batch, kMaxDecodeQueries, [&](int64_t s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0 || n > kMaxDecodeQueries) return;
    mla_decode(TensorView::contiguous(q.data() + b * H * Dq, DType::f32, {1, n, H, Dq}),
               cache_view(batch.cache_seqlens.data() + s, tables.block_table(s)), mw,
               TensorView::contiguous(attn.data() + b * H * dv, DType::f32, {1, n, H, dv}), opts);
  });
  // ... and every prefilling sequence in one packed naive-form call reading the latent through the block tables.
  const PrefillGroup group = prefill_group(batch, kMaxDecodeQueries, tables);
  if (group.num_sequences() > 0) {
    VarlenInfo varlen;
    varlen.cu_seqlens_q = group.cu_seqlens.data();
    varlen.num_seqs = group.num_sequences();
    const int64_t M = group.num_tokens();
    run_packed(group, batch, q.data(), H * Dq, attn.data(), H * dv, [&](float* qp, float* op) {
      mla_prefill(TensorView::contiguous(qp, DType::f32, {M, H, Dq}),
                  cache_view(group.cache_seqlens.data(), group.block_tables.data()), mw,
                  TensorView::contiguous(op, DType::f32, {M, H, dv}), opts, varlen);
    });
  }
  w_.o_proj.forward(attn.data(), T, out);
}

}  // namespace attnzoo
