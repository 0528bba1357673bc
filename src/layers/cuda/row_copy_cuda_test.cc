// copy_rows_cuda: its refusals (host-only, run without a GPU), and on a GPU a gather of shuffled rows into a dense
// block and the scatter back into a wider row layout, both exact. The kernel's every access path also runs under
// the emulator (testing/cuda_emulation/row_copy_cases.cc).
#include "layers/cuda/row_copy_cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "layers/cuda/step_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::DeviceOperand;
using testing::expect_error;
using testing::fake_cuda_view;

TEST(RowCopyCuda, RefusesNamingTheArgument) {
  const TensorView a = fake_cuda_view(DType::f32, {4, 96});
  auto refuses = [&](const RowCopy& c) { return [c] { check_copy_rows_cuda(c); }; };
  EXPECT_NO_THROW(check_copy_rows_cuda({a, a, nullptr, nullptr, 4}));
  TensorView host = a;
  host.device = Device::cpu();
  expect_error<ArgumentError>([&] { copy_rows_cuda({host, a, nullptr, nullptr, 4}); }, "src: lives on cpu");
  expect_error<DTypeError>(refuses({a, fake_cuda_view(DType::bf16, {4, 96}), nullptr, nullptr, 4}),
                           "dst: expected float32");
  expect_error<ArgumentError>(refuses({a, fake_cuda_view(DType::f32, {4, 95}), nullptr, nullptr, 4}),
                              "dst: has 95 columns, src 96");
  expect_error<ArgumentError>(refuses({a, a, nullptr, nullptr, 5}), "src: has 4 rows, 5 copied");
  const int32_t* some_index = reinterpret_cast<const int32_t*>(a.data);
  EXPECT_NO_THROW(check_copy_rows_cuda({a, fake_cuda_view(DType::f32, {9, 96}), some_index, nullptr, 9}));
  expect_error<ArgumentError>(refuses({a, a, some_index, nullptr, 6}), "dst: has 4 rows, 6 copied");
  TensorView overlapping = a;
  overlapping.strides[0] = 50;
  expect_error<ArgumentError>(refuses({a, overlapping, nullptr, nullptr, 4}), "dst: rows overlap");
  expect_error<ArgumentError>(refuses({fake_cuda_view(DType::f32, {96}), a, nullptr, nullptr, 1}),
                              "src: expected 2 dims");
}

#if ATTNZOO_WITH_CUDA

TEST(RowCopyCuda, GathersAndScattersSlotsExactly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  // 9 slots of 300 floats at a stride of 304 (a pool slab); a gather of slots {7, 2, 5} into a dense [3, 300]
  // block, then the scatter of that block, plus one, into slots {1, 8, 0}.
  const int64_t slots = 9, cols = 300, stride = 304;
  DeviceOperand slab(DType::f32, {slots, cols}, 1, {stride, 1});
  DeviceOperand dense(DType::f32, {3, cols}, 2);
  const std::vector<int32_t> from = {7, 2, 5}, to = {1, 8, 0};
  DeviceBuffer index(Device::cuda(), 6 * sizeof(int32_t));
  std::vector<int32_t> both = from;
  both.insert(both.end(), to.begin(), to.end());
  index.upload(both.data(), index.bytes());
  copy_rows_cuda({slab.device_view(), dense.device_view(), index.as<int32_t>(), nullptr, 3});
  dense.download();
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_EQ(dense.at(r * cols + j), slab.at(from[size_t(r)] * stride + j)) << "gathered row " << r << " col " << j;

  const std::vector<uint8_t> before = slab.host;
  copy_rows_cuda({dense.device_view(), slab.device_view(), nullptr, index.as<int32_t>() + 3, 3});
  slab.download();
  for (int64_t s = 0; s < slots; ++s) {
    const auto hit = std::find(to.begin(), to.end(), int32_t(s));
    for (int64_t j = 0; j < cols; ++j) {
      const float want = hit == to.end() ? load_as_f32(before.data(), DType::f32, s * stride + j)
                                         : dense.at((hit - to.begin()) * cols + j);
      ASSERT_EQ(slab.at(s * stride + j), want) << "slot " << s << " col " << j;
    }
  }
  EXPECT_TRUE(slab.outside_untouched());
}

#endif

}  // namespace
}  // namespace attnzoo
