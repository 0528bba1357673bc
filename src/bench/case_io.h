#pragma once
// What the case writers (kernel_cases.cc for the softmax entries, kernel_cases_linear.cc for the linear family)
// share: host arrays, their .npy files, their copies on a device, and the manifest's JSON pieces.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace attnzoo::bench {

struct HostArray {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>()); }
};

HostArray make_array(DType t, std::vector<int64_t> shape);
// N(0, 1) values rounded to `t` (a float dtype).
HostArray random_array(DType t, std::vector<int64_t> shape, uint32_t seed);
// The .npy format, version 1.0; bf16 and e4m3 travel as their raw bits ('<u2', '|u1') and the manifest names
// the dtype (numpy has neither).
void write_npy(const std::filesystem::path& path, const HostArray& a);

// A host array's copy on the device, and its view there.
struct Placed {
  DeviceBuffer buffer;
  TensorView view;
};
Placed place(const HostArray& a, Device device);
// The device copy's bytes back on the host, shaped like `like` (waits for the stream: the bytes are final).
HostArray fetch(const Placed& p, const HostArray& like);

std::string list(const std::vector<int32_t>& v);
std::string list(const std::vector<float>& v);
std::string number(float x);
std::string json_string(const std::string& s);
// N + 1 offsets of packed sequences of these lengths.
std::vector<int32_t> offsets(const std::vector<int32_t>& lens);

// Runs a case and closes its manifest entry: "ok" once its output is written, else what the device's entry
// refused (ArgumentError / DTypeError: a shape or option it does not take; DeviceError: no device to run on).
template <class Run>
std::string finish_case(const std::string& entry, bool& refused, Run run) {
  std::string error;
  try {
    run();
  } catch (const std::invalid_argument& e) {
    error = e.what();
  } catch (const DeviceError& e) {
    error = e.what();
  }
  refused = !error.empty();
  if (!refused) return entry + ", \"status\": \"ok\"}";
  return entry + ", \"status\": \"refused\", \"error\": " + json_string(error) + "}";
}

}  // namespace attnzoo::bench
