#pragma once
// The CTA emulator's fixtures for kernels on states addressed in a pool (the decode steps of pool_state_cases.cc and
// pool_state_step_cases.cc, the prefills of pool_state_chunk_cases.cc, rwkv7_cases.cc and rwkv7_chunk_cases.cc, the
// rows-per-thread runs of recurrent_rows_cases.cc): a slab of slots with room around each state and its view, the
// pads' untouched outputs, and the per-sequence slot indices in device memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/test_util.h"

namespace attnzoo::cuda_emulation {

using testing::HostTensor;

// A slab of `slots` rows of lead + elems + trail random floats; a sequence's state is the elems after the lead.
struct Pool {
  int64_t slots, lead, elems, trail;
  std::vector<float> before;  // the slab as the step found it
  DeviceMemory memory;

  Pool(int64_t slots_, int64_t lead_, int64_t elems_, int64_t trail_, uint64_t seed)
      : slots(slots_), lead(lead_), elems(elems_), trail(trail_),
        before(size_t(slots_ * (lead_ + elems_ + trail_))), memory(before.size() * sizeof(float)) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.f, 1.f);
    for (float& f : before) f = dist(rng);
  }
  int64_t stride() const { return lead + elems + trail; }
  // Sequence n's dense state (row n of `dense`, elems floats each) into its slot, before the upload.
  void place(const std::vector<int32_t>& index, const float* dense) {
    for (size_t n = 0; n < index.size(); ++n)
      if (index[n] >= 0)
        std::memcpy(&before[size_t(index[n] * stride() + lead)], dense + n * size_t(elems), size_t(elems) * 4);
  }
  void upload() { std::memcpy(memory.data(), before.data(), memory.size()); }
  const float* after() const { return reinterpret_cast<const float*>(memory.data()); }
  float* state_base() const { return reinterpret_cast<float*>(memory.data()) + lead; }

  // The named slots' states against `dense_after` (row n for sequence n) within `tolerance` relative RMS; every
  // other float bit-identical to before.
  void expect(const std::vector<int32_t>& index, const float* dense_after, double tolerance) const {
    std::vector<char> named(size_t(slots), 0);
    double err = 0, ref = 0;
    for (size_t n = 0; n < index.size(); ++n) {
      if (index[n] < 0) continue;
      named[size_t(index[n])] = 1;
      const float* got = after() + index[n] * stride() + lead;
      for (int64_t i = 0; i < elems; ++i) {
        const double want = dense_after[n * size_t(elems) + size_t(i)];
        err += (got[i] - want) * (got[i] - want);
        ref += want * want;
      }
    }
    EXPECT_LE(std::sqrt(err / std::max(ref, 1e-30)), tolerance) << "the named slots' new states";
    int64_t changed = 0;
    for (int64_t s = 0; s < slots; ++s)
      for (int64_t i = 0; i < stride(); ++i) {
        if (named[size_t(s)] && i >= lead && i < lead + elems) continue;
        const size_t at = size_t(s * stride() + i);
        changed += std::memcmp(&before[at], &after()[at], 4) != 0;
      }
    EXPECT_EQ(changed, 0) << "floats of the slab the step must not touch";
  }
};

// `rows` rows of `width` elements of `got` (a device output) against the dense reference's rows: the real
// sequences' within `tolerance` relative RMS, the pads' still NaN bytes.
inline void expect_rows(const std::vector<int32_t>& index, const DeviceTensor& got, const HostTensor& want,
                        int64_t width, double tolerance) {
  const size_t esize = dtype_size(got.view.dtype);
  double err = 0, ref = 0;
  int64_t pad_written = 0;
  for (size_t n = 0; n < index.size(); ++n)
    for (int64_t i = 0; i < width; ++i) {
      const int64_t at = int64_t(n) * width + i;
      if (index[n] < 0) {
        const auto* b = static_cast<const uint8_t*>(got.device.data()) + size_t(at) * esize;
        for (size_t j = 0; j < esize; ++j) pad_written += b[j] != 0xff;
        continue;
      }
      const double g = load_as_f32(got.device.data(), got.view.dtype, at), w = want.at(at);
      err += (g - w) * (g - w);
      ref += w * w;
    }
  EXPECT_LE(std::sqrt(err / std::max(ref, 1e-30)), tolerance) << "the real sequences' outputs";
  EXPECT_EQ(pad_written, 0) << "bytes of the pads' outputs written";
}

// Device memory for the indices.
struct Indices {
  DeviceMemory memory;
  explicit Indices(const std::vector<int32_t>& index) : memory(std::max<size_t>(index.size(), 1) * 4) {
    std::memcpy(memory.data(), index.data(), index.size() * 4);
  }
  const int32_t* data() const { return reinterpret_cast<const int32_t*>(memory.data()); }
};

inline TensorView on_gpu(TensorView t) {
  t.device = Device::cuda();
  return t;
}

// The packed outputs of the pool run against the dense run's: each real sequence's token rows (`width` elements
// each) bit for bit, each pad's still NaN bytes.
inline void expect_sequence_rows(const std::vector<int32_t>& index, const std::vector<int32_t>& cu_seqlens,
                                 const DeviceTensor& got, const DeviceTensor& dense, int64_t width) {
  const size_t row_bytes = size_t(width) * dtype_size(got.view.dtype);
  const auto* g = static_cast<const uint8_t*>(got.device.data());
  const auto* d = static_cast<const uint8_t*>(dense.device.data());
  int64_t differing = 0, pad_written = 0;
  for (size_t n = 0; n < index.size(); ++n)
    for (size_t b = size_t(cu_seqlens[n]) * row_bytes; b < size_t(cu_seqlens[n + 1]) * row_bytes; ++b) {
      if (index[n] < 0)
        pad_written += g[b] != 0xff;
      else
        differing += g[b] != d[b];
    }
  EXPECT_EQ(differing, 0) << "output bytes of the real sequences that differ from the dense run's";
  EXPECT_EQ(pad_written, 0) << "output bytes of the pads written";
}

// The pool for `index` over a slab of `slots` rows of `elems` floats with room around each state, sequence n's
// dense initial state (row n of `dense_init`) placed in its slot; the [slots, dims...] view of the states.
template <size_t kDims>
TensorView pool_view(Pool& pool, const std::vector<int32_t>& index, const void* dense_init,
                     const int64_t (&dims)[kDims]) {
  pool.place(index, static_cast<const float*>(dense_init));
  pool.upload();
  TensorView v;
  if constexpr (kDims == 3) {
    v = TensorView::contiguous(pool.state_base(), DType::f32, {pool.slots, dims[0], dims[1], dims[2]});
  } else {
    v = TensorView::contiguous(pool.state_base(), DType::f32, {pool.slots, dims[0], dims[1]});
  }
  v.strides[0] = pool.stride();
  return on_gpu(v);
}

}  // namespace attnzoo::cuda_emulation
