// The CUDA chunked RWKV-7: what it refuses (checked on the host, no GPU needed), and, on a GPU, its outputs and
// final states against the double-precision reference and the CPU chunk run on the same host data, through the
// public entry (chunk_rwkv7), so the device branch and the launch are both exercised. Compiled by g++ in every
// CUDA build: no CUDA headers here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_gpu_run.h"
#include "kernels/linear/rwkv7/problem.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/rwkv7/rwkv7_testing.h"
#include "testing/device_test_util.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::OnDevice;
using testing::Rwkv7Case;
using testing::Rwkv7Inputs;
using testing::rwkv7_case;

TEST(CudaRwkv7Chunk, RefusesWhatItDoesNotDo) {
  auto check = [](const Rwkv7Case& c, int64_t chunk, auto&& edit) {
    testing::check_rwkv7_problem(c, edit, [&](const Rwkv7Problem& p) { check_cuda_rwkv7_chunk(p, chunk); });
  };
  auto nothing = [](Rwkv7Problem&) {};
  EXPECT_NO_THROW(check(rwkv7_case(1, 3, 1, 128, 128), 64, nothing));
  testing::expect_error<ArgumentError>([&] { check(rwkv7_case(1, 3, 1, 144, 8), 64, nothing); },
                                       "r: K=144 exceeds 128");
  testing::expect_error<ArgumentError>([&] { check(rwkv7_case(1, 3, 1, 16, 130), 64, nothing); },
                                       "v: V=130 exceeds 128");
  testing::expect_error<ArgumentError>(
      [&] { check(rwkv7_case(1, 3, 1, 16, 16), 128, nothing); },
      "chunk_size: the CUDA chunked kernels run chunks of 16, 32 or 64 tokens, got 128");
  Rwkv7Case bf16 = rwkv7_case(1, 2, 1, 16, 16);
  bf16.dtype = DType::bf16;
  testing::expect_error<ArgumentError>(
      [&] { check(bf16, 64, [](Rwkv7Problem& p) { p.b = static_cast<const char*>(p.b) + 1; }); },
      "b: data must be aligned");
}

#if ATTNZOO_WITH_CUDA

// Runs case `c` through chunk_rwkv7 on the GPU (final state in place over the initial one when `in_place`;
// otherwise into a separate buffer that starts as NaN bytes, so an element the kernels forget fails).
void check(const Rwkv7Case& c, int64_t chunk, bool in_place, uint64_t seed) {
  SCOPED_TRACE(c.label() + " chunk=" + std::to_string(chunk) + (in_place ? " in-place" : ""));
  const Rwkv7Inputs in(c, seed);
  auto entry = [&](const Rwkv7Args& a) { chunk_rwkv7(a, chunk); };
  const testing::Rwkv7Outputs ref = testing::rwkv7_reference_outputs(c, in),
                              cpu = testing::rwkv7_host_outputs(c, in, entry),
                              gpu = testing::rwkv7_gpu_outputs(c, in, in_place, entry);
  const double tol = testing::rwkv7_chunk_cuda_tolerance();
  EXPECT_LE(testing::relative_rms(gpu.o, ref.o), tol);
  EXPECT_LE(testing::relative_rms(gpu.s, ref.s), tol);
  EXPECT_LE(testing::relative_rms(gpu.o, cpu.o), tol);
  EXPECT_LE(testing::relative_rms(gpu.s, cpu.s), tol);
}

// RWKV-7 1.5B's prefill shape (32 heads of 64 x 64) over many chunks at every chunk size, and 128 x 128 heads.
TEST(CudaRwkv7Chunk, MatchesModelShapes) {
  REQUIRE_GPU();
  for (int64_t chunk : {16, 32, 64}) check(rwkv7_case(2, 300, 32, 64, 64), chunk, chunk == 64, 100 + uint64_t(chunk));
  check(rwkv7_case(1, 257, 4, 128, 128), 32, false, 110);
  check(rwkv7_case(1, 257, 4, 128, 128), 64, true, 111);  // ~158 KB of shared memory per block
}

// Packed sequences of 1, 37, 0, 79, 33 and 5 tokens, with and without an initial state; K = 48, V = 40 leave
// tiles part empty.
TEST(CudaRwkv7Chunk, MatchesRaggedPackedSequences) {
  REQUIRE_GPU();
  for (bool in_place : {true, false})
    for (bool init : {true, false}) {
      Rwkv7Case c = rwkv7_case(1, 155, 2, 48, 40, init);
      c.cu_seqlens = {0, 1, 38, 38, 117, 150, 155};
      check(c, 64, in_place, 200);
    }
  check(rwkv7_case(3, 1, 2, 64, 64), 64, true, 210);  // one token each
  check(rwkv7_case(2, 9, 2, 64, 64), 64, false, 211);  // less than a chunk
}

TEST(CudaRwkv7Chunk, MatchesDecaysAndDtypes) {
  REQUIRE_GPU();
  uint64_t seed = 300;
  for (auto [lo, hi] : {std::pair{-8.f, -7.f}, {-21.f, -19.f}, {-20.f, 0.f}, {-0.05f, 0.f}}) {
    Rwkv7Case c = rwkv7_case(2, 200, 4, 64, 64);
    c.w_min = lo, c.w_max = hi;
    check(c, 64, true, seed++);
  }
  Rwkv7Case c = rwkv7_case(2, 100, 4, 64, 64);
  c.dtype = DType::bf16;
  check(c, 64, true, 400);
  c.out_dtype = DType::bf16;
  check(c, 32, false, 401);
  c.dtype = c.out_dtype = DType::f16, c.B = 1, c.cu_seqlens = {0, 30, 100};
  check(c, 64, true, 402);
}

// States in a pool's slots (ssm_state_indices, as the GPU runner's prefill passes them): permuted slots of a slab
// with room around each state, a pad among the sequences; against the CPU chunk on the dense states, the pad's
// output rows still NaN bytes and every float of the slab outside the named states unchanged.
TEST(CudaRwkv7Chunk, ReadsAndWritesPoolSlots) {
  REQUIRE_GPU();
  Rwkv7Case c = rwkv7_case(1, 155, 2, 64, 64);
  c.cu_seqlens = {0, 1, 38, 38, 117, 150, 155};
  const std::vector<int32_t> index{4, 0, 6, -1, 2, 5};
  const int64_t N = c.nseq(), slots = 8, lead = 3, elems = c.H * c.K * c.V, stride = lead + elems + 7;
  const Rwkv7Inputs in(c, 500);
  Rwkv7Args a = in.args(c);
  HostTensor o_cpu(DType::f32, {c.B, c.T, c.H, c.V}, 0, 0.f), s_cpu(DType::f32, {N, c.H, c.K, c.V}, 0, 0.f);
  a.o = o_cpu.view, a.final_state = s_cpu.view;
  chunk_rwkv7(a, 64);

  HostTensor slab(DType::f32, {slots * stride}, 501), o(DType::f32, {c.B, c.T, c.H, c.V}, 0, 0.f);
  auto* slab_f = static_cast<float*>(slab.view.data);
  const auto* h0 = static_cast<const float*>(in.h0.view.data);
  for (int64_t n = 0; n < N; ++n)
    if (index[size_t(n)] >= 0) std::memcpy(slab_f + index[size_t(n)] * stride + lead, h0 + n * elems, elems * 4);
  const std::vector<float> before(slab_f, slab_f + slots * stride);
  testing::fill_nan_bytes(o);
  const OnDevice r(in.r), w(in.w), k(in.k), v(in.v), ad(in.a), bd(in.b), od(o), slab_d(slab);
  DeviceBuffer idx(Device::cuda(), index.size() * 4);
  idx.upload(index.data(), index.size() * 4);
  a.r = r.view, a.w = w.view, a.k = k.view, a.v = v.view, a.a = ad.view, a.b = bd.view, a.o = od.view;
  TensorView pool = TensorView::contiguous(static_cast<float*>(slab_d.view.data) + lead, DType::f32,
                                           {slots, c.H, c.K, c.V});
  pool.strides[0] = stride;
  pool.device = Device::cuda();
  a.initial_state = a.final_state = pool;
  a.ssm_state_indices = idx.as<int32_t>();
  chunk_rwkv7(a, 64);
  synchronize(current_stream());
  od.download(o), slab_d.download(slab);

  const double tol = testing::rwkv7_chunk_cuda_tolerance();
  const int64_t width = c.H * c.V;
  double err = 0, ref = 0, serr = 0, sref = 0;
  int64_t pad_written = 0, changed = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t e = c.cu_seqlens[size_t(n)] * width; e < c.cu_seqlens[size_t(n) + 1] * width; ++e) {
      if (index[size_t(n)] < 0) {
        uint32_t bits;
        std::memcpy(&bits, static_cast<const float*>(o.view.data) + e, 4);
        pad_written += bits != 0xffffffffu;
        continue;
      }
      const double g = static_cast<const float*>(o.view.data)[e], want = o_cpu.at(e);
      err += (g - want) * (g - want), ref += want * want;
    }
  std::vector<char> named(size_t(slots * stride), 0);
  for (int64_t n = 0; n < N; ++n) {
    if (index[size_t(n)] < 0) continue;
    for (int64_t i = 0; i < elems; ++i) {
      const int64_t at = index[size_t(n)] * stride + lead + i;
      named[size_t(at)] = 1;
      const double g = slab_f[at], want = s_cpu.at(n * elems + i);
      serr += (g - want) * (g - want), sref += want * want;
    }
  }
  for (int64_t i = 0; i < slots * stride; ++i)
    changed += !named[size_t(i)] && std::memcmp(&slab_f[i], &before[size_t(i)], 4) != 0;
  EXPECT_LE(std::sqrt(err / ref), tol) << "the real sequences' outputs";
  EXPECT_LE(std::sqrt(serr / sref), tol) << "the named slots' new states";
  EXPECT_EQ(pad_written, 0) << "output floats of the pad written";
  EXPECT_EQ(changed, 0) << "floats of the slab the prefill must not touch";
}

#endif

}  // namespace
}  // namespace attnzoo
