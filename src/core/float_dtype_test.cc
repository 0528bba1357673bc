// The float dtype check the kernel families share: it accepts what the kernels read and names the argument it
// refuses.
#include "core/float_dtype.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(FloatDtype, AcceptsTheFloatTypesAndNamesTheArgument) {
  float data[4] = {};
  TensorView t = TensorView::contiguous(data, DType::f32, {2, 2});
  for (DType ok : {DType::f32, DType::bf16, DType::f16}) {
    t.dtype = ok;
    EXPECT_NO_THROW(require_float_dtype(t, "q"));
  }
  for (DType bad : {DType::i32, DType::i64, DType::u8, DType::i8, DType::f8_e4m3}) {
    t.dtype = bad;
    EXPECT_THROW(require_float_dtype(t, "beta"), DTypeError);
    const std::string want = std::string("beta: expected float32, bfloat16 or float16, got ") + dtype_name(bad);
    testing::expect_refusal([&] { require_float_dtype(t, "beta"); }, want);
  }
  // Only the dtype is read: a view of device memory is accepted (the device paths check it before launching).
  t.dtype = DType::bf16;
  t.device = Device::cuda(0);
  EXPECT_NO_THROW(require_float_dtype(t, "k"));
}

}  // namespace
}  // namespace attnzoo
