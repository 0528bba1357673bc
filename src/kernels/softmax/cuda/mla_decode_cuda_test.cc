// The CUDA MLA decode through the public mla_decode: what it refuses on a device (checked on the host with views
// that only claim a GPU), and on a GPU (skipped without one) its outputs at DeepSeek-V3's shapes against the
// double-precision reference on short contexts and against the CPU mla_decode on contexts up to 4k, over paged
// caches on shuffled blocks (NaN in every row no sequence owns) and contiguous ones.
// Compiled by g++ in every build: no CUDA headers here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/softmax/mla.h"
#include "testing/device_test_util.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;
using testing::on_gpu;

struct Dims {
  int64_t H, dn, dr, dv, r;
};

#if ATTNZOO_WITH_CUDA

constexpr Dims kDeepSeekV3{128, 128, 64, 128, 512};

TEST(CudaMlaDecode, RefusesWhatItDoesNotDoByName) {
  SKIP_WITH_A_REAL_GPU();
  const Dims d{16, 16, 16, 16, 64};
  const std::vector<int32_t> lens = {5, 9};
  HostTensor w(DType::bf16, {d.H * (d.dn + d.dv), d.r}, 1), latent(DType::bf16, {2, 16, d.r + d.dr}, 2);
  HostTensor q(DType::bf16, {2, 1, d.H, d.dn + d.dr}, 3), out(DType::f32, {2, 1, d.H, d.dv}, 0, 0.f);
  HostTensor q2(DType::bf16, {2, 2, d.H, d.dn + d.dr}, 3), out2(DType::f32, {2, 2, d.H, d.dv}, 0, 0.f);
  const MlaWeights weights{on_gpu(w.view), d.H, d.dn, d.dr, d.dv, d.r};
  const LatentCacheView cache{on_gpu(latent.view), lens.data()};

  // Speculative verification (Tq > 1) and packed queries stay on the CPU for now.
  testing::expect_error<ArgumentError>(
      [&] { mla_decode(on_gpu(q2.view), cache, weights, on_gpu(out2.view), {}); },
      "q: mla_decode on CUDA takes one new token per sequence");
  HostTensor packed_q(DType::bf16, {2, d.H, d.dn + d.dr}, 3), packed_out(DType::f32, {2, d.H, d.dv}, 0, 0.f);
  const std::vector<int32_t> cu = {0, 1, 2};
  testing::expect_error<ArgumentError>(
      [&] { mla_decode(on_gpu(packed_q.view), cache, weights, on_gpu(packed_out.view), {}, {cu.data(), nullptr, 2}); },
      "cu_seqlens: packed (varlen) queries");

  // Quantized latent caches, before their scales are read.
  HostTensor latent8(DType::i8, {2, 16, d.r + d.dr}, 0, 0.f), scale(DType::f32, {2, 16}, 0, 0.f);
  LatentCacheView quantized{on_gpu(latent8.view), lens.data()};
  quantized.scale = on_gpu(scale.view);
  testing::expect_error<DTypeError>([&] { mla_decode(on_gpu(q.view), quantized, weights, on_gpu(out.view), {}); },
                                    "latent_cache: int8 latent caches run on the CPU only");

  // Every tensor on q's device.
  testing::expect_error<ArgumentError>(
      [&] { mla_decode(on_gpu(q.view), {latent.view, lens.data()}, weights, on_gpu(out.view), {}); },
      "latent_cache: lives on cpu");
  testing::expect_error<ArgumentError>(
      [&] { mla_decode(on_gpu(q.view), cache, {w.view, d.H, d.dn, d.dr, d.dv, d.r}, on_gpu(out.view), {}); },
      "w_kv_b: lives on cpu");
  testing::expect_error<ArgumentError>(
      [&] { mla_decode(on_gpu(q.view), cache, weights, on_gpu(out.view, 1), {}); }, "out: lives on cuda:1");

  // Ranks past what a thread's accumulator holds.
  const Dims wide{16, 16, 16, 16, 576};
  HostTensor w_wide(DType::bf16, {wide.H * (wide.dn + wide.dv), wide.r}, 1);
  HostTensor latent_wide(DType::bf16, {2, 16, wide.r + wide.dr}, 2);
  testing::expect_error<ArgumentError>(
      [&] {
        mla_decode(on_gpu(q.view), {on_gpu(latent_wide.view), lens.data()},
                   {on_gpu(w_wide.view), wide.H, wide.dn, wide.dr, wide.dv, wide.r}, on_gpu(out.view), {});
      },
      "kv_lora_rank: at most 512 on CUDA");

  // The other MLA entries still run on the CPU only.
  testing::expect_error<ArgumentError>(
      [&] { mla_decode_reference(on_gpu(q.view), cache, weights, on_gpu(out.view), {}); }, "runs on the CPU only");
  testing::expect_error<ArgumentError>(
      [&] { mla_prefill(on_gpu(q2.view), cache, weights, on_gpu(out2.view), {}); }, "runs on the CPU only");
}

struct Case {
  Dims d = kDeepSeekV3;
  std::vector<int32_t> lens;
  int64_t block_size = 64;  // 0: contiguous
  DType cache = DType::bf16, q = DType::bf16, w = DType::bf16, out = DType::bf16;
  bool reference = true;    // else compare against the CPU mla_decode (the reference's expansion is slow)
};

std::string describe(const Case& c) {
  std::ostringstream s;
  s << "H=" << c.d.H << " r=" << c.d.r << " dr=" << c.d.dr << " bs=" << c.block_size << " cache="
    << dtype_name(c.cache) << " q=" << dtype_name(c.q) << " out=" << dtype_name(c.out) << " lens=";
  for (int32_t l : c.lens) s << l << ",";
  return s.str();
}

void check_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(describe(c));
  const Dims& d = c.d;
  const int64_t B = int64_t(c.lens.size()), L = d.r + d.dr;
  const testing::LatentTestCache lc = testing::latent_test_cache(c.cache, c.lens, L, c.block_size, seed);
  const HostTensor& latent = lc.latent;
  const LatentCacheView cache = lc.view(c.lens);
  const HostTensor w(c.w, {d.H * (d.dn + d.dv), d.r}, seed + 2, 1.f / std::sqrt(float(d.r)));
  const HostTensor q(c.q, {B, 1, d.H, d.dn + d.dr}, seed + 3);
  const MlaWeights weights{w.view, d.H, d.dn, d.dr, d.dv, d.r};
  HostTensor want(DType::f32, {B, 1, d.H, d.dv}, 0, 0.f), got(c.out, {B, 1, d.H, d.dv}, 0, 0.f);
  if (c.reference) mla_decode_reference(q.view, cache, weights, want.view, {});
  else mla_decode(q.view, cache, weights, want.view, {});

  testing::fill_nan_bytes(got);  // a row the kernels forget to write fails
  const testing::OnDevice dq(q), dw(w), dlat(latent);
  testing::OnDevice dout(got);
  LatentCacheView device_cache = cache;
  device_cache.latent = dlat.view;
  mla_decode(dq.view, device_cache, {dw.view, d.H, d.dn, d.dr, d.dv, d.r}, dout.view, {});
  synchronize(current_stream());
  dout.download(got);

  double err = 0, top = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.at(i), x = want.at(i);
    err = std::isfinite(g) ? std::max(err, std::fabs(g - x)) : INFINITY;
    top = std::max(top, std::fabs(x));
  }
  // A bf16 / f16 cache takes the tensor cores, which round q_lat and the softmax weights to its type (2^-9
  // relative for bf16, 2^-11 for f16); an f32 cache or an odd rank stays in f32. A bf16 / f16 output adds its
  // own rounding. The CPU path's own f32 error is far below all of these.
  const bool tensor_cores = c.cache != DType::f32 && d.r % 64 == 0 && d.dr % 16 == 0;
  double tol = !tensor_cores ? 1e-4 : c.cache == DType::bf16 ? 6e-3 : 2e-3;
  tol += c.out == DType::bf16 ? 5e-3 : c.out == DType::f16 ? 7e-4 : 0.0;
  EXPECT_GT(top, 0.0);
  EXPECT_LE(err, tol * top) << "largest |output| " << top;
}

TEST(CudaMlaDecode, MatchesReferenceAtDeepSeekV3ShapesShortContexts) {
  REQUIRE_GPU();
  // The reference expands every row for every head (H * (dn + dv) * r per row): short contexts only.
  for (int64_t bs : {0, 16}) {
    Case c;
    c.lens = {1, 17, 150};
    c.block_size = bs;
    check_case(c, uint64_t(bs) + 1);
  }
  Case c;
  c.lens = {33, 2};
  c.cache = c.q = c.w = DType::f16;
  c.out = DType::f32;
  check_case(c, 5);
  c.cache = c.w = DType::f32;
  c.out = DType::f16;
  check_case(c, 6);
}

// The scalar attention on a 16-bit cache (a rope dim that is not a whole k16 step), and a partial head group.
TEST(CudaMlaDecode, MatchesReferenceOnTheScalarPath) {
  REQUIRE_GPU();
  Case c;
  c.d = {20, 16, 8, 24, 96};
  c.lens = {1, 40, 333};
  c.block_size = 16;
  check_case(c, 41);
  c.out = DType::f32;
  c.block_size = 0;
  check_case(c, 42);
}

// Long ragged contexts: few sequences leave slots spare, so the long ones are split and merged.
TEST(CudaMlaDecode, MatchesCpuAtDeepSeekV3ShapesUpTo4k) {
  REQUIRE_GPU();
  for (int64_t bs : {16, 64}) {
    Case c;
    c.lens = {1, 300, 1000, 4096};
    c.block_size = bs;
    c.reference = false;
    check_case(c, uint64_t(bs) + 11);
  }
  Case one;  // batch 1: the chunks of a single sequence fill the GPU
  one.lens = {4096};
  one.reference = false;
  one.out = DType::f32;
  check_case(one, 21);
  Case many;  // enough sequences that whole sequences already fill a wave
  many.lens.assign(64, 2000);
  for (size_t i = 0; i < many.lens.size(); i += 3) many.lens[i] = int32_t(1 + 61 * i);
  many.reference = false;
  check_case(many, 22);
}

#else

TEST(CudaMlaDecode, RefusedWithoutACudaBuild) {
  const Dims d{16, 16, 16, 16, 64};
  const std::vector<int32_t> lens = {5};
  HostTensor w(DType::bf16, {d.H * (d.dn + d.dv), d.r}, 1), latent(DType::bf16, {1, 8, d.r + d.dr}, 2);
  HostTensor q(DType::bf16, {1, 1, d.H, d.dn + d.dr}, 3), out(DType::f32, {1, 1, d.H, d.dv}, 0, 0.f);
  testing::expect_error<DeviceError>(
      [&] {
        mla_decode(on_gpu(q.view), {on_gpu(latent.view), lens.data()},
                   {on_gpu(w.view), d.H, d.dn, d.dr, d.dv, d.r}, on_gpu(out.view), {});
      },
      "q: lives on cuda:0");
}

#endif

}  // namespace
}  // namespace attnzoo
