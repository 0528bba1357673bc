// HostTensor's copies and moves: a copy's view points into the copy's own bytes, so a write through it leaves the
// source alone and the copy outlives the source (under ASan the old aliasing copy reads freed memory here).
#include "testing/test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace attnzoo::testing {
namespace {

TEST(HostTensor, WriteThroughACopyLeavesTheSourceAlone) {
  const HostTensor source(DType::f32, {3, 5}, 7);
  HostTensor copy = source;
  ASSERT_EQ(copy.view.data, copy.bytes.data());
  const float before = source.at(4);
  store_from_f32(copy.view.data, DType::f32, 4, before + 1.f);
  EXPECT_EQ(source.at(4), before);
  EXPECT_EQ(copy.at(4), before + 1.f);
}

TEST(HostTensor, CopyOutlivesItsSource) {
  std::optional<HostTensor> source(std::in_place, DType::bf16, std::vector<int64_t>{4, 6}, 3);
  std::vector<float> want;
  for (int64_t i = 0; i < source->numel(); ++i) want.push_back(source->at(i));
  const HostTensor copy = *source;
  source.reset();
  ASSERT_EQ(copy.view.data, copy.bytes.data());
  ASSERT_EQ(copy.numel(), int64_t(want.size()));
  for (int64_t i = 0; i < copy.numel(); ++i) EXPECT_EQ(copy.at(i), want[size_t(i)]) << i;
}

TEST(HostTensor, CopyAssignmentTakesTheSourcesShapeAndValuesIntoItsOwnBytes) {
  const HostTensor source(DType::f16, {8}, 1);
  HostTensor copy(DType::f16, {2}, 2);
  copy = source;
  ASSERT_EQ(copy.view.data, copy.bytes.data());
  ASSERT_EQ(copy.numel(), 8);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(copy.at(i), source.at(i)) << i;
  const float before = source.at(0);
  store_from_f32(copy.view.data, DType::f16, 0, before + 1.f);
  EXPECT_EQ(source.at(0), before);
}

TEST(HostTensor, CopyKeepsAViewsOffsetIntoTheBytes) {
  HostTensor source(DType::f32, {4}, 5);
  source.view.data = source.bytes.data() + 16;  // a view starting four floats in
  const HostTensor copy = source;
  EXPECT_EQ(copy.view.data, static_cast<const void*>(copy.bytes.data() + 16));
  EXPECT_EQ(copy.at(0), source.at(0));
}

TEST(HostTensor, CopyLeavesAViewOfOtherMemoryWhereItIs) {
  std::vector<float> elsewhere(4, 1.f);
  HostTensor source(DType::f32, {4}, 5);
  source.view.data = elsewhere.data();
  const HostTensor copy = source;
  EXPECT_EQ(copy.view.data, static_cast<void*>(elsewhere.data()));
}

TEST(HostTensor, MoveTakesTheBufferAndEmptiesTheSourcesView) {
  HostTensor source(DType::f32, {6}, 9);
  const void* buffer = source.bytes.data();
  const float first = source.at(0);
  HostTensor moved = std::move(source);
  EXPECT_EQ(moved.view.data, buffer);
  EXPECT_EQ(moved.at(0), first);
  EXPECT_TRUE(source.view.empty());  // NOLINT(bugprone-use-after-move): what a move leaves is the point

  HostTensor target(DType::f32, {1}, 0);
  target = std::move(moved);
  EXPECT_EQ(target.view.data, buffer);
  EXPECT_EQ(target.numel(), 6);
  EXPECT_TRUE(moved.view.empty());  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace attnzoo::testing
