#include "models/cuda/device_mla.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/mla.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "models/cuda/mla_rows_plan.h"
#include "models/cuda/mla_step_views.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots: the block's activations between its launches, then the expanded prefill's scratch (the
// gathered latent rows and their expansion, padded K and V, padded Q and output, the row indices); the
// feed-forward's start at 8.
enum Slot : size_t { kQ, kQa, kLatent, kOut, kExpandLatent, kExpandKv, kExpandQo, kExpandRows };

class DeviceMla final : public DeviceMixer {
 public:
  DeviceMla(const MlaMixer& mla, const DeviceLoad& load)
      : config_(mla.config()), act_dtype_(load.act_dtype), kv_a_(mla.weights().kv_a_proj, load),
        kv_a_norm_(mla.weights().kv_a_norm, load.device, load.stream), o_(mla.weights().o_proj, load) {
    const MlaLayerWeights& w = mla.weights();
    if (w.q_proj) {
      q_.emplace(*w.q_proj, load);
    } else {
      q_a_.emplace(*w.q_a_proj, load);
      q_a_norm_.emplace(*w.q_a_norm, load.device, load.stream);
      q_.emplace(*w.q_b_proj, load);
    }
    if (config_.rope) rope_.emplace(mla.rope(), load.device, load.stream);
    // The absorbed decode folds W_UK into the queries and W_UV after the attention, reading kv_b_proj directly.
    const TensorView kv_b = w.kv_b_proj.weight();
    require(kv_b.is_contiguous(), "kv_b_proj.weight", "must be contiguous to go up to the device");
    const size_t bytes = size_t(kv_b.numel()) * dtype_size(kv_b.dtype);
    kv_b_ = DeviceBuffer(load.device, bytes);
    copy_bytes(kv_b_.data(), load.device, kv_b.data, Device::cpu(), bytes, load.stream);
    w_kv_b_ = device_view(load.device, kv_b_.data(), kv_b.dtype, {kv_b.size(0), kv_b.size(1)});
    // Prefill rows expand the latents through the same kv_b_proj with the projections' GEMM (bf16 / f16 weights).
    if (kv_b.dtype == DType::bf16 || kv_b.dtype == DType::f16)
      expand_sizes_ = mla_expand_sizes(config_.num_heads, config_.kv_lora_rank, config_.qk_nope_head_dim,
                                       config_.qk_rope_head_dim, config_.v_head_dim, int64_t(dtype_size(act_dtype_)));
    scale_ = std::isnan(config_.scale) ? 1.f / std::sqrt(float(config_.qk_head_dim())) : config_.scale;
  }

  // Not graph-safe (the default false, said here): mla_decode plans on the host and uploads its plan (the rows'
  // cache lengths and block-table rows among it) per call, so a step that holds MLA layers launches kernel by kernel.
  bool replayable() const override { return false; }

  // h: the block's bf16 normed rows (the projections take them as they are).
  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const MlaConfig& c = config_;
    const int64_t T = step.num_tokens, H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim();
    const int64_t dv = c.v_head_dim;
    const size_t e = dtype_size(act_dtype_);
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;
    auto* q = static_cast<uint8_t*>(ws.get(kQ, size_t(T * H * Dq) * e));
    auto* latent = static_cast<uint8_t*>(ws.get(kLatent, size_t(T * L) * e));
    void* out = ws.get(kOut, size_t(T * H * dv) * e);
    const LayerMemory memory = step.storage->layer(layer);

    const MlaStepViews v = mla_step_views(c, step.device, act_dtype_, T, q, latent, out);
    if (q_a_) {
      void* qa = ws.get(kQa, size_t(T * c.q_lora_rank) * e);
      const TensorView qa2 = step.view(qa, act_dtype_, {T, c.q_lora_rank});
      q_a_->apply(h, qa2, {}, s);
      q_a_norm_->forward(qa2, qa2, s);
      q_->apply(qa2, v.q, {}, s);
    } else {
      q_->apply(h, v.q, {}, s);
    }
    kv_a_.apply(h, v.latent, {}, s);
    kv_a_norm_.forward(v.c_kv, v.c_kv, s);
    if (rope_) rope_->apply(v.q_pe, v.k_pe, step.positions, s);

    const PagedRowsCuda write{v.latent_rows, memory.k, memory.k_scale, "latent", "latent_cache", "latent_scale"};
    check_paged_rows_cuda(write);
    // Unchecked: the slots come from the pool's own bookkeeping (fill_batch_memory), not from a caller.
    write_paged_rows_cuda({&write, 1}, step.slot_mapping(memory.block_group), /*check_slots=*/false, s);

    const BlockTables& tables = step.batch->tables(memory);
    const MlaStepPlan plan = plan_mla_step(step.batch->cu_seqlens, step.batch->cache_seqlens, tables.block_tables,
                                           tables.max_blocks, memory.k.size(1), expand_sizes_);
    absorbed(step, memory, plan, q, out);
    for (const MlaExpandGroup& g : plan.groups) expanded(step, memory, g, v);

    GemmOptions add_into;
    add_into.accumulate = true;
    o_.apply(v.out, x, add_into, s);
  }

 private:
  // The absorbed decode over the plan's absorbed runs: every new token its own decode row over its sequence's
  // blocks, cut at its own position. Host arrays: the kernel uploads its plan (these among it) once per call,
  // stream-ordered.
  void absorbed(const DeviceStep& step, const LayerMemory& memory, const MlaStepPlan& plan, uint8_t* q,
                void* out) const {
    const MlaConfig& c = config_;
    const int64_t H = c.num_heads, Dq = c.qk_head_dim(), dv = c.v_head_dim;
    const size_t e = dtype_size(act_dtype_);
    LatentCacheView cache;
    cache.latent = memory.k;
    cache.scale = memory.k_scale;
    cache.cache_seqlens = plan.rows.cache_seqlens.data();
    cache.block_table = plan.rows.block_table.data();
    cache.max_blocks_per_seq = plan.rows.max_blocks;
    MlaWeights mw;
    mw.w_kv_b = w_kv_b_;
    mw.num_heads = H;
    mw.qk_nope_head_dim = c.qk_nope_head_dim;
    mw.qk_rope_head_dim = c.qk_rope_head_dim;
    mw.v_head_dim = dv;
    mw.kv_lora_rank = c.kv_lora_rank;
    MlaOptions opts;
    opts.scale = c.scale;
    opts.causal = true;
    const int64_t per_call = mla_rows_per_call(H, c.kv_lora_rank, c.qk_rope_head_dim);
    for (const auto& [run_first, run_rows] : plan.absorbed_runs)
      for (int64_t first = run_first; first < run_first + run_rows; first += per_call) {
        const int64_t n = std::min(per_call, run_first + run_rows - first);
        LatentCacheView part = cache;
        part.cache_seqlens += first;
        part.block_table += first * plan.rows.max_blocks;
        mla_decode(step.view(q + size_t(first * H * Dq) * e, act_dtype_, {n, 1, H, Dq}), part, mw,
                   step.view(static_cast<uint8_t*>(out) + size_t(first * H * dv) * e, act_dtype_, {n, 1, H, dv}),
                   opts);
      }
  }

  // One expanded prefill call (mla_rows_plan.h): the group's keys' latent rows gathered from the pool, c_kv
  // through kv_b_proj, K = [k_nope | k_pe | 0] and V = [v | 0] at the padded head dim, Q = [q_nope | q_pe | 0]
  // gathered from the step's rows, the softmax prefill, the output's first dv columns scattered back.
  void expanded(const DeviceStep& step, const LayerMemory& memory, const MlaExpandGroup& g,
                const MlaStepViews& v) const {
    const MlaConfig& c = config_;
    const int64_t D = expand_sizes_.head_dim, n = int64_t(g.q_rows.size()), N = int64_t(g.key_slots.size());
    const DType a = act_dtype_;
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;

    // The row indices, one upload per call (from pageable memory: returns once staged).
    auto* rows = static_cast<int32_t*>(ws.get(kExpandRows, size_t(n + N) * sizeof(int32_t)));
    copy_bytes(rows, step.device, g.q_rows.data(), Device::cpu(), size_t(n) * sizeof(int32_t), s);
    copy_bytes(rows + n, step.device, g.key_slots.data(), Device::cpu(), size_t(N) * sizeof(int32_t), s);
    const int32_t* q_rows = rows;
    const int32_t* key_slots = rows + n;

    const MlaExpandBytes bytes = mla_expand_bytes(c, a, D, N, n);
    const MlaExpandViews x = mla_expand_views(c, memory.k, v, D, N, n, ws.get(kExpandLatent, bytes.latent_kv),
                                              ws.get(kExpandKv, bytes.k_v), ws.get(kExpandQo, bytes.q_o));
    copy_head_rows_cuda({x.pool_rows, x.keys_latent, key_slots, nullptr, N}, s);
    gemm_cuda(x.c_kv, w_kv_b_, nullptr, x.kv, {}, s);
    copy_head_rows_cuda({x.kv_nope, x.k_nope, nullptr, nullptr, N}, s);
    copy_head_rows_cuda({x.k_pe, x.k_rope, nullptr, nullptr, N}, s);  // one head for all, then zeros
    copy_head_rows_cuda({x.kv_v, x.v, nullptr, nullptr, N}, s);
    copy_head_rows_cuda({x.step_q, x.q, q_rows, nullptr, n}, s);
    AttentionOptions opts;
    opts.scale = scale_;
    opts.causal = true;  // bottom-right: a sequence's queries are the last of its keys
    attention_prefill(x.q, x.k, x.v, x.o, opts,
                      {g.cu_seqlens_q.data(), g.cu_seqlens_k.data(), int64_t(g.cu_seqlens_q.size()) - 1});
    copy_head_rows_cuda({x.o_v, x.step_out, nullptr, q_rows, n}, s);
  }

  MlaConfig config_;
  DType act_dtype_;
  std::optional<DeviceLinear> q_, q_a_;  // q_proj, or q_b_proj after q_a_proj
  std::optional<RmsNormCuda> q_a_norm_;
  DeviceLinear kv_a_;
  RmsNormCuda kv_a_norm_;
  DeviceLinear o_;
  std::optional<RopeCuda> rope_;  // empty: a NoPE layer
  DeviceBuffer kv_b_;
  TensorView w_kv_b_;
  MlaExpandSizes expand_sizes_;  // head_dim 0: every row absorbed (kv_b_proj in f32, which the GEMM does not take)
  float scale_ = 0.f;            // the softmax scale, (dn + dr)^-0.5 unless the config sets it: never D's
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_mla(const MlaMixer& mla, const DeviceLoad& load) {
  return std::make_unique<DeviceMla>(mla, load);
}
#endif

}  // namespace attnzoo
