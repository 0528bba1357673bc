// What a step graph bakes in from an MLA decode plan (models/cuda/mla_step_signature.h): steps that only move
// their sequences' positions within the same launches share a signature (so they replay one graph); a change of
// rows, split, table width or scale makes a new one.
#include "models/cuda/mla_step_signature.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/softmax/mla.h"
#include "kernels/softmax/mla_problem.h"

namespace attnzoo {
namespace {

// A bf16 decode problem at small MLA shapes over a paged latent cache of 16-row blocks, `max_blocks` per row.
struct Decode {
  static constexpr int64_t H = 4, dn = 16, dr = 16, dv = 16, r = 64, block_size = 16, num_blocks = 64;
  std::vector<int32_t> lens, table;
  int64_t max_blocks;
  float scale;
  std::vector<uint16_t> q, out, w, latent;

  Decode(std::vector<int32_t> l, int64_t mb = 16, float s = 0.25f) : lens(std::move(l)), max_blocks(mb), scale(s) {
    const int64_t B = int64_t(lens.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < max_blocks; ++j) table.push_back(int32_t((b * max_blocks + j) % num_blocks));
    q.resize(size_t(B * H * (dn + dr)));
    out.resize(size_t(B * H * dv));
    w.resize(size_t(H * (dn + dv) * r));
    latent.resize(size_t(num_blocks * block_size * (r + dr)));
  }

  cuda_mla::MlaLaunchPlan plan(int64_t slots = 1024, int64_t min_chunk = cuda_mla::kMinChunk) {
    const int64_t B = int64_t(lens.size());
    LatentCacheView cache;
    cache.latent = TensorView::contiguous(latent.data(), DType::bf16, {num_blocks, block_size, 1, r + dr});
    cache.cache_seqlens = lens.data();
    cache.block_table = table.data();
    cache.max_blocks_per_seq = max_blocks;
    MlaOptions opts;
    opts.scale = scale;
    const MlaProblem p = make_mla_cache_problem(
        TensorView::contiguous(q.data(), DType::bf16, {B, 1, H, dn + dr}), cache,
        {TensorView::contiguous(w.data(), DType::bf16, {H * (dn + dv), r}), H, dn, dr, dv, r},
        TensorView::contiguous(out.data(), DType::bf16, {B, 1, H, dv}), opts, {});
    return cuda_mla::plan_mla_decode_launch(p, slots, min_chunk);
  }
};

std::vector<uint64_t> signature(const cuda_mla::MlaLaunchPlan& plan) {
  std::vector<uint64_t> sig;
  append_mla_launch_signature(plan, sig);
  return sig;
}

TEST(MlaStepSignature, StepsThatOnlyGrowTheirContextsShareOne) {
  const std::vector<uint64_t> a = signature(Decode({38, 6, 71, 21}).plan());
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, signature(Decode({39, 7, 72, 22}).plan())) << "one more token each: the same launches";
  EXPECT_EQ(a, signature(Decode({100, 1, 3, 200}).plan())) << "other contexts of the same table width";
}

TEST(MlaStepSignature, LaunchesThatDifferMakeAnotherOne) {
  const std::vector<uint64_t> a = signature(Decode({38, 6, 71, 21}).plan());
  EXPECT_NE(a, signature(Decode({38, 6}).plan())) << "fewer rows: other grids";
  EXPECT_NE(a, signature(Decode({38, 6, 71, 21}, 12).plan())) << "a narrower block table: other offsets";
  EXPECT_NE(a, signature(Decode({38, 6, 71, 21}, 16, 0.5f).plan())) << "the softmax scale is a parameter";
  // Few attention slots and short chunks: a longer context splits into more chunks, merged by more launches.
  Decode shorter({38, 6, 71, 21}), longer({138, 6, 171, 21});
  const cuda_mla::MlaLaunchPlan s = shorter.plan(16, 16), l = longer.plan(16, 16);
  ASSERT_NE(s.work.size(), l.work.size());
  EXPECT_NE(signature(s), signature(l));
}

}  // namespace
}  // namespace attnzoo
