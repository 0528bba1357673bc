// The prefill kernels on states addressed in a pool (ssm_state_indices / state_batch_indices / conv_state_indices:
// the GPU runners' prefills, device_conv_state.h) under the CTA emulator: the delta rule's chunk (Gated DeltaNet,
// KDA, DeltaNet), the gated linear chunk (simple GLA / lightning, GLA, retention), Mamba-2's chunked SSD and its
// varlen recurrence, Mamba-1's selective scan and the short conv's prefill. A
// ragged packed batch whose states are scattered, permuted rows of a slab with a row stride of its own (room before
// and after each state, as a pool slot's [conv tail | state] has) and pads (index -1). Against the same kernels on
// the dense states gathered: the real sequences' outputs and new states bit for bit (only the first read and the
// last write of each state moved), and every byte the prefill must not touch unchanged: the other slots, the rest
// of each named slot, the pads' slots and their output rows (NaN bytes, which stay NaN bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/linear/common/cuda/delta_chunk_cuda.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/gla_chunk_cuda.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_testing.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_testing.h"
#include "kernels/linear/mamba/cuda/selective_scan_cuda.h"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba/problem.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_chunk_launch.h"
#include "kernels/linear/mamba2/cuda/mamba2_cuda_testing.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_cuda.h"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/mamba2/problem.h"
#include "kernels/linear/short_conv/conv_problem.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"
#include "testing/cuda_emulation/chunk_plan_run.h"
#include "testing/cuda_emulation/conv_prefill_stages.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/delta_chunk_stages.h"
#include "testing/cuda_emulation/device_tensor.h"
#include "testing/cuda_emulation/packed_offsets.h"
#include "testing/cuda_emulation/gla_chunk_stages.h"
#include "testing/cuda_emulation/gpu_inputs.h"
#include "testing/cuda_emulation/mamba2_recurrent_stages.h"
#include "testing/cuda_emulation/pool_states.h"
#include "testing/cuda_emulation/selective_scan_stages.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceTensor;
using cuda_emulation::Indices;
using cuda_emulation::Pool;
using cuda_emulation::expect_sequence_rows;
using cuda_emulation::on_device;
using cuda_emulation::on_gpu;
using cuda_emulation::pool_view;
using testing::HostTensor;

// ---- The delta rule's chunk: delta_chunk_{intra,state,output}.cuh ----

// One packed prefill of index.size() sequences (cu_seqlens) with gate `gate` on pool slots `index` of `slots`.
void check_delta(DeltaGate gate, int64_t K, int64_t V, const std::vector<int32_t>& cu_seqlens,
                 const std::vector<int32_t>& index, int64_t slots, int64_t chunk, DType dtype, uint64_t seed) {
  testing::DeltaCase c;
  c.B = 1, c.T = cu_seqlens.back(), c.H = 1, c.HV = 2, c.K = K, c.V = V, c.gate = gate, c.chunk_size = chunk;
  c.initial_state = true, c.l2norm = true, c.dtype = c.out_dtype = dtype, c.cu_seqlens = cu_seqlens;
  SCOPED_TRACE(c.label() + " gate=" + std::to_string(int(gate)) + " slots=" + std::to_string(slots));
  const testing::DeltaInputs in(c, seed);
  const int64_t N = in.N;
  const cuda_emulation::DeltaGpuInputs inputs(in);
  const DeviceTensor init = on_device(in.init);
  auto run = [&](const DeviceTensor& o, TensorView initial, TensorView final_state, const int32_t* indices) {
    DeltaArgs a = inputs.args(c, in, o);
    a.initial_state = initial, a.final_state = final_state, a.ssm_state_indices = indices;
    const DeltaProblem p = make_delta_problem(a, gate);
    ASSERT_NO_THROW(check_cuda_delta_chunk(p));
    cuda_delta_chunk::ChunkLaunch l = cuda_delta_chunk::plan_delta_chunk(p);
    ASSERT_FALSE(l.empty);
    cuda_emulation::run_chunk_plan(
        l, seed, [&](auto cs) { cuda_emulation::run_delta_chunk_stages<decltype(cs)::value>(l); });
  };
  // Dense: every sequence from its row of init, into a separate final state.
  const DeviceTensor o_dense(dtype, {1, c.T, c.HV, V}, 0), s_dense(DType::f32, {N, c.HV, K, V}, 0);
  run(o_dense, on_gpu(init.device_view()), on_gpu(s_dense.device_view()), nullptr);
  // In the pool's slots.
  Pool pool(slots, 7, c.HV * K * V, 5, seed + 100);
  const TensorView states = pool_view(pool, index, in.init.view.data, {c.HV, K, V});
  const Indices idx(index);
  const DeviceTensor o(dtype, {1, c.T, c.HV, V}, 0);
  run(o, states, states, idx.data());
  expect_sequence_rows(index, cu_seqlens, o, o_dense, c.HV * V);
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

// Sequences of 1, 37, 0, 79 and 33 tokens (one empty: its slot gets its initial state back) on scattered permuted
// slots with a pad among them; V = 48 (a part-empty last state slice), each gate, chunk sizes 16 and 64, bf16.
TEST(EmulatedPoolStateChunks, DeltaChunkInPlace) {
  const std::vector<int32_t> cu{0, 1, 38, 38, 117, 150};
  uint64_t seed = 700;
  for (DeltaGate gate : {DeltaGate::none, DeltaGate::head, DeltaGate::channel}) {
    check_delta(gate, 32, 48, cu, {6, 0, 3, -1, 8}, 10, 16, DType::f32, seed++);
    check_delta(gate, 64, 32, cu, {2, 4, 1, 0, 3}, 5, 64, DType::bf16, seed++);
  }
}

// ---- The gated linear chunk: gla_chunk_{prep,state,output}.cuh ----

void check_gla(testing::GlaDeviceCase c, const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& index,
               int64_t slots, uint64_t seed) {
  c.B = 1, c.T = cu_seqlens.back(), c.cu_seqlens = cu_seqlens, c.initial_state = true;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots));
  const testing::GlaInputs in(c, seed);
  const int64_t N = in.N;
  const cuda_emulation::GlaGpuInputs inputs(in);
  const DeviceTensor init = on_device(in.init);
  auto run = [&](const DeviceTensor& o, TensorView initial, TensorView final_state, const int32_t* indices) {
    testing::GlaEntryArgs a = inputs.args(c, in, o);
    a.opts.initial_state = initial, a.opts.final_state = final_state, a.opts.ssm_state_indices = indices;
    std::vector<float> retention_gamma;
    const GlaProblem p = testing::gla_family_problem(c.family, a, retention_gamma);
    ASSERT_NO_THROW(check_cuda_gla_chunk(p));
    cuda_gla_chunk::ChunkLaunch l = cuda_gla_chunk::plan_gla_chunk(p);
    ASSERT_FALSE(l.empty);
    cuda_emulation::run_chunk_plan(
        l, seed, [&](auto cs) { cuda_emulation::run_gla_chunk_stages<decltype(cs)::value>(l); });
  };
  const DeviceTensor o_dense(c.out_dtype, {1, c.T, c.HV, c.V}, 0), s_dense(DType::f32, {N, c.HV, c.K, c.V}, 0);
  run(o_dense, on_gpu(init.device_view()), on_gpu(s_dense.device_view()), nullptr);
  Pool pool(slots, 5, c.HV * c.K * c.V, 11, seed + 100);
  const TensorView states = pool_view(pool, index, in.init.view.data, {c.HV, c.K, c.V});
  const Indices idx(index);
  const DeviceTensor o(c.out_dtype, {1, c.T, c.HV, c.V}, 0);
  run(o, states, states, idx.data());
  expect_sequence_rows(index, cu_seqlens, o, o_dense, c.HV * c.V);
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

// Every family the chunked kernels run (one feature map for linear attention), then MiniMax's lightning attention
// (g_gamma alone on the device, K = V = head_dim) as the runner calls it.
TEST(EmulatedPoolStateChunks, GlaChunkInPlace) {
  const std::vector<int32_t> cu{0, 1, 38, 38, 90};
  testing::GlaDeviceCase shape;
  shape.H = 1, shape.HV = 2, shape.K = 48, shape.V = 40, shape.chunk_size = 32;
  uint64_t seed = 800;
  for (const testing::GlaDeviceCase& c : testing::gla_family_cases(shape, {{FeatureMap::relu, false}}))
    check_gla(c, cu, {5, -1, 0, 2}, 7, seed++);
  testing::GlaDeviceCase lightning;
  lightning.family = testing::GlaFamily::simple_gla, lightning.g_gamma = true, lightning.data_gate = false;
  lightning.H = lightning.HV = 2, lightning.K = lightning.V = 64, lightning.dtype = DType::bf16;
  check_gla(lightning, {0, 70, 71}, {1, 0}, 2, seed++);
  check_gla(lightning, {0, 3, 70, 100}, {2, -1, 4}, 5, seed++);
}

// ---- Mamba-2's chunked SSD: the gated linear chunk on mamba2_chunk_launch's plan ----

// The chunked SSD or (`recurrent`) the varlen recurrence the runner takes for short prefills and N or P > 128.
void check_mamba2(testing::Mamba2DeviceCase c, const std::vector<int32_t>& index, int64_t slots, bool recurrent,
                  uint64_t seed) {
  c.with_h0 = true;
  SCOPED_TRACE(c.label() + " slots=" + std::to_string(slots) + (recurrent ? " recurrent" : " chunked"));
  const testing::Mamba2DeviceInputs in(c, seed);
  const DeviceTensor xd = on_device(in.x), dtd = on_device(in.dt), Ad = on_device(in.A), Bd = on_device(in.B),
                     Cd = on_device(in.C), Dd = on_device(in.D), zd = on_device(in.z), biasd = on_device(in.bias),
                     init = on_device(in.h0);
  auto run = [&](const DeviceTensor& y, TensorView initial, TensorView final_state, const int32_t* indices) {
    Mamba2Args a = in.args(c);
    a.x = on_gpu(xd.device_view()), a.dt = on_gpu(dtd.device_view()), a.A = on_gpu(Ad.device_view());
    a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(Dd.device_view());
    a.dt_bias = on_gpu(biasd.device_view()), a.y = on_gpu(y.device_view());
    a.z = c.with_z ? on_gpu(zd.device_view()) : TensorView{};
    a.initial_state = initial, a.final_state = final_state, a.state_batch_indices = indices;
    const Mamba2Problem p = make_mamba2_problem(a);
    if (recurrent) {
      ASSERT_NO_THROW(check_cuda_mamba2_recurrent(p));
      cuda_mamba2::RecurrentLaunch l = cuda_mamba2::plan_mamba2_recurrent(p);
      ASSERT_FALSE(l.empty);
      cuda_emulation::run_mamba2_recurrent(l, seed);
      return;
    }
    ASSERT_TRUE(cuda_mamba2_chunk_fits(p));
    ASSERT_NO_THROW(check_cuda_mamba2_chunk(p));
    cuda_gla_chunk::ChunkLaunch l = cuda_mamba2::plan_mamba2_chunk(p);
    ASSERT_FALSE(l.empty);
    cuda_emulation::run_chunk_plan(
        l, seed, [&](auto cs) { cuda_emulation::run_gla_chunk_stages<decltype(cs)::value>(l); });
  };
  const DeviceTensor y_dense(c.out_dtype, {c.B, c.T, c.H, c.P}, 0), s_dense(DType::f32, {c.nseq(), c.H, c.P, c.N}, 0);
  run(y_dense, on_gpu(init.device_view()), on_gpu(s_dense.device_view()), nullptr);
  Pool pool(slots, 5, c.H * c.P * c.N, 3, seed + 100);
  const TensorView states = pool_view(pool, index, in.h0.view.data, {c.H, c.P, c.N});
  const Indices idx(index);
  const DeviceTensor y(c.out_dtype, {c.B, c.T, c.H, c.P}, 0);
  run(y, states, states, idx.data());
  expect_sequence_rows(index, c.cu, y, y_dense, c.H * c.P);
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

// Packed sequences with an empty one and a pad, two groups of two heads, D per head with z, softplus; then
// Mamba-2 2.7B's head (P = 64, N = 128) in bf16 over a chunk and a tail.
TEST(EmulatedPoolStateChunks, Mamba2ChunkInPlace) {
  testing::Mamba2DeviceCase c;
  c.B = 1, c.T = 120, c.H = 4, c.P = 32, c.G = 2, c.N = 64, c.chunk = 32;
  c.cu = {0, 1, 38, 38, 120};
  check_mamba2(c, {3, 0, -1, 5}, 6, false, 950);
  check_mamba2(c, {3, 0, -1, 5}, 6, true, 951);
  c.H = 2, c.P = 64, c.G = 1, c.N = 128, c.chunk = 64, c.T = 100, c.cu = {0, 30, 100};
  c.dtype = c.out_dtype = DType::bf16;
  check_mamba2(c, {1, 0}, 2, false, 952);
  c.N = 256;  // Falcon-H1's state: the recurrent kernel's
  check_mamba2(c, {0, -1}, 2, true, 953);
}

// ---- Mamba-1's selective scan: selective_scan_kernel.cuh, channel-major [1, D, T] activations ----

void check_scan(int64_t D, int64_t N, const std::vector<int32_t>& cu_seqlens, const std::vector<int32_t>& index,
                int64_t slots, uint64_t seed) {
  SCOPED_TRACE("D=" + std::to_string(D) + " N=" + std::to_string(N) + " slots=" + std::to_string(slots));
  const int64_t T = cu_seqlens.back(), S = int64_t(index.size());
  const HostTensor u(DType::f32, {1, D, T}, seed), delta(DType::f32, {1, D, T}, seed + 1, 0.5f),
      A(DType::f32, {D, N}, seed + 2, 0.5f), Bm(DType::f32, {1, N, T}, seed + 3, 0.5f),
      Cm(DType::f32, {1, N, T}, seed + 4, 0.5f), skip(DType::f32, {D}, seed + 5), z(DType::f32, {1, D, T}, seed + 6),
      bias(DType::f32, {D}, seed + 7, 0.3f), h0(DType::f32, {S, D, N}, seed + 8);
  for (int64_t i = 0; i < A.numel(); ++i) A.view.ptr<float>()[i] = -std::fabs(A.at(i));
  const DeviceTensor ud = on_device(u), deltad = on_device(delta), Ad = on_device(A), Bd = on_device(Bm),
                     Cd = on_device(Cm), skipd = on_device(skip), zd = on_device(z), biasd = on_device(bias),
                     init = on_device(h0);
  auto run = [&](const DeviceTensor& out, TensorView initial, TensorView final_state, const int32_t* indices) {
    SelectiveScanArgs a;
    a.u = on_gpu(ud.device_view()), a.delta = on_gpu(deltad.device_view()), a.A = on_gpu(Ad.device_view());
    a.B = on_gpu(Bd.device_view()), a.C = on_gpu(Cd.device_view()), a.D = on_gpu(skipd.device_view());
    a.z = on_gpu(zd.device_view()), a.delta_bias = on_gpu(biasd.device_view()), a.delta_softplus = true;
    a.cu_seqlens = cu_seqlens.data(), a.cu_seqlens_len = int64_t(cu_seqlens.size());
    a.out = on_gpu(out.device_view());
    a.initial_state = initial, a.final_state = final_state, a.state_batch_indices = indices;
    const SelectiveScanProblem p = make_selective_scan_problem(a);
    ASSERT_NO_THROW(check_cuda_selective_scan(p));
    cuda_mamba::ScanLaunch l = cuda_mamba::plan_selective_scan(p);
    ASSERT_FALSE(l.empty);
    cuda_emulation::run_selective_scan(l, seed);
  };
  const DeviceTensor out_dense(DType::f32, {1, D, T}, 0), s_dense(DType::f32, {S, D, N}, 0);
  run(out_dense, on_gpu(init.device_view()), on_gpu(s_dense.device_view()), nullptr);
  Pool pool(slots, 4, D * N, 6, seed + 100);
  const TensorView states = pool_view(pool, index, h0.view.data, {D, N});
  const Indices idx(index);
  const DeviceTensor out(DType::f32, {1, D, T}, 0);
  run(out, states, states, idx.data());
  // Channel-major: sequence n owns columns [cu[n], cu[n + 1]) of every channel's row.
  const auto* got = static_cast<const uint32_t*>(static_cast<const void*>(out.device.data()));
  const auto* want = static_cast<const uint32_t*>(static_cast<const void*>(out_dense.device.data()));
  int64_t differing = 0, pad_written = 0;
  for (int64_t d = 0; d < D; ++d)
    for (size_t n = 0; n < index.size(); ++n)
      for (int64_t t = cu_seqlens[n]; t < cu_seqlens[n + 1]; ++t) {
        const size_t at = size_t(d * T + t);
        if (index[n] < 0)
          pad_written += got[at] != 0xffffffffu;
        else
          differing += got[at] != want[at];
      }
  EXPECT_EQ(differing, 0) << "outputs of the real sequences that differ from the dense run's";
  EXPECT_EQ(pad_written, 0) << "outputs of the pads written";
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

// Jamba's / Mamba's N = 16 with D = 40 (a part-empty last CTA), then N = 60 (four entries a lane, part empty).
TEST(EmulatedPoolStateChunks, SelectiveScanInPlace) {
  check_scan(40, 16, {0, 1, 38, 38, 90}, {4, -1, 0, 2}, 6, 960);
  check_scan(24, 60, {0, 20, 21}, {1, 0}, 2, 961);
}

// ---- The short conv's prefill: conv_prefill_kernel.cuh ----

void check_conv(int64_t D, int64_t W, int64_t S, const std::vector<int32_t>& cu_seqlens,
                const std::vector<int32_t>& index, int64_t slots, uint64_t seed) {
  SCOPED_TRACE("D=" + std::to_string(D) + " W=" + std::to_string(W) + " S=" + std::to_string(S) +
               " slots=" + std::to_string(slots));
  const int64_t N = int64_t(index.size()), T = cu_seqlens.back();
  const HostTensor x(DType::bf16, {1, T, D}, seed), w(DType::bf16, {D, W}, seed + 1, 0.5f),
      b(DType::bf16, {D}, seed + 2), h0(DType::f32, {N, D, S}, seed + 3);
  const DeviceTensor xd = on_device(x), wd = on_device(w), bd = on_device(b), init = on_device(h0);
  auto run = [&](const DeviceTensor& y, TensorView initial, TensorView final_state, const int32_t* indices) {
    CausalConv1dOptions o;
    o.bias = on_gpu(bd.device_view());
    o.initial_state = initial, o.final_state = final_state, o.conv_state_indices = indices;
    o.activation = ConvActivation::silu;
    o.cu_seqlens = cu_seqlens.data(), o.cu_seqlens_len = int64_t(cu_seqlens.size());
    const ConvProblem p =
        make_conv_problem(on_gpu(xd.device_view()), on_gpu(wd.device_view()), on_gpu(y.device_view()), o);
    ASSERT_NO_THROW(check_cuda_conv_prefill(p));
    cuda_conv_prefill::PrefillLaunch l = cuda_conv_prefill::plan_conv_prefill(p);
    ASSERT_FALSE(l.empty);
    ASSERT_GT(l.state_grid, 0u);
    cuda_emulation::run_conv_prefill(l, seed);
  };
  const DeviceTensor y_dense(DType::bf16, {1, T, D}, 0), s_dense(DType::f32, {N, D, S}, 0);
  run(y_dense, on_gpu(init.device_view()), on_gpu(s_dense.device_view()), nullptr);
  Pool pool(slots, 3, D * S, 9, seed + 100);
  const TensorView states = pool_view(pool, index, h0.view.data, {D, S});
  const Indices idx(index);
  const DeviceTensor y(DType::bf16, {1, T, D}, 0);
  run(y, states, states, idx.data());
  expect_sequence_rows(index, cu_seqlens, y, y_dense, D);
  pool.expect(index, reinterpret_cast<const float*>(s_dense.device.data()), 0.0);
}

// Sequences of 1, 69 (two tiles), 0, 2 (shorter than the state: the tail mixes the initial state and the inputs)
// and 70 tokens; D = 200 leaves the second channel block part empty; W = 4 with its causal-conv1d tail and a longer
// state, W = 9 (the 16-wide window).
TEST(EmulatedPoolStateChunks, ConvPrefillInPlace) {
  const std::vector<int32_t> cu{0, 1, 70, 70, 72, 142};
  check_conv(200, 4, 3, cu, {4, 0, -1, 7, 2}, 9, 900);
  check_conv(64, 4, 6, cu, {1, 3, 0, 2, 4}, 5, 901);
  check_conv(40, 9, 8, {0, 5, 40}, {-1, 1}, 2, 902);
}

// What the entries refuse with pool states, by name: host tensors (the CPU entries take dense states), and the
// conv's states not one pool tensor.
TEST(EmulatedPoolStateChunks, Refusals) {
  const HostTensor x(DType::f32, {1, 8, 16}, 1), w(DType::f32, {16, 4}, 2), pool(DType::f32, {3, 16, 3}, 3),
      other(DType::f32, {3, 16, 3}, 4);
  HostTensor y(DType::f32, {1, 8, 16}, 0, 0.f);
  const std::vector<int32_t> cu{0, 5, 8}, index{2, 0};
  CausalConv1dOptions o;
  o.initial_state = o.final_state = pool.view;
  o.cu_seqlens = cu.data(), o.cu_seqlens_len = 3, o.conv_state_indices = index.data();
  testing::expect_refusal([&] { causal_conv1d(x.view, w.view, y.view, o); }, "conv_state_indices: addresses device");
  auto gpu = [&](CausalConv1dOptions opts) {
    opts.initial_state = on_gpu(opts.initial_state), opts.final_state = on_gpu(opts.final_state);
    return make_conv_problem(on_gpu(x.view), on_gpu(w.view), on_gpu(y.view), opts);
  };
  EXPECT_NO_THROW(gpu(o));
  CausalConv1dOptions apart = o;
  apart.final_state = other.view;
  testing::expect_refusal([&] { gpu(apart); }, "final_state: with conv_state_indices must be initial_state");
  apart = o;
  apart.initial_state = apart.final_state = TensorView::contiguous(pool.view.data, DType::f32, {3, 16, 2});
  testing::expect_refusal([&] { gpu(apart); }, "final_state: expected [2, 16, S] with S >= 3");
}

}  // namespace
}  // namespace attnzoo
