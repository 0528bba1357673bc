// The decode-form kernels on states addressed in a pool (fla / vLLM's ssm_state_indices, conv_state_indices: the
// GPU runners' decode steps, device_conv_state.h, device_lightning.cc, rwkv7_cuda_runner.cc) under the CTA
// emulator: a one-token step per sequence whose states are scattered, permuted rows of a slab with a row stride of
// its own (room before and after each state, as a pool slot's [conv tail | state] has), and padded batch rows
// (index -1). Against the dense CPU twins on the same states gathered: the outputs and the named rows' new states;
// and bit for bit, every byte the step must not touch: the other slots, the rest of each named slot, and the pads'
// outputs (NaN bytes, which stay NaN bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/delta_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/delta_recurrent_launch.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/gla_recurrent_kernel.cuh"
#include "kernels/linear/common/cuda/gla_recurrent_launch.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_kernel.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba/problem.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_kernel.cuh"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/mamba2/problem.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_kernel.cuh"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_update_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_update_launch.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/device_tensor.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;
using cuda_emulation::DeviceTensor;
using testing::DeltaCase;
using testing::DeltaInputs;
using testing::GlaDeviceCase;
using testing::GlaFamily;
using testing::GlaInputs;
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
void expect_rows(const std::vector<int32_t>& index, const DeviceTensor& got, const HostTensor& want, int64_t width,
                 double tolerance) {
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

TensorView on_gpu(TensorView t) {
  t.device = Device::cuda();
  return t;
}

// ---- Delta family (Gated DeltaNet, KDA): delta_recurrent_kernel.cuh ----

template <DeltaGate kGate>
void launch_delta(const cuda_delta::RecurrentLaunch& l) {
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0,
                         [&](unsigned char*) { cuda_delta::delta_recurrent_cta<kGate>(l.params); });
}

// One decode step of index.size() sequences (HV = 2H) on pool slots `index` of a slab of `slots`.
void check_delta(DeltaGate gate, int64_t K, int64_t V, const std::vector<int32_t>& index, int64_t slots,
                 DType dtype, uint64_t seed) {
  const int64_t N = int64_t(index.size()), H = 1, HV = 2;
  SCOPED_TRACE("gate=" + std::to_string(int(gate)) + " K=" + std::to_string(K) + " V=" + std::to_string(V) +
               " N=" + std::to_string(N) + " " + dtype_name(dtype));
  DeltaCase c;
  c.B = N, c.T = 1, c.H = H, c.HV = HV, c.K = K, c.V = V, c.gate = gate, c.initial_state = true, c.l2norm = true;
  c.dtype = dtype;
  const DeltaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, HV, V}, 0, 0.f), s_ref(DType::f32, {N, HV, K, V}, 0, 0.f);
  (gate == DeltaGate::head ? gated_delta_rule_reference : kda_reference)(in.args(c, o_ref, &s_ref));

  Pool pool(slots, 7, HV * K * V, 5, seed + 100);
  pool.place(index, static_cast<const float*>(in.init.view.data));
  pool.upload();
  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor q = dev(in.q), k = dev(in.k), v = dev(in.v), g = dev(in.g), beta = dev(in.beta);
  const DeviceTensor o(dtype, {N, 1, HV, V}, 0);  // NaN bytes
  HostTensor unused(DType::f32, {1}, 0, 0.f);
  DeltaArgs a = in.args(c, unused, nullptr);
  a.q = on_gpu(q.device_view()), a.k = on_gpu(k.device_view()), a.v = on_gpu(v.device_view());
  a.g = on_gpu(g.device_view()), a.beta = on_gpu(beta.device_view()), a.o = on_gpu(o.device_view());
  TensorView states = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, HV, K, V}));
  states.strides[0] = pool.stride();
  a.initial_state = a.final_state = states;
  a.ssm_state_indices = idx.data();
  a.check_values = false;
  const DeltaProblem p = make_delta_problem(a, gate);
  ASSERT_NO_THROW(check_cuda_delta_recurrent(p));
  const cuda_delta::RecurrentLaunch l = cuda_delta::plan_delta_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: nothing uploaded
  cuda_emulation::seed_schedule(seed);
  if (gate == DeltaGate::head) {
    launch_delta<DeltaGate::head>(l);
  } else {
    launch_delta<DeltaGate::channel>(l);
  }
  expect_rows(index, o, o_ref, HV * V, dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Scattered, permuted slots with pads between and after them (a bucket's), V = 100 (a part-empty last slice).
TEST(EmulatedPoolStates, DeltaRecurrenceInPlace) {
  for (DeltaGate gate : {DeltaGate::head, DeltaGate::channel}) {
    check_delta(gate, 48, 100, {5, 0, -1, 9, 3, -1, -1, -1}, 11, DType::f32, 10 + uint64_t(gate));
    check_delta(gate, 64, 32, {2}, 3, DType::f32, 20 + uint64_t(gate));
    check_delta(gate, 40, 48, {1, -1, 4, 0}, 6, DType::bf16, 30 + uint64_t(gate));
  }
}

// What make_delta_problem refuses with pool states, by name.
TEST(EmulatedPoolStates, DeltaRefusals) {
  DeltaCase c;
  c.B = 2, c.T = 1, c.H = 1, c.HV = 2, c.K = 16, c.V = 16, c.initial_state = true;
  const DeltaInputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 2, 16}, 0, 0.f), pool(DType::f32, {4, 2, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    DeltaArgs a = in.args(c, o, nullptr);
    a.initial_state = a.final_state = pool.view;
    a.ssm_state_indices = index.data();
    a.check_values = false;
    if (gpu)
      for (TensorView* t : {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.o, &a.initial_state, &a.final_state})
        t->device = Device::cuda();
    return a;
  };
  auto refused = [](const DeltaArgs& a, const std::string& name) {
    try {
      make_delta_problem(a, DeltaGate::head);
    } catch (const ArgumentError& e) {
      return std::string(e.what()).find(name) != std::string::npos;
    }
    return false;
  };
  EXPECT_NO_THROW(make_delta_problem(args(true), DeltaGate::head));
  EXPECT_TRUE(refused(args(false), "ssm_state_indices"));  // host states: the CPU entries take dense ones
  DeltaArgs a = args(true);
  a.check_values = true;
  EXPECT_TRUE(refused(a, "ssm_state_indices"));
  a = args(true);
  a.final_state = o.view;
  a.final_state.device = Device::cuda();
  EXPECT_TRUE(refused(a, "final_state"));  // not the pool updated in place
  a = args(true);
  a.initial_state.strides[0] = a.final_state.strides[0] = 2 * 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused(a, "final_state"));
  // The chunked form takes dense states.
  a = args(true);
  EXPECT_THROW(chunk_delta_on_device(make_delta_problem(a, DeltaGate::head)), ArgumentError);
}

// ---- RWKV-7: rwkv7_recurrent_kernel.cuh ----

// One decode step of index.size() sequences of H heads on pool slots `index` of a slab of `slots`, against the CPU
// twin (recurrent_rwkv7) on the dense states.
void check_rwkv7(int64_t H, int64_t K, int64_t V, const std::vector<int32_t>& index, int64_t slots, DType dtype,
                 uint64_t seed) {
  const int64_t N = int64_t(index.size());
  testing::Rwkv7Case c;
  c.B = N, c.T = 1, c.H = H, c.K = K, c.V = V, c.dtype = dtype;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const testing::Rwkv7Inputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, H, V}, 0, 0.f), s_ref(DType::f32, {N, H, K, V}, 0, 0.f);
  Rwkv7Args a = in.args(c);
  a.o = o_ref.view, a.final_state = s_ref.view;
  recurrent_rwkv7(a);

  Pool pool(slots, 3, H * K * V, 9, seed + 100);
  pool.place(index, static_cast<const float*>(in.h0.view.data));
  pool.upload();
  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor r = dev(in.r), w = dev(in.w), k = dev(in.k), v = dev(in.v), ad = dev(in.a), bd = dev(in.b);
  const DeviceTensor o(dtype, {N, 1, H, V}, 0);  // NaN bytes
  a.r = on_gpu(r.device_view()), a.w = on_gpu(w.device_view()), a.k = on_gpu(k.device_view());
  a.v = on_gpu(v.device_view()), a.a = on_gpu(ad.device_view()), a.b = on_gpu(bd.device_view());
  a.o = on_gpu(o.device_view());
  TensorView states = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, H, K, V}));
  states.strides[0] = pool.stride();
  a.initial_state = a.final_state = states;
  a.ssm_state_indices = idx.data();
  const Rwkv7Problem p = make_rwkv7_problem(a);
  ASSERT_NO_THROW(check_cuda_rwkv7_recurrent(p));
  const cuda_rwkv7::RecurrentLaunch l = cuda_rwkv7::plan_rwkv7_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: nothing uploaded
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), l.smem_bytes,
                         [&](unsigned char* smem) { cuda_rwkv7::rwkv7_recurrent_cta(l.params, smem); });
  expect_rows(index, o, o_ref, H * V, dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Scattered, permuted slots with pads between and after them; RWKV-7's 64 x 64 heads, and K != V off the tiles
// (a part-empty last warp and slice).
TEST(EmulatedPoolStates, Rwkv7RecurrenceInPlace) {
  check_rwkv7(2, 64, 64, {5, 0, -1, 9, 3, -1, -1, -1}, 11, DType::f32, 80);
  check_rwkv7(1, 48, 100, {2}, 3, DType::f32, 81);
  check_rwkv7(3, 40, 36, {1, -1, 4, 0}, 6, DType::bf16, 82);
}

// What make_rwkv7_problem refuses with pool states, by name; the CPU entries take dense states.
TEST(EmulatedPoolStates, Rwkv7Refusals) {
  testing::Rwkv7Case c;
  c.B = 2, c.T = 1, c.H = 2, c.K = 16, c.V = 16;
  const testing::Rwkv7Inputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 2, 16}, 0, 0.f), pool(DType::f32, {4, 2, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    Rwkv7Args a = in.args(c);
    a.o = o.view;
    a.initial_state = a.final_state = pool.view;
    a.ssm_state_indices = index.data();
    if (gpu)
      for (TensorView* t : {&a.r, &a.w, &a.k, &a.v, &a.a, &a.b, &a.o, &a.initial_state, &a.final_state})
        t->device = Device::cuda();
    return a;
  };
  auto refused = [](auto&& call, const std::string& name) {
    try {
      call();
    } catch (const ArgumentError& e) {
      return std::string(e.what()).find(name) != std::string::npos;
    }
    return false;
  };
  EXPECT_NO_THROW(make_rwkv7_problem(args(true)));
  EXPECT_TRUE(refused([&] { recurrent_rwkv7(args(false)); }, "ssm_state_indices"));
  EXPECT_TRUE(refused([&] { chunk_rwkv7(args(false)); }, "ssm_state_indices"));
  EXPECT_TRUE(refused([&] { rwkv7_reference(args(false)); }, "ssm_state_indices"));
  Rwkv7Args a = args(true);
  a.final_state = o.view;
  a.final_state.device = Device::cuda();
  EXPECT_TRUE(refused([&] { make_rwkv7_problem(a); }, "final_state"));  // not the pool updated in place
  a = args(true);
  a.initial_state.strides[0] = a.final_state.strides[0] = 2 * 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused([&] { make_rwkv7_problem(a); }, "final_state"));
}

// ---- Gated linear recurrence (MiniMax's lightning attention, simple GLA, GLA): gla_recurrent_kernel.cuh ----

template <GateKind kGate>
void launch_gla(const cuda_gla::RecurrentLaunch& l) {
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0,
                         [&](unsigned char*) { cuda_gla::gla_recurrent_cta<kGate>(l.params); });
}

// One decode step of index.size() sequences of family case `shape` (B, T = 1 set here) on pool slots `index` of
// a slab of `slots`, every tensor (a device g_gamma included, as the runner's) on the device.
void check_gla(GlaDeviceCase c, const std::vector<int32_t>& index, int64_t slots, uint64_t seed) {
  const int64_t N = int64_t(index.size());
  c.B = N, c.T = 1, c.initial_state = true;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const GlaInputs in(c, seed);
  HostTensor o_ref(DType::f32, {N, 1, c.HV, c.V}, 0, 0.f), s_ref(DType::f32, {N, c.HV, c.K, c.V}, 0, 0.f);
  testing::run_gla_entry(c.family, GlaPath::reference, in.args(c, o_ref, &s_ref));

  Pool pool(slots, 5, c.HV * c.K * c.V, 11, seed + 100);
  pool.place(index, static_cast<const float*>(in.init.view.data));
  pool.upload();
  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor q = dev(in.q), k = dev(in.k), v = dev(in.v), g = dev(in.g), g_gamma = dev(in.g_gamma);
  const DeviceTensor o(c.out_dtype, {N, 1, c.HV, c.V}, 0);  // NaN bytes
  HostTensor unused(DType::f32, {1}, 0, 0.f);
  testing::GlaEntryArgs a = in.args(c, unused, nullptr);
  a.q = on_gpu(q.device_view()), a.k = on_gpu(k.device_view()), a.v = on_gpu(v.device_view());
  a.o = on_gpu(o.device_view());
  if (!a.g.empty()) a.g = on_gpu(g.device_view());
  if (!a.g_gamma.empty()) a.g_gamma = on_gpu(g_gamma.device_view());
  TensorView states = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, c.HV, c.K, c.V}));
  states.strides[0] = pool.stride();
  a.opts.initial_state = a.opts.final_state = states;
  a.opts.ssm_state_indices = idx.data();
  a.opts.check_values = false;
  std::vector<float> retention_gamma;
  const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
  ASSERT_NO_THROW(check_cuda_gla_recurrent(p));
  cuda_gla::RecurrentLaunch l = cuda_gla::plan_gla_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());  // a padded batch: no offsets to upload
  // Retention's host decays are the launcher's one upload (the runner's lightning passes a device g_gamma).
  std::optional<DeviceMemory> gamma;
  if (!l.gamma.empty()) {
    gamma.emplace(l.gamma.size() * sizeof(float));
    std::memcpy(gamma->data(), l.gamma.data(), gamma->size());
    l.params.g_gamma = reinterpret_cast<const float*>(gamma->data());
  }
  cuda_emulation::seed_schedule(seed);
  switch (l.gate) {
    case GateKind::none: launch_gla<GateKind::none>(l); break;
    case GateKind::scalar: launch_gla<GateKind::scalar>(l); break;
    case GateKind::channel: launch_gla<GateKind::channel>(l); break;
  }
  expect_rows(index, o, o_ref, c.HV * c.V, c.out_dtype == DType::f32 ? 1e-4 : 1e-2);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Every family but the normalised linear attention (its z is not pool-addressed), scattered permuted slots with
// pads between and after them; V = 100 (a part-empty last slice), K = 96 (three warps), HV = 2H, bf16 in and out.
TEST(EmulatedPoolStates, GlaRecurrenceInPlace) {
  auto shape = [](int64_t H, int64_t HV, int64_t K, int64_t V, DType dtype) {
    GlaDeviceCase c;
    c.H = H, c.HV = HV, c.K = K, c.V = V, c.dtype = c.out_dtype = dtype;
    return c;
  };
  uint64_t seed = 80;
  const std::vector<testing::GlaLinearVariant> unnormalised{{FeatureMap::relu, false}};
  for (const GlaDeviceCase& c : testing::gla_family_cases(shape(2, 2, 48, 100, DType::f32), unnormalised))
    check_gla(c, {5, 0, -1, 9, 3, -1, -1, -1}, 11, seed++);
  for (const GlaDeviceCase& c : testing::gla_family_cases(shape(1, 2, 96, 32, DType::bf16), {}))
    check_gla(c, {1, -1, 4, 0}, 6, seed++);
  // MiniMax's lightning attention: g_gamma alone, K = V = head_dim, one sequence in the pool's only slot.
  GlaDeviceCase lightning = shape(4, 4, 64, 64, DType::f32);
  lightning.family = GlaFamily::simple_gla, lightning.g_gamma = true, lightning.data_gate = false;
  check_gla(lightning, {0}, 1, seed++);
  check_gla(lightning, {2, -1}, 3, seed++);
}

// What make_gla_problem and the entries refuse with pool states, by name.
TEST(EmulatedPoolStates, GlaRefusals) {
  GlaDeviceCase c;
  c.family = GlaFamily::simple_gla, c.B = 2, c.T = 1, c.H = 1, c.HV = 1, c.K = 16, c.V = 16, c.initial_state = true;
  const GlaInputs in(c, 3);
  HostTensor o(DType::f32, {2, 1, 1, 16}, 0, 0.f), pool(DType::f32, {4, 1, 16, 16}, 4);
  const std::vector<int32_t> index{3, 1};
  auto args = [&](bool gpu) {
    testing::GlaEntryArgs a = in.args(c, o, nullptr);
    a.opts.initial_state = a.opts.final_state = pool.view;
    a.opts.ssm_state_indices = index.data();
    if (gpu)
      for (TensorView* t : {&a.q, &a.k, &a.v, &a.g, &a.o, &a.opts.initial_state, &a.opts.final_state})
        t->device = Device::cuda();
    return a;
  };
  auto refused = [](auto&& call, const std::string& name) {
    try {
      call();
    } catch (const ArgumentError& e) {
      return std::string(e.what()).find(name) != std::string::npos;
    }
    return false;
  };
  auto problem = [](const testing::GlaEntryArgs& a) {
    return make_gla_problem(a.q, a.k, a.v, a.g, GateKind::scalar, TensorView{}, a.o, a.opts);
  };
  EXPECT_NO_THROW(problem(args(true)));
  // Host states: the CPU entries take dense ones.
  EXPECT_TRUE(refused([&] { recurrent_simple_gla(in.q.view, in.k.view, in.v.view, in.g.view, TensorView{}, o.view,
                                                 args(false).opts); }, "ssm_state_indices"));
  testing::GlaEntryArgs a = args(true);
  a.opts.final_state = o.view;
  a.opts.final_state.device = Device::cuda();
  EXPECT_TRUE(refused([&] { problem(a); }, "final_state"));  // not the pool updated in place
  a = args(true);
  a.opts.initial_state.strides[0] = a.opts.final_state.strides[0] = 16 * 16 - 1;  // rows overlapping
  EXPECT_TRUE(refused([&] { problem(a); }, "final_state"));
  // The chunked form and the reference take dense states; the normaliser's z is not addressed.
  a = args(true);
  EXPECT_TRUE(refused([&] { run_gla(problem(a), GlaPath::chunk, "chunk_simple_gla"); }, "ssm_state_indices"));
  EXPECT_TRUE(refused([&] { run_gla(problem(a), GlaPath::reference, "simple_gla_reference"); }, "ssm_state_indices"));
  EXPECT_TRUE(refused(
      [&] {
        GlaProblem p = make_gla_problem(a.q, a.k, a.v, TensorView{}, GateKind::none, TensorView{}, a.o, a.opts);
        set_gla_normalizer(p, TensorView{}, TensorView{});
      },
      "ssm_state_indices"));
}

// ---- Short convolution's decode step: conv_update_kernel.cuh ----

void check_conv(int64_t D, int64_t W, int64_t S, const std::vector<int32_t>& index, int64_t slots, DType dtype,
                uint64_t seed) {
  const int64_t N = int64_t(index.size());
  SCOPED_TRACE("D=" + std::to_string(D) + " W=" + std::to_string(W) + " S=" + std::to_string(S) + " N=" +
               std::to_string(N) + " " + dtype_name(dtype));
  HostTensor x(dtype, {N, 1, D}, seed), dense(DType::f32, {N, D, S}, seed + 1), w(dtype, {D, W}, seed + 2, 0.5f),
      b(dtype, {D}, seed + 3);
  HostTensor y_ref(DType::f32, {N, 1, D}, 0, 0.f), s_ref(DType::f32, {N, D, S}, 0, 0.f);
  CausalConv1dOptions o;
  o.bias = b.view, o.initial_state = dense.view, o.final_state = s_ref.view, o.activation = ConvActivation::silu;
  causal_conv1d_reference(x.view, w.view, y_ref.view, o);

  Pool pool(slots, 3, D * S, 9, seed + 100);
  pool.place(index, static_cast<const float*>(dense.view.data));
  pool.upload();
  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor xd = dev(x), wd = dev(w), bd = dev(b);
  const DeviceTensor yd(DType::f32, {N, 1, D}, 0);  // NaN bytes
  TensorView states = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, D, S}));
  states.strides[0] = pool.stride();
  const ConvProblem p =
      make_conv_update_problem(on_gpu(xd.device_view()), states, on_gpu(wd.device_view()), on_gpu(bd.device_view()),
                               on_gpu(yd.device_view()), ConvActivation::silu, idx.data());
  ASSERT_NO_THROW(check_cuda_conv_update(p));
  const cuda_conv::UpdateLaunch l = cuda_conv::plan_conv_update(p);
  ASSERT_FALSE(l.empty);
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0,
                         [&](unsigned char*) { cuda_conv::conv_update_thread(l.params); });
  expect_rows(index, yd, y_ref, D, 1e-5);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 0.0);  // a shift: exact
}

TEST(EmulatedPoolStates, ConvUpdateInPlace) {
  check_conv(200, 4, 3, {4, -1, 0, 7, -1}, 8, DType::f32, 50);
  check_conv(96, 4, 4, {2, 5}, 6, DType::bf16, 51);
  check_conv(130, 2, 1, {0, 1, 2, -1}, 3, DType::f32, 52);
}

TEST(EmulatedPoolStates, ConvUpdateRefusals) {
  HostTensor x(DType::f32, {2, 1, 8}, 1), w(DType::f32, {8, 4}, 2), y(DType::f32, {2, 1, 8}, 0, 0.f),
      pool(DType::f32, {3, 8, 3}, 3);
  const std::vector<int32_t> index{2, 0};
  auto gpu = [](const HostTensor& h) { return on_gpu(h.view); };
  EXPECT_NO_THROW(make_conv_update_problem(gpu(x), gpu(pool), gpu(w), {}, gpu(y), ConvActivation::none,
                                           index.data()));
  // Host tensors: the CPU step takes dense states.
  EXPECT_THROW(make_conv_update_problem(x.view, pool.view, w.view, {}, y.view, ConvActivation::none, index.data()),
               ArgumentError);
  TensorView overlapping = gpu(pool);
  overlapping.strides[0] = 8 * 3 - 1;
  EXPECT_THROW(make_conv_update_problem(gpu(x), overlapping, gpu(w), {}, gpu(y), ConvActivation::none,
                                        index.data()),
               ArgumentError);
}

// ---- Mamba-2's decode step: mamba2_recurrent_kernel.cuh ----

void check_mamba2(int64_t H, int64_t P, int64_t G, int64_t N, const std::vector<int32_t>& index, int64_t slots,
                  DType dtype, uint64_t seed) {
  const int64_t Bn = int64_t(index.size());
  SCOPED_TRACE("H=" + std::to_string(H) + " P=" + std::to_string(P) + " G=" + std::to_string(G) + " N=" +
               std::to_string(N) + " Bn=" + std::to_string(Bn) + " " + dtype_name(dtype));
  HostTensor x(dtype, {Bn, H, P}, seed), dt(dtype, {Bn, H}, seed + 1), A(DType::f32, {H}, seed + 2),
      Bm(dtype, {Bn, G, N}, seed + 3, 0.5f), Cm(dtype, {Bn, G, N}, seed + 4, 0.5f), D(dtype, {H}, seed + 5),
      z(dtype, {Bn, H, P}, seed + 6), bias(DType::f32, {H}, seed + 7, 0.5f), dense(DType::f32, {Bn, H, P, N}, seed + 8);
  for (int64_t h = 0; h < H; ++h) A.view.ptr<float>()[h] = -0.5f - std::fabs(A.at(h));
  Pool pool(slots, 11, H * P * N, 2, seed + 100);
  pool.place(index, static_cast<const float*>(dense.view.data));
  pool.upload();

  HostTensor y_ref(DType::f32, {Bn, H, P}, 0, 0.f), s_ref = dense;
  s_ref.view.data = s_ref.bytes.data();
  Mamba2StepArgs a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = D.view, a.z = z.view;
  a.dt_bias = bias.view, a.dt_softplus = true, a.state = s_ref.view, a.y = y_ref.view;
  mamba2_state_update_reference(a);

  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor xd = dev(x), dtd = dev(dt), Ad = dev(A), Bd = dev(Bm), Cd = dev(Cm), Dd = dev(D), zd = dev(z),
                     biasd = dev(bias);
  const DeviceTensor yd(DType::f32, {Bn, H, P}, 0);  // NaN bytes
  a.x = on_gpu(xd.device_view()), a.dt = on_gpu(dtd.device_view()), a.A = on_gpu(Ad.device_view());
  a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(Dd.device_view());
  a.z = on_gpu(zd.device_view()), a.dt_bias = on_gpu(biasd.device_view()), a.y = on_gpu(yd.device_view());
  a.state = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, H, P, N}));
  a.state.strides[0] = pool.stride();
  a.state_batch_indices = idx.data();
  const Mamba2Problem p = make_mamba2_step_problem(a);
  ASSERT_NO_THROW(check_cuda_mamba2_recurrent(p));
  const cuda_mamba2::RecurrentLaunch l = cuda_mamba2::plan_mamba2_recurrent(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0, [&](unsigned char*) {
    switch (l.cols_per_lane) {
      case 2: cuda_mamba2::mamba2_recurrent_warp<2>(l.params); break;
      case 4: cuda_mamba2::mamba2_recurrent_warp<4>(l.params); break;
      default: cuda_mamba2::mamba2_recurrent_warp<8>(l.params); break;
    }
  });
  expect_rows(index, yd, y_ref, H * P, 1e-4);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Falcon-H1's N = 256 (eight columns a lane) and a 2-group model with P = 30 (a part-empty last warp).
TEST(EmulatedPoolStates, Mamba2StepInPlace) {
  check_mamba2(2, 64, 1, 128, {3, -1, 0, 6, -1, -1}, 7, DType::f32, 60);
  check_mamba2(4, 30, 2, 64, {1, 0}, 2, DType::bf16, 61);
  check_mamba2(1, 16, 1, 256, {-1, 2}, 4, DType::f32, 62);
}

// ---- Mamba's decode step: selective_scan_kernel.cuh ----

void check_mamba(int64_t D, int64_t N, const std::vector<int32_t>& index, int64_t slots, DType dtype, uint64_t seed) {
  const int64_t Bn = int64_t(index.size());
  SCOPED_TRACE("D=" + std::to_string(D) + " N=" + std::to_string(N) + " Bn=" + std::to_string(Bn) + " " +
               dtype_name(dtype));
  HostTensor x(dtype, {Bn, D}, seed), dt(dtype, {Bn, D}, seed + 1, 0.5f), A(DType::f32, {D, N}, seed + 2),
      Bm(dtype, {Bn, N}, seed + 3, 0.5f), Cm(dtype, {Bn, N}, seed + 4, 0.5f), skip(dtype, {D}, seed + 5),
      z(dtype, {Bn, D}, seed + 6), bias(DType::f32, {D}, seed + 7, 0.3f), dense(DType::f32, {Bn, D, N}, seed + 8);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -std::fabs(A.at(i));
  Pool pool(slots, 5, D * N, 6, seed + 100);
  pool.place(index, static_cast<const float*>(dense.view.data));
  pool.upload();

  HostTensor y_ref(DType::f32, {Bn, D}, 0, 0.f), s_ref = dense;
  s_ref.view.data = s_ref.bytes.data();
  SelectiveStateUpdateArgs a;
  a.x = x.view, a.dt = dt.view, a.A = A.view, a.B = Bm.view, a.C = Cm.view, a.D = skip.view, a.z = z.view;
  a.dt_bias = bias.view, a.dt_softplus = true, a.state = s_ref.view, a.y = y_ref.view;
  selective_state_update_reference(a);

  const Indices idx(index);
  auto dev = [](const HostTensor& h) { return DeviceTensor(h.view, h.bytes.size()); };
  const DeviceTensor xd = dev(x), dtd = dev(dt), Ad = dev(A), Bd = dev(Bm), Cd = dev(Cm), skipd = dev(skip),
                     zd = dev(z), biasd = dev(bias);
  const DeviceTensor yd(DType::f32, {Bn, D}, 0);  // NaN bytes
  a.x = on_gpu(xd.device_view()), a.dt = on_gpu(dtd.device_view()), a.A = on_gpu(Ad.device_view());
  a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(skipd.device_view());
  a.z = on_gpu(zd.device_view()), a.dt_bias = on_gpu(biasd.device_view()), a.y = on_gpu(yd.device_view());
  a.state = on_gpu(TensorView::contiguous(pool.state_base(), DType::f32, {slots, D, N}));
  a.state.strides[0] = pool.stride();
  a.state_batch_indices = idx.data();
  const SelectiveScanProblem p = make_selective_step_problem(a);
  ASSERT_NO_THROW(check_cuda_selective_scan(p));
  const cuda_mamba::ScanLaunch l = cuda_mamba::plan_selective_scan(p);
  ASSERT_FALSE(l.empty);
  ASSERT_TRUE(l.seq_offsets.empty());
  cuda_emulation::seed_schedule(seed);
  cuda_emulation::launch(dim3(l.grid), int(l.threads), 0, [&](unsigned char*) {
    switch (l.per_lane) {
      case 1: cuda_mamba::selective_scan_channel<1>(l.params); break;
      case 2: cuda_mamba::selective_scan_channel<2>(l.params); break;
      default: cuda_mamba::selective_scan_channel<4>(l.params); break;
    }
  });
  expect_rows(index, yd, y_ref, D, 1e-4);
  pool.expect(index, static_cast<const float*>(s_ref.view.data), 1e-4);
}

// Mamba's N = 16; D = 37 with N = 60 (a part-empty CTA of channels, four entries a lane).
TEST(EmulatedPoolStates, MambaStepInPlace) {
  check_mamba(64, 16, {2, -1, 0, 5}, 6, DType::f32, 70);
  check_mamba(37, 60, {1, 3, -1}, 4, DType::bf16, 71);
}

// The Mamba steps refuse pool states on the host, by name.
TEST(EmulatedPoolStates, StepRefusalsOnTheHost) {
  HostTensor x(DType::f32, {2, 8}, 1), A(DType::f32, {8, 4}, 2), Bm(DType::f32, {2, 4}, 3), y(DType::f32, {2, 8}, 0, 0.f),
      pool(DType::f32, {3, 8, 4}, 4);
  const std::vector<int32_t> index{2, 0};
  SelectiveStateUpdateArgs a;
  a.x = x.view, a.dt = x.view, a.A = A.view, a.B = Bm.view, a.C = Bm.view, a.state = pool.view, a.y = y.view;
  a.state_batch_indices = index.data();
  try {
    make_selective_step_problem(a);
    ADD_FAILURE() << "host pool states accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("state_batch_indices"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
