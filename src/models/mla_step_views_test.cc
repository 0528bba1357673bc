// device_mla's tensors (models/cuda/mla_step_views.h) through every launcher's host-side checks, at DeepSeek-V3's,
// DeepSeek-V2-Lite's and the GPU test's tiny shapes: what the GPU would refuse at its first step, refused here.
#include "models/cuda/mla_step_views.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/cuda/mla_decode_cuda.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/mla_problem.h"
#include "kernels/softmax/problem.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "models/cuda/mla_rows_plan.h"

namespace attnzoo {
namespace {

// Host bytes tagged as a GPU's: the checks read shapes, strides, dtypes and devices, never the data.
struct FakeDeviceBytes {
  std::vector<uint8_t> bytes;
  Device device = Device::cuda();
  explicit FakeDeviceBytes(size_t n) : bytes(n + 16) {}
  void* data() { return bytes.data(); }
  TensorView view(DType dtype, std::initializer_list<int64_t> shape) {
    TensorView t = TensorView::contiguous(bytes.data(), dtype, shape);
    t.device = device;
    return t;
  }
};

void check_step(const MlaConfig& c) {
  SCOPED_TRACE("H=" + std::to_string(c.num_heads) + " r=" + std::to_string(c.kv_lora_rank));
  const int64_t T = 37, H = c.num_heads, Dq = c.qk_head_dim(), L = c.latent_dim(), dr = c.qk_rope_head_dim;
  const int64_t r = c.kv_lora_rank, dv = c.v_head_dim, bs = 16, max_blocks = 4, num_blocks = 8;
  const DType dt = DType::bf16;
  FakeDeviceBytes q(size_t(T * H * Dq) * 2), latent(size_t(T * L) * 2), out(size_t(T * H * dv) * 2);
  const MlaStepViews v = mla_step_views(c, Device::cuda(), dt, T, q.data(), latent.data(), out.data());

  // Where the slices sit: q_pe after q_nope in every head, k_pe after c_kv in every latent row.
  EXPECT_EQ(static_cast<uint8_t*>(v.q_pe.data), static_cast<uint8_t*>(q.data()) + c.qk_nope_head_dim * 2);
  EXPECT_EQ(v.q_pe.stride(0), H * Dq);
  EXPECT_EQ(v.q_pe.stride(1), Dq);
  EXPECT_EQ(static_cast<uint8_t*>(v.k_pe.data), static_cast<uint8_t*>(latent.data()) + r * 2);
  EXPECT_EQ(v.k_pe.stride(0), L);
  EXPECT_EQ(v.c_kv.stride(0), L);
  EXPECT_EQ(v.c_kv.size(-1), r);

  FakeDeviceBytes norm_weight(size_t(r) * 4), positions(size_t(T) * 4);
  EXPECT_NO_THROW(check_rms_norm_cuda(v.c_kv, nullptr, norm_weight.view(DType::f32, {r}), v.c_kv, {}));
  RopeConfig rc;
  rc.head_dim = dr;
  rc.layout = RopeLayout::interleaved;
  EXPECT_NO_THROW(check_rope_cuda(Rope(rc), Device::cuda(), v.q_pe, v.k_pe, positions.view(DType::i32, {T})));

  FakeDeviceBytes pool(size_t(num_blocks * bs * L) * 2);
  const TensorView cache = pool.view(dt, {num_blocks, bs, 1, L});
  EXPECT_NO_THROW(check_paged_rows_cuda({v.latent_rows, cache, {}, "latent", "latent_cache", "latent_scale"}));

  // A prefill of 30 tokens and a chunk of 7 after 43 cached: the step's 37 rows.
  const std::vector<int32_t> cu = {0, 30, 37}, cache_seqlens = {30, 50}, tables = {0, 1, -1, -1, 2, 3, 4, 5};
  const MlaRowsPlan rows = plan_mla_rows(cu, cache_seqlens, tables, max_blocks);
  LatentCacheView view;
  view.latent = cache;
  view.cache_seqlens = rows.cache_seqlens.data();
  view.block_table = rows.block_table.data();
  view.max_blocks_per_seq = rows.max_blocks;
  FakeDeviceBytes w(size_t(H * (c.qk_nope_head_dim + dv) * r) * 2);
  const MlaWeights mw{w.view(dt, {H * (c.qk_nope_head_dim + dv), r}), H, c.qk_nope_head_dim, dr, dv, r};
  MlaOptions opts;
  opts.scale = 0.1f;
  EXPECT_NO_THROW({
    const MlaProblem p = make_mla_cache_problem(v.q_heads, view, mw, v.out_heads, opts, {}, /*any_device=*/true);
    EXPECT_EQ(int64_t(p.seqs.size()), T);
    check_cuda_mla_decode(p, /*packed=*/false);
  });

  // The same step split: the 30 fresh rows through the expanded prefill at the padded head dim, the chunk of 7
  // (a verify step's size) left absorbed.
  const MlaExpandSizes sizes = mla_expand_sizes(H, r, c.qk_nope_head_dim, dr, dv, 2);
  const int64_t D = sizes.head_dim;
  ASSERT_GT(D, 0);
  const MlaStepPlan plan = plan_mla_step(cu, cache_seqlens, tables, max_blocks, bs, sizes);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.absorbed_runs, (std::vector<std::pair<int64_t, int64_t>>{{30, 7}}));
  const MlaExpandGroup& g = plan.groups[0];
  const int64_t N = int64_t(g.key_slots.size()), n = int64_t(g.q_rows.size());
  EXPECT_EQ(N, 30);
  EXPECT_EQ(n, 30);
  EXPECT_EQ(g.heads, H);
  // Over every head, and over a middle slice of them as a context past the scratch budget runs.
  for (const auto& [h0, heads] : {std::pair<int64_t, int64_t>{0, H}, {H / 4, std::max<int64_t>(1, H / 4)}}) {
    SCOPED_TRACE("heads " + std::to_string(h0) + " + " + std::to_string(heads));
    const MlaExpandBytes bytes = mla_expand_bytes(c, dt, D, N, n, heads);
    FakeDeviceBytes latent_kv(bytes.latent_kv), k_v(bytes.k_v), q_o(bytes.q_o), indices(size_t(n + N) * 4);
    const MlaExpandViews x =
        mla_expand_views(c, cache, v, mw.w_kv_b, D, N, n, h0, heads, latent_kv.data(), k_v.data(), q_o.data());
    const auto* index = static_cast<const int32_t*>(indices.data());
    for (const HeadRowCopy& copy : {HeadRowCopy{x.pool_rows, x.keys_latent, index, nullptr, N},
                                    HeadRowCopy{x.kv_nope, x.k_nope, nullptr, nullptr, N},
                                    HeadRowCopy{x.k_pe, x.k_rope, nullptr, nullptr, N},
                                    HeadRowCopy{x.kv_v, x.v, nullptr, nullptr, N},
                                    HeadRowCopy{x.step_q, x.q, index, nullptr, n},
                                    HeadRowCopy{x.o_v, x.step_out, nullptr, index, n}})
      EXPECT_NO_THROW(check_head_rows_cuda(copy)) << copy.src.shape_str() << " -> " << copy.dst.shape_str();
    // k_pe lands right after k_nope in every head, and the pool's slots are its rows.
    EXPECT_EQ(static_cast<uint8_t*>(x.k_rope.data), static_cast<uint8_t*>(x.k.data) + c.qk_nope_head_dim * 2);
    EXPECT_EQ(x.pool_rows.size(0), num_blocks * bs);
    EXPECT_EQ(x.pool_rows.stride(0), L);
    EXPECT_EQ(static_cast<uint8_t*>(x.w.data),
              static_cast<uint8_t*>(mw.w_kv_b.data) + h0 * (c.qk_nope_head_dim + dv) * r * 2);
    EXPECT_EQ(static_cast<uint8_t*>(x.step_q.data), static_cast<uint8_t*>(q.data()) + h0 * Dq * 2);
    EXPECT_EQ(x.step_out.stride(0), H * dv);
    EXPECT_NO_THROW({
      const GemmProblem gp = make_gemm_problem(x.c_kv, x.w, nullptr, x.kv, {});
      EXPECT_EQ(gp.K, r);
      EXPECT_EQ(gp.N, heads * (c.qk_nope_head_dim + dv));
      EXPECT_EQ(gp.ldx, L);
    });
    AttentionOptions opts_prefill;
    opts_prefill.scale = 0.1f;
    EXPECT_NO_THROW({
      const AttentionProblem p = make_prefill_problem(
          x.q, x.k, x.v, x.o, opts_prefill, {g.cu_seqlens_q.data(), g.cu_seqlens_k.data(), 1});
      check_cuda_prefill(p);
    });
  }
}

MlaConfig config(int64_t H, int64_t q_lora_rank, int64_t r, int64_t dn, int64_t dr, int64_t dv) {
  MlaConfig c;
  c.hidden = 128, c.num_heads = H, c.q_lora_rank = q_lora_rank, c.kv_lora_rank = r;
  c.qk_nope_head_dim = dn, c.qk_rope_head_dim = dr, c.v_head_dim = dv;
  return c;
}

TEST(MlaStepViews, EveryLauncherTakesThemAtRealShapes) {
  check_step(config(128, 1536, 512, 128, 64, 128));  // DeepSeek-V3 / R1
  check_step(config(16, 0, 512, 128, 64, 128));      // DeepSeek-V2-Lite
  check_step(config(4, 64, 64, 32, 32, 32));         // the GPU test's tiny DeepSeek-V3
  check_step(config(4, 0, 128, 32, 32, 32));         // and its V2-Lite shape
}

}  // namespace
}  // namespace attnzoo
