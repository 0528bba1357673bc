#pragma once
// The packing a recurrence's plan must choose (recurrent_split.h), held to the shape by the emulated cases of the
// delta, GLA and RWKV-7 recurrences: every unit in a CTA, none twice.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/linear/common/cuda/recurrent_split.h"

namespace attnzoo::cuda_emulation {

// `l`: a plan for `heads` (sequence, value head) pairs of K x V states, a unit per 32 value columns of each.
template <class RecurrentLaunch>
void expect_recurrent_packing(const RecurrentLaunch& l, int64_t heads, int64_t K, int64_t V) {
  const int64_t units = heads * ((V + 31) / 32), per = cuda_linear::units_per_cta(K);
  EXPECT_EQ(l.params.units, per);
  EXPECT_EQ(l.params.total_units, units);
  EXPECT_EQ(int64_t(l.grid), (units + per - 1) / per);
  EXPECT_EQ(int64_t(l.threads), per * ((K + 31) / 32) * 32);
}

}  // namespace attnzoo::cuda_emulation
