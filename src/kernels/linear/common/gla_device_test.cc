// The gated-linear group's device seam, checked on the host in every build: tensors on two devices are refused
// naming the odd one, the entries that run on the CPU only (parallel and reference forms) refuse device tensors
// by name, and a recurrent or chunked call on a GPU that is not there (or in a build without CUDA) is a
// DeviceError, never a device pointer read by the host. The tensors marked as device ones below hold host
// memory: every refusal must come before anything reads them.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/common/gla_testing.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {
using testing::GlaDeviceCase;
using testing::GlaEntryArgs;
using testing::GlaFamily;
using testing::GlaInputs;
using testing::HostTensor;

// Every tensor of `a` marked as living on cuda:0 (g_gamma too).
GlaEntryArgs on_gpu(GlaEntryArgs a) {
  testing::mark_on_gpu({&a.q, &a.k, &a.v, &a.g, &a.g_gamma, &a.o, &a.opts.initial_state, &a.opts.final_state,
                        &a.opts.initial_z, &a.opts.final_z});
  return a;
}

struct Inputs {
  GlaDeviceCase c;
  GlaInputs in;
  HostTensor o, s, z;
  explicit Inputs(GlaFamily family, bool normalize = false)
      : c{.family = family, .B = 2, .T = 3, .H = 1, .HV = 2, .K = 16, .V = 16, .g_gamma = true,
          .feature_map = normalize ? FeatureMap::elu_plus_one : FeatureMap::identity, .normalize = normalize,
          .initial_state = true},
        in(c),
        o(DType::f32, {2, 3, 2, 16}, 0, 0.f),
        s(DType::f32, {2, 2, 16, 16}, 0, 0.f),
        z(DType::f32, {2, 1, 1, 16}, 0, 0.f) {}
  GlaEntryArgs args() { return in.args(c, o, &s, &z); }
  void run(GlaPath path, const GlaEntryArgs& a) const { testing::run_gla_entry(c.family, path, a); }
};

const GlaFamily kFamilies[] = {GlaFamily::linear_attn, GlaFamily::retention, GlaFamily::simple_gla, GlaFamily::gla};

TEST(GlaDevice, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  Inputs x(GlaFamily::gla);
  GlaEntryArgs a = on_gpu(x.args());
  a.k.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { x.run(GlaPath::recurrent, a); }, "k: lives on cpu, q on cuda:0");
  a = x.args();
  a.opts.final_state.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { x.run(GlaPath::recurrent, a); },
                                       "final_state: lives on cuda:1, q on cpu");
  a = on_gpu(x.args());
  a.g.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { x.run(GlaPath::recurrent, a); }, "g: lives on cuda:1, q on cuda:0");

  // g_gamma is a per-head constant: on the host beside device tensors it is taken (and read there), on another
  // device it is refused.
  Inputs y(GlaFamily::simple_gla);
  a = y.args();
  a.g_gamma.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { y.run(GlaPath::recurrent, a); }, "g_gamma: lives on cuda:0, q on cpu");
  a = on_gpu(y.args());
  a.g_gamma.device = Device::cpu();
  a.g_gamma.ptr<float>()[1] = 0.5f;  // still checked on the host, before the device branch
  testing::expect_error<ArgumentError>([&] { y.run(GlaPath::recurrent, a); }, "g_gamma: must be finite and <= 0");
  a.g_gamma.ptr<float>()[1] = -0.1f;

  Inputs z(GlaFamily::linear_attn, true);
  a = on_gpu(z.args());
  a.opts.final_z.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { z.run(GlaPath::recurrent, a); }, "final_z: lives on cpu, q on cuda:0");
}

TEST(GlaDevice, ReferencesRunOnTheCpuOnly) {
  const char* names[] = {"linear_attn_reference", "retention_reference", "simple_gla_reference", "gla_reference"};
  for (GlaFamily family : kFamilies) {
    Inputs x(family, family == GlaFamily::linear_attn);
    const std::string name = names[int(family)];
    SCOPED_TRACE(name);
    testing::expect_error<ArgumentError>([&] { x.run(GlaPath::reference, on_gpu(x.args())); },
                                         "q: lives on cuda:0; " + name + " runs on the CPU only so far");
  }
  Inputs r(GlaFamily::retention);
  GlaEntryArgs a = on_gpu(r.args());
  a.opts.initial_state = a.opts.final_state = {};
  testing::expect_error<ArgumentError>([&] { parallel_retention(a.q, a.k, a.v, a.o, a.opts); },
                                       "q: lives on cuda:0; parallel_retention runs on the CPU only");
}

TEST(GlaDevice, ShapesAreStillCheckedForDeviceTensors) {
  Inputs x(GlaFamily::gla);
  const HostTensor narrow(DType::f32, {2, 3, 1, 8}, 1);
  GlaEntryArgs a = x.args();
  a.k = narrow.view;
  a = on_gpu(a);
  testing::expect_error<ArgumentError>([&] { x.run(GlaPath::recurrent, a); }, "k: expected shape");
  a = on_gpu(x.args());
  a.g = {};
  testing::expect_error<ArgumentError>([&] { x.run(GlaPath::recurrent, a); }, "g: GLA needs a gate");
}

// Without a GPU the recurrent and chunked entries raise a DeviceError (in a CUDA build from the runtime, without
// CUDA naming q's device and the reason) before any kernel could read the host memory behind these views.
TEST(GlaDevice, RecurrentAndChunkedOnAbsentGpuAreDeviceErrors) {
  SKIP_WITH_A_REAL_GPU();
  for (GlaFamily family : kFamilies) {
    Inputs x(family, family == GlaFamily::linear_attn);
    for (GlaPath path : {GlaPath::recurrent, GlaPath::chunk})
      for (bool check_values : {true, false}) {
        SCOPED_TRACE(path == GlaPath::chunk ? "chunk" : "recurrent");
        GlaEntryArgs a = on_gpu(x.args());
        a.opts.check_values = check_values;
        auto run = [&] { x.run(path, a); };
        EXPECT_THROW(run(), DeviceError);
        if (!cuda_built()) testing::expect_error<DeviceError>(run, "q: lives on cuda:0, and ");
      }
  }
}

}  // namespace
}  // namespace attnzoo
