// The step's decode plans on the host (step_decode_plans.h): where their metadata goes in the step's one staging
// buffer, and which layers share a plan. Runs without a GPU; the launches are decoder_cuda_runner_test.cc's.
#include "models/cuda/step_decode_plans.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

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

}  // namespace
}  // namespace attnzoo
