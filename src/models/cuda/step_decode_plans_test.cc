// The step's decode plans on the host (step_decode_plans.h): where their metadata goes in the step's one staging
// buffer, and which layers share a plan. Runs without a GPU; the launches are decoder_cuda_runner_test.cc's.
#include "models/cuda/step_decode_plans.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "kernels/softmax/cuda/prefill_launch_plan.h"

namespace attnzoo {
namespace {

PreparedDecodeCuda prepared_with(size_t metadata_bytes, uint8_t first) {
  PreparedDecodeCuda d;
  d.plan.metadata.resize(metadata_bytes);
  std::iota(d.plan.metadata.begin(), d.plan.metadata.end(), first);
  d.plan.device_bytes = metadata_bytes + 64;  // partial results after the metadata
  return d;
}

TEST(StepDecodePlans, MetadataFollowsTheStepsOwnBytesOnSixteenByteBoundaries) {
  StepDecodePlans plans;
  plans.begin(20);  // tokens, positions, slot mappings: 20 bytes
  DecodePlanKey group0, group1, windowed;
  group1.block_group = 1;
  windowed.window = 24;
  plans.add(group0, prepared_with(5, 100));
  plans.add(group1, prepared_with(33, 200));
  ASSERT_NE(plans.find(group0), nullptr);
  ASSERT_NE(plans.find(group1), nullptr);
  EXPECT_EQ(plans.find(windowed), nullptr) << "another window is another plan";
  EXPECT_EQ(plans.find(group0)->meta_at, 32u);
  EXPECT_EQ(plans.find(group1)->meta_at, 48u);  // 32 + 5, rounded up
  EXPECT_EQ(plans.end(), 81u);
  EXPECT_EQ(plans.find(group1)->prepared.partial_bytes(), 64u);

  std::vector<uint8_t> staging(plans.end(), 0);
  plans.pack(staging);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(staging[32 + i], 100 + i);
  for (size_t i = 0; i < 33; ++i) EXPECT_EQ(staging[48 + i], 200 + i);
  EXPECT_EQ(staging[37], 0) << "padding untouched";

  plans.begin(16);  // the next step starts empty
  EXPECT_EQ(plans.find(group0), nullptr);
  EXPECT_EQ(plans.end(), 16u);
}

// device_mla.cc's plans and row indices: after the decode plans, on 256-byte boundaries, packed beside them,
// found on the device at their offset; the MLA plans' signature after the attention plans'; a new step drops
// them and the MLA plans.
TEST(StepDecodePlans, OtherPlansBytesTravelInTheSameCopy) {
  StepDecodePlans plans;
  plans.begin(20);
  plans.add(DecodePlanKey{}, prepared_with(5, 100));
  const std::vector<uint8_t> mla_meta = {1, 2, 3}, rows = {9, 8};
  EXPECT_EQ(plans.add_bytes(mla_meta), 256u);
  EXPECT_EQ(plans.add_bytes(rows), 512u);
  EXPECT_EQ(plans.end(), 514u);
  std::vector<uint8_t> staging(plans.end(), 0);
  plans.pack(staging);
  EXPECT_EQ(staging[32], 100);
  EXPECT_EQ((std::vector<uint8_t>(staging.begin() + 256, staging.begin() + 259)), mla_meta);
  EXPECT_EQ((std::vector<uint8_t>(staging.begin() + 512, staging.end())), rows);
  DeviceWorkspace workspace(Device::cpu());
  plans.bind(staging.data(), workspace);
  EXPECT_EQ(plans.device(512), staging.data() + 512);
  EXPECT_THROW(plans.add_bytes(rows), ArgumentError) << "after the upload";
  std::vector<uint64_t> attention_only, with_mla;
  plans.append_signature(attention_only);
  plans.mla_signature = {7, 8};
  plans.append_signature(with_mla);
  attention_only.insert(attention_only.end(), {7, 8});
  EXPECT_EQ(with_mla, attention_only) << "the MLA plans' part after the attention plans'";
  plans.begin(16);
  EXPECT_EQ(plans.end(), 16u);
  EXPECT_TRUE(plans.mla.empty());
  EXPECT_TRUE(plans.mla_signature.empty());
}

// A layer's q / k / v / out rows [T, heads, D] of its own (each layer's activations at other addresses), and the
// varlen prefill problem of one call over them.
struct LayerRows {
  int64_t T, Hq, Hkv, D;
  std::vector<uint16_t> q, k, v, out;
  LayerRows(int64_t t, int64_t hq, int64_t hkv, int64_t d)
      : T(t), Hq(hq), Hkv(hkv), D(d), q(size_t(t * hq * d)), k(size_t(t * hkv * d)), v(k.size()), out(q.size()) {}
  AttentionProblem problem(const std::vector<int32_t>& cu_seqlens, int64_t window) {
    AttentionOptions opts;
    opts.causal = true;
    opts.window = window;
    auto rows = [&](std::vector<uint16_t>& b, int64_t heads) {
      return TensorView::contiguous(b.data(), DType::bf16, {T, heads, D});
    };
    return make_prefill_problem(rows(q, Hq), rows(k, Hkv), rows(v, Hkv), rows(out, Hq), opts,
                                {cu_seqlens.data(), nullptr, int64_t(cu_seqlens.size()) - 1});
  }
};

// prepare_attention_prefill_cuda's plan made on the host (the sm_80 one), counting how many were made.
int prefill_plans_made = 0;
PreparedPrefillCuda plan_on_host(const AttentionProblem& p) {
  ++prefill_plans_made;
  PreparedPrefillCuda d;
  d.launch = cuda_prefill::plan_prefill_launch(p);
  d.dtype = p.q_dtype, d.D = p.D, d.Hq = p.Hq;
  return d;
}

// A prefill step of five attention layers as the runner prepares it: layers of one shape share one plan, a
// sliding-window layer has its own, both travel in the step's one copy and every layer finds its plan there after
// the upload, with no copy of its own. A layer no one prepared still runs, at one late copy, counted.
TEST(StepDecodePlans, PrefillPlansAreOnePerLayerShapeInTheStepsOneCopy) {
  const std::vector<int32_t> cu = {0, 70, 100};  // two prompts, one varlen call
  std::vector<LayerRows> layers;
  for (int l = 0; l < 4; ++l) layers.emplace_back(100, 4, 2, 64);
  const int64_t windows[4] = {0, 0, 32, 0};  // layer 2 slides
  LayerRows wide(100, 4, 2, 128);             // prepared by no one

  StepDecodePlans plans;
  plans.begin(20);
  plans.add(DecodePlanKey{}, prepared_with(5, 100));  // a decode call of the same step
  prefill_plans_made = 0;
  for (int l = 0; l < 4; ++l) plans.prepare_prefill(1, layers[size_t(l)].problem(cu, windows[l]), plan_on_host);
  EXPECT_EQ(prefill_plans_made, 2) << "one plan for the three full-attention layers, one for the sliding one";
  ASSERT_EQ(plans.prefill_plans(), 2u);

  const StepDecodePlans::PrefillPlan* full = plans.find_prefill(prefill_plan_key(1, layers[0].problem(cu, 0)));
  const StepDecodePlans::PrefillPlan* sliding = plans.find_prefill(prefill_plan_key(1, layers[2].problem(cu, 32)));
  ASSERT_NE(full, nullptr);
  ASSERT_NE(sliding, nullptr);
  EXPECT_NE(full, sliding);
  EXPECT_EQ(plans.find_prefill(prefill_plan_key(0, layers[0].problem(cu, 0))), nullptr) << "another call";
  EXPECT_EQ(full->meta_at, 48u) << "after the decode plan's 5 bytes at 32, on a 16-byte boundary";
  EXPECT_EQ(sliding->meta_at % 16, 0u);
  EXPECT_GE(sliding->meta_at, full->meta_at + full->prepared.launch.metadata.size());
  EXPECT_EQ(plans.end(), sliding->meta_at + sliding->prepared.launch.metadata.size());

  std::vector<uint8_t> staging(plans.end(), 0);
  plans.pack(staging);
  for (const StepDecodePlans::PrefillPlan* p : {full, sliding}) {
    const std::vector<unsigned char>& m = p->prepared.launch.metadata;
    ASSERT_FALSE(m.empty());
    EXPECT_TRUE(std::equal(m.begin(), m.end(), staging.begin() + std::ptrdiff_t(p->meta_at)));
  }
  DeviceWorkspace workspace(Device::cpu());
  plans.bind(staging.data(), workspace);
  EXPECT_THROW(plans.prepare_prefill(1, wide.problem(cu, 0), plan_on_host), ArgumentError) << "after the upload";

  DeviceStep step;
  step.device = Device::cpu();
  step.workspace = &workspace;
  const int64_t late_before = step_plan_late_copies_total();
  for (int l = 0; l < 4; ++l) {
    const StepDecodePlans::PrefillPlan& p = plans.prefill_plan(1, layers[size_t(l)].problem(cu, windows[l]), step,
                                                              plan_on_host);
    EXPECT_EQ(p.metadata, staging.data() + (l == 2 ? sliding : full)->meta_at) << "layer " << l;
  }
  EXPECT_EQ(prefill_plans_made, 2);
  EXPECT_EQ(step_plan_late_copies_total(), late_before) << "no layer copied a plan of its own";

  const StepDecodePlans::PrefillPlan& late = plans.prefill_plan(1, wide.problem(cu, 0), step, plan_on_host);
  EXPECT_EQ(prefill_plans_made, 3);
  EXPECT_EQ(step_plan_late_copies_total(), late_before + 1);
  const std::vector<unsigned char>& m = late.prepared.launch.metadata;
  ASSERT_NE(late.metadata, nullptr);
  EXPECT_TRUE(std::equal(m.begin(), m.end(), late.metadata)) << "copied on its own";
  EXPECT_NE(late.metadata, plans.find(DecodePlanKey{})->partials) << "a workspace slot of its own";

  plans.begin(16);
  EXPECT_EQ(plans.prefill_plans(), 0u);
}

}  // namespace
}  // namespace attnzoo
