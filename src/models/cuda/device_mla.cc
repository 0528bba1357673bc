#include "models/cuda/device_mla.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "core/error.h"

#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/mla_decode_cuda.h"
#include "kernels/softmax/mla.h"
#include "kernels/softmax/mla_problem.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "models/cuda/mla_rows_plan.h"
#include "models/cuda/mla_step_signature.h"
#include "models/cuda/mla_step_views.h"
#include "models/cuda/step_decode_plans.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA

// What the step's MLA plan depends on beyond the batch: layers that agree share it.
struct MlaStepKey {
  int64_t block_group = 0, H = 0, dn = 0, dr = 0, dv = 0, r = 0, expand_dim = 0;
  float scale = 0.f;
  DType act = DType::bf16, w = DType::bf16, latent = DType::bf16;
  std::array<int64_t, TensorView::kMaxDims> latent_strides{};
  bool operator==(const MlaStepKey&) const = default;
};

// The step's MLA plan (step_decode_plans.h), made once by the first MLA layer's prepare: the rows' split, each
// absorbed call's prepared decode (metadata in the step's copy), each expanded call's row indices and the
// softmax prefill of each of its head-slice shapes (likewise). Every MLA layer whose key matches only launches.
struct MlaStepShared {
  MlaStepKey key;
  MlaStepPlan plan;
  struct AbsorbedCall {
    int64_t first = 0;  // its first step row
    PreparedMlaDecodeCuda prepared;
    size_t meta_at = 0;
  };
  std::vector<AbsorbedCall> calls;
  size_t scratch_bytes = 0;           // the largest call's: every call and layer reuses one slot
  std::vector<size_t> group_rows_at;  // each expanded group's [q_rows | key_slots]
  struct ExpandedPrefill {
    int64_t heads = 0;  // the slice's: all but a long context's last slice have the group's heads
    PreparedPrefillCuda prepared;
    size_t meta_at = 0;
  };
  std::vector<std::vector<ExpandedPrefill>> group_prefills;  // per group, one per slice shape
};

namespace {

// What the plan's launches bake in, for the step graph's signature (step_graphs.h): each absorbed call's rows,
// kernels, offset in the step's copy and launch plan, the expanded groups' count (none on a decode-only step, the
// only kind replayed) and the scratch slot's size.
void append_mla_step_signature(const MlaStepShared& shared, std::vector<uint64_t>& sig) {
  sig.push_back(shared.calls.size());
  for (const MlaStepShared::AbsorbedCall& c : shared.calls) {
    for (uint64_t v : {uint64_t(c.first), uint64_t(c.meta_at), uint64_t(reinterpret_cast<uintptr_t>(c.prepared.attend)),
                       uint64_t(c.prepared.attend_smem)})
      sig.push_back(v);
    append_mla_launch_signature(c.prepared.plan, sig);
  }
  sig.push_back(shared.plan.groups.size());
  sig.push_back(shared.scratch_bytes);
}

// Workspace slots: the block's activations between its launches, then the expanded prefill's scratch (the
// gathered latent rows and their expansion, padded K and V, padded Q and output) and the absorbed decode's
// (or, planned per layer, the expanded call's row indices); the feed-forward's start at 8.
enum Slot : size_t { kQ, kQa, kLatent, kOut, kExpandLatent, kExpandKv, kExpandQo, kDecodeScratch };

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

  // Graph-safe on decode-only steps, the only ones the runner replays: every launch reads the step's plan (made
  // in prepare, its metadata in the step's copy, what the launches bake in in the signature through
  // StepDecodePlans::append_signature) over fixed buffers, on the step's stream, with no host copy or sync. Those
  // steps have no expanded group (kMlaExpandMinRows is past the decode calls' queries). A pad row of a bucket
  // (pad_decode_batch) writes no latent (slot -1) and reads block 0's first two rows: its output row is never
  // requested, and rows do not mix.
  bool replayable() const override { return true; }

  // The first MLA layer of each shape plans the step for every layer of that shape: the split, the absorbed
  // calls' decode plans, the expanded calls' row indices, all in the step's one copy. (The models the runner
  // covers have one shape.)
  void prepare(const DeviceStep& step, int64_t layer) const override {
    if (!step.decode_plans) return;
    StepDecodePlans& plans = *step.decode_plans;
    const LayerMemory memory = step.storage->layer(layer);
    const MlaStepKey key = step_key(memory);
    if (find_shared(plans, key)) return;
    auto shared = std::make_shared<MlaStepShared>();
    shared->key = key;
    const BlockTables& tables = step.batch->tables(memory);
    shared->plan = plan_mla_step(step.batch->cu_seqlens, step.batch->cache_seqlens, tables.block_tables,
                                 tables.max_blocks, memory.k.size(1), expand_sizes_);
    const DeviceGuard on(step.device);
    for_each_absorbed_call(step, memory, shared->plan, [&](int64_t first, const MlaProblem& p) {
      check_cuda_mla_decode(p, /*packed=*/false);
      MlaStepShared::AbsorbedCall call{first, prepare_mla_decode_cuda(p), 0};
      call.meta_at = plans.add_bytes(call.prepared.plan.metadata);
      shared->scratch_bytes = std::max(shared->scratch_bytes, call.prepared.scratch_bytes());
      shared->calls.push_back(std::move(call));
    });
    const MlaStepViews views = step_views(step);
    for (const MlaExpandGroup& g : shared->plan.groups) {
      std::vector<int32_t> rows = g.q_rows;
      rows.insert(rows.end(), g.key_slots.begin(), g.key_slots.end());
      shared->group_rows_at.push_back(plans.add_bytes(
          {reinterpret_cast<const uint8_t*>(rows.data()), rows.size() * sizeof(int32_t)}));
      // The slices' prefill plans: their problems differ from layer to layer only in the scratch's addresses.
      std::vector<MlaStepShared::ExpandedPrefill> prefills;
      for (int64_t heads : {g.heads, config_.num_heads % g.heads}) {  // the slices', the last one's if shorter
        if (heads == 0) continue;
        const ExpandedCall x = expanded_call(step, memory, g, views, 0, heads);
        MlaStepShared::ExpandedPrefill p{heads, prepare_attention_prefill_cuda(x.problem), 0};
        p.meta_at = plans.add_bytes(p.prepared.launch.metadata);
        prefills.push_back(std::move(p));
      }
      shared->group_prefills.push_back(std::move(prefills));
    }
    append_mla_step_signature(*shared, plans.mla_signature);
    plans.mla.push_back(std::move(shared));
  }

  // h: the block's bf16 normed rows (the projections take them as they are).
  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const MlaConfig& c = config_;
    const int64_t T = step.num_tokens, H = c.num_heads, Dq = c.qk_head_dim();
    const int64_t dv = c.v_head_dim;
    const size_t e = dtype_size(act_dtype_);
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;
    const LayerMemory memory = step.storage->layer(layer);

    const MlaStepViews v = step_views(step);
    auto* q = static_cast<uint8_t*>(v.q.data);
    auto* out = static_cast<uint8_t*>(v.out.data);
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

    const MlaStepShared* shared = step.decode_plans ? find_shared(*step.decode_plans, step_key(memory)) : nullptr;
    if (shared) {
      // The step's plan: launches only.
      auto* scratch = static_cast<unsigned char*>(ws.get(kDecodeScratch, shared->scratch_bytes));
      for (const MlaStepShared::AbsorbedCall& call : shared->calls)
        launch_prepared_mla_decode_cuda(call.prepared, step.decode_plans->device(call.meta_at), scratch,
                                        {q + size_t(call.first * H * Dq) * e, out + size_t(call.first * H * dv) * e,
                                         w_kv_b_.data, memory.k.data},
                                        s);
      for (size_t i = 0; i < shared->plan.groups.size(); ++i)
        expanded(step, memory, shared->plan.groups[i], v,
                 reinterpret_cast<const int32_t*>(step.decode_plans->device(shared->group_rows_at[i])),
                 &shared->group_prefills[i]);
    } else {
      // No step plans (a caller without the runner's prepare): each absorbed call through mla_decode (its plan
      // uploaded per call), each expanded call's row indices uploaded (from pageable memory: the copy returns
      // once staged).
      const DeviceGuard on(step.device);
      const BlockTables& tables = step.batch->tables(memory);
      const MlaStepPlan plan = plan_mla_step(step.batch->cu_seqlens, step.batch->cache_seqlens, tables.block_tables,
                                             tables.max_blocks, memory.k.size(1), expand_sizes_);
      for_each_absorbed_call(step, memory, plan, [&](int64_t, const MlaProblem& p) {
        check_cuda_mla_decode(p, /*packed=*/false);
        mla_decode_cuda(p, s);
      });
      for (const MlaExpandGroup& g : plan.groups) {
        const size_t n = g.q_rows.size(), N = g.key_slots.size();
        auto* rows = static_cast<int32_t*>(ws.get(kDecodeScratch, (n + N) * sizeof(int32_t)));
        copy_bytes(rows, step.device, g.q_rows.data(), Device::cpu(), n * sizeof(int32_t), s);
        copy_bytes(rows + n, step.device, g.key_slots.data(), Device::cpu(), N * sizeof(int32_t), s);
        expanded(step, memory, g, v, rows, nullptr);
      }
    }

    o_.apply_add(v.out, x, s);
  }

 private:
  static const MlaStepShared* find_shared(const StepDecodePlans& plans, const MlaStepKey& key) {
    for (const auto& s : plans.mla)
      if (s->key == key) return s.get();
    return nullptr;
  }

  MlaStepKey step_key(const LayerMemory& memory) const {
    const MlaConfig& c = config_;
    return {memory.block_group, c.num_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim,
            c.kv_lora_rank, expand_sizes_.head_dim, scale_, act_dtype_, w_kv_b_.dtype, memory.k.dtype,
            memory.k.strides};
  }

  // fn(first row, problem) for each absorbed-decode call of `plan`: the runs' rows in calls of at most
  // mla_rows_per_call rows, each row a decode row over its sequence's blocks cut at its own position, over this
  // layer's tensors in the step's scratch, validated as mla_decode validates.
  template <class Fn>
  void for_each_absorbed_call(const DeviceStep& step, const LayerMemory& memory, const MlaStepPlan& plan,
                              Fn&& fn) const {
    const MlaConfig& c = config_;
    const int64_t T = step.num_tokens, H = c.num_heads, Dq = c.qk_head_dim(), dv = c.v_head_dim;
    const size_t e = dtype_size(act_dtype_);
    auto* q = static_cast<uint8_t*>(step.workspace->get(kQ, size_t(T * H * Dq) * e));
    auto* out = static_cast<uint8_t*>(step.workspace->get(kOut, size_t(T * H * dv) * e));
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
        const MlaProblem p = make_mla_cache_problem(
            step.view(q + size_t(first * H * Dq) * e, act_dtype_, {n, 1, H, Dq}), part, mw,
            step.view(out + size_t(first * H * dv) * e, act_dtype_, {n, 1, H, dv}), opts, {}, /*any_device=*/true);
        fn(first, p);
      }
  }

  // The step's q / latent / output rows in the workspace, as every MLA layer in turn lays them out.
  MlaStepViews step_views(const DeviceStep& step) const {
    const MlaConfig& c = config_;
    const int64_t T = step.num_tokens, H = c.num_heads;
    const size_t e = dtype_size(act_dtype_);
    DeviceWorkspace& ws = *step.workspace;
    void* q = ws.get(kQ, size_t(T * H * c.qk_head_dim()) * e);
    void* latent = ws.get(kLatent, size_t(T * c.latent_dim()) * e);
    void* out = ws.get(kOut, size_t(T * H * c.v_head_dim) * e);
    return mla_step_views(c, step.device, act_dtype_, T, q, latent, out);
  }

  // Heads [h0, h0 + heads) of an expanded call over the group's scratch (sized for g.heads heads), and their
  // softmax prefill, checked as attention_prefill checks it: bottom-right causal, a sequence's queries the last of
  // its keys.
  struct ExpandedCall {
    MlaExpandViews x;
    AttentionProblem problem;
  };
  ExpandedCall expanded_call(const DeviceStep& step, const LayerMemory& memory, const MlaExpandGroup& g,
                             const MlaStepViews& v, int64_t h0, int64_t heads) const {
    const MlaConfig& c = config_;
    const int64_t D = expand_sizes_.head_dim, n = int64_t(g.q_rows.size()), N = int64_t(g.key_slots.size());
    DeviceWorkspace& ws = *step.workspace;
    const MlaExpandBytes bytes = mla_expand_bytes(c, act_dtype_, D, N, n, g.heads);
    ExpandedCall call{mla_expand_views(c, memory.k, v, w_kv_b_, D, N, n, h0, heads, ws.get(kExpandLatent, bytes.latent_kv),
                                       ws.get(kExpandKv, bytes.k_v), ws.get(kExpandQo, bytes.q_o)),
                      {}};
    AttentionOptions opts;
    opts.scale = scale_;
    opts.causal = true;
    const VarlenInfo varlen{g.cu_seqlens_q.data(), g.cu_seqlens_k.data(), int64_t(g.cu_seqlens_q.size()) - 1};
    call.problem = make_prefill_problem(call.x.q, call.x.k, call.x.v, call.x.o, opts, varlen);
    check_cuda_prefill(call.problem);
    return call;
  }

  // One expanded prefill call (mla_rows_plan.h): the group's keys' latent rows gathered from the pool once, then
  // per slice of g.heads heads (all of them but for a context too long for the scratch) c_kv through the slice's
  // rows of kv_b_proj, K = [k_nope | k_pe | 0] and V = [v | 0] at the padded head dim, Q = [q_nope | q_pe | 0]
  // gathered from the step's rows, the softmax prefill, the output's first dv columns scattered back. `rows`: the
  // group's [q_rows | key_slots] on the device; `prefills`: the step's plans of the slices' prefills (their
  // metadata in the step's copy), or none: each slice's prefill uploads its own.
  void expanded(const DeviceStep& step, const LayerMemory& memory, const MlaExpandGroup& g, const MlaStepViews& v,
                const int32_t* rows, const std::vector<MlaStepShared::ExpandedPrefill>* prefills) const {
    const int64_t H = config_.num_heads, hg = g.heads;
    const int64_t n = int64_t(g.q_rows.size()), N = int64_t(g.key_slots.size());
    const Stream s = step.stream;
    const int32_t* q_rows = rows;
    const int32_t* key_slots = rows + n;
    for (int64_t h0 = 0; h0 < H; h0 += hg) {
      const int64_t heads = std::min(hg, H - h0);
      const ExpandedCall call = expanded_call(step, memory, g, v, h0, heads);
      const MlaExpandViews& x = call.x;
      if (h0 == 0) copy_head_rows_cuda({x.pool_rows, x.keys_latent, key_slots, nullptr, N}, s);  // every slice's
      gemm_cuda(x.c_kv, x.w, nullptr, x.kv, {}, s);
      copy_head_rows_cuda({x.kv_nope, x.k_nope, nullptr, nullptr, N}, s);
      copy_head_rows_cuda({x.k_pe, x.k_rope, nullptr, nullptr, N}, s);  // one head for all, then zeros
      copy_head_rows_cuda({x.kv_v, x.v, nullptr, nullptr, N}, s);
      copy_head_rows_cuda({x.step_q, x.q, q_rows, nullptr, n}, s);
      prefill(step, call.problem, heads, prefills);
      copy_head_rows_cuda({x.o_v, x.step_out, nullptr, q_rows, n}, s);
    }
  }

  void prefill(const DeviceStep& step, const AttentionProblem& p, int64_t heads,
               const std::vector<MlaStepShared::ExpandedPrefill>* prefills) const {
    if (prefills)
      for (const MlaStepShared::ExpandedPrefill& e : *prefills)
        if (e.heads == heads)
          return launch_prepared_prefill_cuda(e.prepared, step.decode_plans->device(e.meta_at), {p.q, p.k, p.v, p.o},
                                              step.stream);
    attention_prefill(p);  // on the current stream, the step's
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
