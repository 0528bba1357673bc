#pragma once
// The GPU tests of the decode steps on states in a pool (ssm_state_indices, conv_state_indices,
// state_batch_indices: the GPU runner's in-place decode): a host slab of `slots` rows, each lead + elems + trail
// random floats (a pool slot's [conv tail | state] and more), the batch's dense states placed in the rows its index
// names (-1: a pad), and the checks after the step: the named rows' new states against the reference's, every other
// float of the slab bit-identical, the real rows' outputs within tolerance, the pads' still NaN bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "testing/test_util.h"

namespace attnzoo::testing {

struct PoolSlots {
  std::vector<int32_t> index;  // sequence n's row, or -1
  int64_t slots, lead, elems, trail;
  HostTensor slab, before;

  PoolSlots(std::vector<int32_t> index_, int64_t slots_, int64_t lead_, int64_t elems_, int64_t trail_, uint64_t seed)
      : index(std::move(index_)), slots(slots_), lead(lead_), elems(elems_), trail(trail_),
        slab(DType::f32, {slots_ * (lead_ + elems_ + trail_)}, seed), before(slab) {}

  int64_t stride() const { return lead + elems + trail; }
  int64_t count() const { return int64_t(index.size()); }
  // Row n of `dense` (elems floats each) into its slot; `before` keeps the slab as the step will find it.
  void place(const float* dense) {
    for (size_t n = 0; n < index.size(); ++n)
      if (index[n] >= 0)
        std::copy_n(dense + n * size_t(elems), elems, slab.view.ptr<float>() + index[n] * stride() + lead);
    before.bytes = slab.bytes;
  }
  // The slab's states at `device_slab` (a device copy of `slab`) as [slots, row_shape...], rows stride() apart.
  TensorView rows(void* device_slab, std::initializer_list<int64_t> row_shape) const {
    std::vector<int64_t> shape{slots};
    shape.insert(shape.end(), row_shape);
    TensorView t;
    t.data = static_cast<float*>(device_slab) + lead;
    t.dtype = DType::f32;
    t.ndim = int(shape.size());
    int64_t s = 1;
    for (int d = t.ndim - 1; d >= 1; --d) t.shape[size_t(d)] = shape[size_t(d)], t.strides[size_t(d)] = s, s *= shape[size_t(d)];
    t.shape[0] = slots;
    t.strides[0] = stride();
    t.device = Device::cuda();
    return t;
  }
  bool named(int64_t slot) const { return std::find(index.begin(), index.end(), int32_t(slot)) != index.end(); }

  // After `slab` was downloaded: the named rows against `dense_after` (row n for sequence n) within `tolerance`
  // relative RMS (0: exact), every other float unchanged.
  void expect_states(const float* dense_after, double tolerance) const {
    double err = 0, ref = 0;
    for (size_t n = 0; n < index.size(); ++n) {
      if (index[n] < 0) continue;
      for (int64_t i = 0; i < elems; ++i) {
        const double want = dense_after[n * size_t(elems) + size_t(i)], got = slab.at(index[n] * stride() + lead + i);
        err += (got - want) * (got - want);
        ref += want * want;
      }
    }
    EXPECT_LE(std::sqrt(err / std::max(ref, 1e-30)), tolerance) << "the named slots' new states";
    int64_t touched = 0;
    for (int64_t s = 0; s < slots; ++s)
      for (int64_t i = 0; i < stride(); ++i) {
        if (named(s) && i >= lead && i < lead + elems) continue;
        const size_t at = size_t(s * stride() + i) * 4;
        touched += std::memcmp(&before.bytes[at], &slab.bytes[at], 4) != 0;
      }
    EXPECT_EQ(touched, 0) << "floats of the slab the step must not touch";
  }
  // `got` (f32, NaN bytes before the step) against `want`, `width` elements per sequence: the real sequences' within
  // `tolerance` relative RMS, the pads' untouched.
  void expect_outputs(const HostTensor& got, const HostTensor& want, int64_t width, double tolerance) const {
    double err = 0, ref = 0;
    int64_t pad_written = 0;
    for (size_t n = 0; n < index.size(); ++n)
      for (int64_t i = 0; i < width; ++i) {
        const int64_t at = int64_t(n) * width + i;
        if (index[n] < 0) {
          pad_written += !std::isnan(got.at(at));
          continue;
        }
        err += double(got.at(at) - want.at(at)) * (got.at(at) - want.at(at));
        ref += double(want.at(at)) * want.at(at);
      }
    EXPECT_LE(std::sqrt(err / std::max(ref, 1e-30)), tolerance) << "the real sequences' outputs";
    EXPECT_EQ(pad_written, 0) << "the pads' outputs written";
  }
};

}  // namespace attnzoo::testing
