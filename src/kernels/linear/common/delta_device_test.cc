// The delta family's device seam, checked on the host in every build: tensors on two devices are refused naming
// the odd one, the entries that run on the CPU only (the references) refuse a device tensor by name, and a
// recurrent or chunked call on a GPU that is not there (or in a build without CUDA) is a DeviceError, never a
// device pointer read by the host. The tensors marked as device ones below hold host memory: every refusal must come
// before anything reads them.
#include <gtest/gtest.h>

#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/delta_rule/delta_rule.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "testing/device_test_util.h"

namespace attnzoo {
namespace {
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::HostTensor;

// Every tensor of `a` marked as living on cuda:0.
DeltaArgs on_gpu(DeltaArgs a) {
  testing::mark_on_gpu({&a.q, &a.k, &a.v, &a.g, &a.beta, &a.o, &a.initial_state, &a.final_state});
  return a;
}

DeltaCase small_case(DeltaGate gate) {
  DeltaCase c;
  c.B = 2, c.T = 3, c.H = 1, c.HV = 2, c.K = 16, c.V = 16;
  c.gate = gate;
  c.initial_state = true;
  return c;
}

struct Inputs {
  DeltaCase c;
  DeltaInputs in;
  HostTensor o, s;
  explicit Inputs(DeltaGate gate)
      : c(small_case(gate)),
        in(c),
        o(DType::f32, {2, 3, 2, 16}, 0, 0.f),
        s(DType::f32, {2, 2, 16, 16}, 0, 0.f) {}
  DeltaArgs args() { return in.args(c, o, &s); }
};

TEST(DeltaDevice, TensorsOnTwoDevicesAreRefusedNamingTheOddOne) {
  Inputs x(DeltaGate::head);
  DeltaArgs a = on_gpu(x.args());
  a.beta.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { recurrent_gated_delta_rule(a); }, "beta: lives on cpu, q on cuda:0");
  a = x.args();
  a.final_state.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { recurrent_gated_delta_rule(a); },
                                       "final_state: lives on cuda:1, q on cpu");
  Inputs y(DeltaGate::channel);
  a = on_gpu(y.args());
  a.g.device = Device::cuda(1);
  testing::expect_error<ArgumentError>([&] { recurrent_kda(a); }, "g: lives on cuda:1, q on cuda:0");
}

TEST(DeltaDevice, ReferencesRunOnTheCpuOnly) {
  using Entry = void (*)(const DeltaArgs&);
  const struct {
    DeltaGate gate;
    Entry entry;
    const char* name;
  } cpu_only[] = {{DeltaGate::none, delta_rule_reference, "delta_rule_reference"},
                  {DeltaGate::head, gated_delta_rule_reference, "gated_delta_rule_reference"},
                  {DeltaGate::channel, kda_reference, "kda_reference"}};
  for (const auto& e : cpu_only) {
    SCOPED_TRACE(e.name);
    Inputs x(e.gate);
    testing::expect_error<ArgumentError>([&] { e.entry(on_gpu(x.args())); },
                                         std::string("q: lives on cuda:0; ") + e.name + " runs on the CPU only");
    // Any one tensor on a device is named, even when q is on the host.
    DeltaArgs a = x.args();
    a.final_state.device = Device::cuda();
    testing::expect_error<ArgumentError>([&] { e.entry(a); }, "final_state: lives on cuda:0; " + std::string(e.name));
  }
}

TEST(DeltaDevice, ShapesAreStillCheckedForDeviceTensors) {
  Inputs x(DeltaGate::head);
  const HostTensor narrow(DType::f32, {2, 3, 1, 8}, 1);
  DeltaArgs a = x.args();
  a.k = narrow.view;
  a = on_gpu(a);
  testing::expect_error<ArgumentError>([&] { recurrent_gated_delta_rule(a); }, "k: expected shape");
  a = on_gpu(x.args());
  a.g = {};
  testing::expect_error<ArgumentError>([&] { recurrent_kda(a); }, "g: is required");
}

// Without a GPU the recurrent and chunked entries raise a DeviceError (in a CUDA build from the runtime, without CUDA naming q's device and the reason) before any
// kernel could read the host memory behind these views.
TEST(DeltaDevice, GpuEntriesOnAbsentGpuAreADeviceError) {
  SKIP_WITH_A_REAL_GPU();
  using Entry = void (*)(const DeltaArgs&);
  const struct {
    DeltaGate gate;
    Entry entry;
    const char* name;
  } on_device[] = {{DeltaGate::none, recurrent_delta_rule, "recurrent_delta_rule"},
                   {DeltaGate::head, recurrent_gated_delta_rule, "recurrent_gated_delta_rule"},
                   {DeltaGate::channel, recurrent_kda, "recurrent_kda"},
                   {DeltaGate::none, chunk_delta_rule, "chunk_delta_rule"},
                   {DeltaGate::head, chunk_gated_delta_rule, "chunk_gated_delta_rule"},
                   {DeltaGate::channel, chunk_kda, "chunk_kda"}};
  for (const auto& e : on_device) {
    SCOPED_TRACE(e.name);
    Inputs x(e.gate);
    for (bool check_values : {true, false}) {
      DeltaArgs a = on_gpu(x.args());
      a.check_values = check_values;
      auto run = [&] { e.entry(a); };
      EXPECT_THROW(run(), DeviceError);
      if (!cuda_built()) testing::expect_error<DeviceError>(run, "q: lives on cuda:0, and ");
    }
  }
}

}  // namespace
}  // namespace attnzoo
