#include "models/cuda/device_mla.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/mla.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "models/cuda/mla_rows_plan.h"
#include "models/cuda/mla_step_views.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots: the block's activations between its launches (the feed-forward's start at 8).
enum Slot : size_t { kQ, kQa, kLatent, kOut };

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
    // kv_b_proj is never a GEMM here: the kernel folds W_UK into the queries and W_UV after the attention.
    const TensorView kv_b = w.kv_b_proj.weight();
    require(kv_b.is_contiguous(), "kv_b_proj.weight", "must be contiguous to go up to the device");
    const size_t bytes = size_t(kv_b.numel()) * dtype_size(kv_b.dtype);
    kv_b_ = DeviceBuffer(load.device, bytes);
    copy_bytes(kv_b_.data(), load.device, kv_b.data, Device::cpu(), bytes, load.stream);
    w_kv_b_ = device_view(load.device, kv_b_.data(), kv_b.dtype, {kv_b.size(0), kv_b.size(1)});
  }

  // Not graph-safe (the default false, said here): mla_decode plans on the host and uploads its plan (the rows'
  // cache lengths and block-table rows among it) per call, so a step that holds MLA layers launches kernel by kernel.
  bool replayable() const override { return false; }

  // h: the block's bf16 normed rows (the projections take them as they are).
  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const MlaConfig& c = config_;
    const int64_t T = step.num_tokens, H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim();
    const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, r = c.kv_lora_rank, dv = c.v_head_dim;
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

    // Every new token is its own decode row over its sequence's blocks, cut at its own position. Host arrays:
    // the kernel uploads its plan (these among it) once per call, stream-ordered.
    const BlockTables& tables = step.batch->tables(memory);
    const MlaRowsPlan rows = plan_mla_rows(step.batch->cu_seqlens, step.batch->cache_seqlens, tables.block_tables,
                                           tables.max_blocks);
    LatentCacheView cache;
    cache.latent = memory.k;
    cache.scale = memory.k_scale;
    cache.cache_seqlens = rows.cache_seqlens.data();
    cache.block_table = rows.block_table.data();
    cache.max_blocks_per_seq = rows.max_blocks;
    MlaWeights mw;
    mw.w_kv_b = w_kv_b_;
    mw.num_heads = H;
    mw.qk_nope_head_dim = dn;
    mw.qk_rope_head_dim = dr;
    mw.v_head_dim = dv;
    mw.kv_lora_rank = r;
    MlaOptions opts;
    opts.scale = c.scale;
    opts.causal = true;
    const int64_t per_call = mla_rows_per_call(H, r, dr);
    for (int64_t first = 0; first < T; first += per_call) {
      const int64_t n = std::min(per_call, T - first);
      LatentCacheView part = cache;
      part.cache_seqlens += first;
      part.block_table += first * rows.max_blocks;
      mla_decode(step.view(q + size_t(first * H * Dq) * e, act_dtype_, {n, 1, H, Dq}), part, mw,
                 step.view(static_cast<uint8_t*>(out) + size_t(first * H * dv) * e, act_dtype_, {n, 1, H, dv}),
                 opts);
    }

    GemmOptions add_into;
    add_into.accumulate = true;
    o_.apply(v.out, x, add_into, s);
  }

 private:
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
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_mla(const MlaMixer& mla, const DeviceLoad& load) {
  return std::make_unique<DeviceMla>(mla, load);
}
#endif

}  // namespace attnzoo
