#include "core/finite_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(FiniteCheck, FindsNaNAndInfThroughAnyStridesAndNamesTheIndex) {
  std::vector<float> data(2 * 3 * 5, 1.f);
  // A transposed [5, 3, 2] view of the [2, 3, 5] buffer.
  TensorView v;
  v.data = data.data();
  v.ndim = 3;
  v.shape = {5, 3, 2};
  v.strides = {1, 5, 15};
  EXPECT_NO_THROW(require_finite(v, "k"));
  data[1 * 15 + 2 * 5 + 4] = std::nanf("");  // view index [4, 2, 1] -> flat 4*6 + 2*2 + 1 = 29
  try {
    require_finite(v, "k");
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "k: contains NaN or Inf (flat index 29)");
  }
  // A stride-0 broadcast reads the same element for every index.
  std::vector<float> one = {INFINITY};
  TensorView b;
  b.data = one.data();
  b.ndim = 2;
  b.shape = {3, 4};
  b.strides = {0, 0};
  EXPECT_THROW(require_finite(b, "q"), ArgumentError);
  b.shape = {0, 4};
  EXPECT_NO_THROW(require_finite(b, "q"));  // empty: nothing to read
}

}  // namespace
}  // namespace attnzoo
