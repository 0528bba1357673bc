// Reading a buffer as f32: the float types (and the KV cache's int8 / e4m3 codes) widen; an integer dtype is no
// float, so it is refused naming the dtype rather than read as zeros (or left unwritten).
#include "core/convert.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "core/error.h"

namespace attnzoo {
namespace {

std::string dtype_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DTypeError& e) {
    return e.what();
  }
  return "";
}

TEST(Convert, FloatTypesWiden) {
  const uint16_t bf[2] = {f32_to_bf16(1.5f), f32_to_bf16(-2.f)};
  float out[2] = {};
  convert_to_f32(bf, DType::bf16, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.f);
  EXPECT_EQ(load_as_f32(bf, DType::bf16, 1), -2.f);
  const int8_t codes[1] = {-3};
  EXPECT_EQ(load_as_f32(codes, DType::i8, 0), -3.f);
}

TEST(Convert, IntegerDtypesAreRefusedNamingTheDtype) {
  const int64_t ints[2] = {1, 2};
  for (DType t : {DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(dtype_name(t));
    float out[2] = {7.f, 7.f};
    const std::string bulk = dtype_error([&] { convert_to_f32(ints, t, out, 2); });
    EXPECT_NE(bulk.find(std::string("convert_to_f32: ") + dtype_name(t) + " is not a float type"), std::string::npos)
        << bulk;
    const std::string one = dtype_error([&] { load_as_f32(ints, t, 0); });
    EXPECT_NE(one.find(std::string("load_as_f32: ") + dtype_name(t) + " is not a float type"), std::string::npos)
        << one;
  }
}

}  // namespace
}  // namespace attnzoo
