#pragma once
// Helpers shared by the C++ tests: seeded random tensors in any float dtype, error metrics, and a loop over
// every dispatch target this CPU supports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace attnzoo::testing {

// Owning storage behind a TensorView, filled with N(0, stddev) rounded to its dtype.
struct HostTensor {
  std::vector<uint8_t> bytes;
  TensorView view;
  HostTensor(DType dtype, std::vector<int64_t> shape, uint64_t seed, float stddev = 1.f) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    bytes.resize(size_t(n) * dtype_size(dtype) + 64);
    view.data = bytes.data();
    view.dtype = dtype;
    view.ndim = int(shape.size());
    int64_t stride = 1;
    for (int d = view.ndim - 1; d >= 0; --d) {
      view.shape[d] = shape[d];
      view.strides[d] = stride;
      stride *= shape[d];
    }
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.f, stddev);
    for (int64_t i = 0; i < n; ++i) store_from_f32(view.data, dtype, i, stddev > 0 ? dist(rng) : 0.f);
  }
  // A copy owns its bytes, and its view points into them where the source's pointed into the source's (a view
  // of memory the source does not own stays as it was): writing through the copy leaves the source alone, and
  // the copy outlives it. A move takes the buffer itself, so the view moves with it; the moved-from view is empty.
  HostTensor(const HostTensor& other) : bytes(other.bytes), view(other.view) { view.data = rebased(other); }
  HostTensor& operator=(const HostTensor& other) {
    if (this != &other) {
      bytes = other.bytes;
      view = other.view;
      view.data = rebased(other);
    }
    return *this;
  }
  HostTensor(HostTensor&& other) noexcept : bytes(std::move(other.bytes)), view(other.view) {
    other.view.data = nullptr;
  }
  HostTensor& operator=(HostTensor&& other) noexcept {
    if (this != &other) {
      bytes = std::move(other.bytes);
      view = other.view;
      other.view.data = nullptr;
    }
    return *this;
  }

  float at(int64_t i) const { return load_as_f32(view.data, view.dtype, i); }
  int64_t numel() const { return view.numel(); }

 private:
  // Where other's view points, carried into this tensor's bytes (already a copy of other's).
  void* rebased(const HostTensor& other) {
    const auto p = reinterpret_cast<uintptr_t>(other.view.data);
    const auto begin = reinterpret_cast<uintptr_t>(other.bytes.data());
    if (other.view.data == nullptr || p < begin || p - begin >= other.bytes.size()) return other.view.data;
    return bytes.data() + (p - begin);
  }
};

// Every byte of `t` 0xFF (NaN in every float dtype): an output element a kernel forgets to write fails.
inline void fill_nan_bytes(HostTensor& t) { std::fill(t.bytes.begin(), t.bytes.end(), uint8_t(0xff)); }

inline double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::fabs(a.at(i) - b.at(i))));
  return m;
}

inline double relative_rms(const HostTensor& got, const HostTensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = double(got.at(i)) - double(want.at(i));
    num += d * d;
    den += double(want.at(i)) * double(want.at(i));
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Runs fn and expects an exception of type E whose message contains `fragment`.
template <class E>
void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// Runs fn and expects a refusal whose message starts with `start`: the argument's name first, then its fault.
inline void expect_refusal(const std::function<void()>& fn, const std::string& start) {
  try {
    fn();
    ADD_FAILURE() << "accepted; wanted " << start;
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).rfind(start, 0), 0u) << e.what();
  }
}

// Runs fn once per supported target with that target forced, then restores the best one.
inline void for_each_target(const std::function<void(Target)>& fn) {
  for (Target t : supported_targets()) {
    SCOPED_TRACE(target_name(t));
    set_target(t);
    fn(t);
  }
  set_target(supported_targets().front());
}

}  // namespace attnzoo::testing
