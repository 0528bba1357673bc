#pragma once
// What the GPU tests of the gated linear recurrences share (gla_chunk_cuda_test.cc, gla_recurrent_cuda_test.cc):
// a case run through a public entry on the device beside the double-precision reference on the host (the cases
// themselves: gla_testing.h's gla_family_cases). Needs a GPU: include only from tests that check for one.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "kernels/linear/common/gla_testing.h"
#include "testing/device_test_util.h"

namespace attnzoo::testing {

// The device's outputs (o, s, z) and the reference's (o_ref, s_ref, z_ref) for one case.
struct GlaDeviceRun {
  HostTensor o, s, z, o_ref, s_ref, z_ref;
};

// Runs case `c` through `path` on the GPU: final state updated in place when `in_place`, otherwise into a
// separate buffer that starts as NaN bytes, so an element the kernel forgets fails. A device g_gamma when
// `device_gamma` (simple GLA; retention's is always the host's).
inline GlaDeviceRun run_gla_on_device(const GlaDeviceCase& c, GlaPath path, bool in_place, bool device_gamma,
                                      uint64_t seed) {
  const GlaInputs in(c, seed);
  const std::vector<int64_t> o_shape{c.B, c.T, c.HV, c.V}, s_shape{in.N, c.HV, c.K, c.V}, z_shape{in.N, 1, c.H, c.K};
  GlaDeviceRun r{HostTensor(c.out_dtype, o_shape, 0, 0.f), HostTensor(DType::f32, s_shape, 0, 0.f),
                 HostTensor(DType::f32, z_shape, 0, 0.f),  HostTensor(DType::f32, o_shape, 0, 0.f),
                 HostTensor(DType::f32, s_shape, 0, 0.f),  HostTensor(DType::f32, z_shape, 0, 0.f)};
  run_gla_entry(c.family, GlaPath::reference, in.args(c, r.o_ref, &r.s_ref, &r.z_ref));

  for (HostTensor* t : {&r.o, &r.s, &r.z}) fill_nan_bytes(*t);
  const OnDevice q(in.q), k(in.k), v(in.v), g(in.g), gamma(in.g_gamma), init(in.init), z0(in.z), od(r.o), sd(r.s),
      zd(r.z);
  GlaEntryArgs a = in.args(c, r.o, &r.s, &r.z);
  a.q = q.view, a.k = k.view, a.v = v.view, a.o = od.view;
  if (!a.g.empty()) a.g = g.view;
  if (!a.g_gamma.empty() && device_gamma) a.g_gamma = gamma.view;
  if (c.initial_state) a.opts.initial_state = init.view;
  a.opts.final_state = in_place ? init.view : sd.view;
  if (c.normalize) {
    if (c.initial_state) a.opts.initial_z = z0.view;
    a.opts.final_z = zd.view;
  }
  run_gla_entry(c.family, path, a);
  synchronize(current_stream());
  od.download(r.o);
  (in_place ? init : sd).download(r.s);
  if (c.normalize) zd.download(r.z);
  return r;
}

}  // namespace attnzoo::testing
