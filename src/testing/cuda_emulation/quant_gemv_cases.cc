// The CUDA quantized GEMV (kernels/quant/cuda: gemv_kernel.cuh, launched as gemv_launch.h plans it) under the CTA
// emulator against the CPU's definition of each format (dequantize_row_reference) and a double-precision product,
// within the f32 GEMV's bound (quant_test.cc: 1e-5 of sum |w x|). Every format the kernel takes, random blocks
// (random f16 scales, the K-quants' super-block mins and packed 6-bit scales / mins included), M = 1, 2, 3 and 8
// activation rows (every row bucket), N = 37 (not a whole number of the 8-row blocks), and three K per format:
// a few blocks, a tile of 2048 plus a tail, and past a tile; rows that are whole 16-byte vectors take the 16-byte
// loads, and cases moving w's base 4 and 2 bytes off a vector take the 4- and 2-byte ones. x f32 or bf16 with padded
// rows (padded by 4: f32 rows of whole 16-byte vectors, copied by cp.async; by 5: loaded); y starts as NaN with padded rows whose bytes must stay untouched; w sits in an allocation of exactly its
// bytes, so an over-read of a row fails. The epilogue: f16 x, a bias, bf16 / f16 y, accumulating into y.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/quant/cuda/gemv_cuda.h"
#include "kernels/quant/cuda/gemv_kernel.cuh"
#include "kernels/quant/cuda/gemv_launch.h"
#include "kernels/quant/quant.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;
using testing::expect_refusal;
using namespace cuda_quant;

template <QuantType kType>
void launch_rows(const GemvLaunch& l) {
  auto run = [&](auto bucket) {
    cuda_emulation::launch(dim3(l.grid), int(l.threads), l.smem_bytes,
                           [&](unsigned char* smem) { quant_gemv_cta<kType, decltype(bucket)::value>(l.params, smem); });
  };
  switch (l.rows_bucket) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 4: return run(std::integral_constant<int, 4>{});
    default: return run(std::integral_constant<int, 8>{});
  }
}

// gemv.cu's dispatch.
void launch(const GemvLaunch& l) {
  switch (l.type) {
    case QuantType::BF16: return launch_rows<QuantType::BF16>(l);
    case QuantType::F16: return launch_rows<QuantType::F16>(l);
    case QuantType::Q8_0: return launch_rows<QuantType::Q8_0>(l);
    case QuantType::Q4_0: return launch_rows<QuantType::Q4_0>(l);
    case QuantType::Q4_1: return launch_rows<QuantType::Q4_1>(l);
    case QuantType::Q4_K: return launch_rows<QuantType::Q4_K>(l);
    case QuantType::Q5_K: return launch_rows<QuantType::Q5_K>(l);
    case QuantType::Q6_K: return launch_rows<QuantType::Q6_K>(l);
    default: FAIL() << "no kernel for " << quant_type_name(l.type);
  }
}

struct GemvCase {
  QuantType type;
  int64_t M, N, K;
  DType x_dtype = DType::f32;
  int64_t w_offset = 0;  // bytes between the allocation's (256-byte aligned) start and w
  int64_t x_pad = 5;     // elements after each x row: 4 keeps f32 rows whole 16-byte vectors (the async copies)
  // The epilogue: y's dtype, + bias, + y's own value.
  DType y_dtype = DType::f32;
  bool bias = false, accumulate = false;
};

// The paths a case took: the weight loads' width (16, 4 or 2 bytes) and whether x came by cp.async.
struct Paths {
  int w_load_bytes;
  bool x_async;
};

std::string label(const GemvCase& c) {
  return std::string(quant_type_name(c.type)) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) +
         " K=" + std::to_string(c.K) + " x " + dtype_name(c.x_dtype) + " pad " + std::to_string(c.x_pad) + " w+" +
         std::to_string(c.w_offset) + " y " + dtype_name(c.y_dtype) + (c.bias ? " +bias" : "") +
         (c.accumulate ? " +=" : "");
}

// A test of every path must know it took each.
Paths check(const GemvCase& c, uint64_t seed) {
  SCOPED_TRACE(label(c));
  const std::vector<uint8_t> raw = testing::random_quant_rows(c.type, c.N, c.K, seed);
  DeviceMemory w_mem(raw.size() + size_t(c.w_offset));
  std::memcpy(w_mem.data() + c.w_offset, raw.data(), raw.size());
  const QuantMatrix w_host = make_quant_matrix(raw.data(), raw.size(), c.type, c.N, c.K, "w");
  QuantMatrix w = w_host;
  w.data = w_mem.data() + c.w_offset;

  StridedOperand x(c.x_dtype, {c.M, c.K}, seed + 1, {c.K + c.x_pad, 1});
  // Accumulating: y starts as values it must add to; else as NaN, every element of which must be overwritten.
  StridedOperand y(c.y_dtype, {c.M, c.N}, seed + 2, {c.N + 3, 1});
  if (!c.accumulate) {
    std::memset(y.host.data(), 0xFF, y.host.size());
    y.upload();
  }
  const std::vector<float> y_before = [&] {
    std::vector<float> v(size_t(c.M * (c.N + 3)));
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) v[size_t(m * (c.N + 3) + n)] = y.at(m * (c.N + 3) + n);
    return v;
  }();
  StridedOperand bias(DType::f32, {c.N}, seed + 3);
  TensorView xv = x.device_view(), yv = y.device_view(), bv = bias.device_view();
  xv.device = yv.device = bv.device = Device::cuda();
  QuantGemvEpilogue epilogue;
  epilogue.bias = c.bias ? &bv : nullptr;
  epilogue.accumulate = c.accumulate;
  const QuantGemvProblem p = make_quant_gemv_cuda_problem(w, Device::cuda(), xv, yv, epilogue);
  const GemvLaunch l = plan_quant_gemv(p);
  EXPECT_FALSE(l.empty);
  cuda_emulation::seed_schedule(seed);
  launch(l);
  y.download();
  EXPECT_TRUE(y.outside_untouched()) << "bytes between or after y's rows were written";

  std::vector<float> row(size_t(c.K));
  for (int64_t n = 0; n < c.N; ++n) {
    dequantize_row_reference(c.type, w_host.row(n), row.data(), c.K);
    for (int64_t m = 0; m < c.M; ++m) {
      double want = 0, abs_sum = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double prod = double(row[size_t(k)]) * double(x.at(m * (c.K + c.x_pad) + k));
        want += prod;
        abs_sum += std::fabs(prod);
      }
      // The epilogue's terms join the sum's bound; a 16-bit y adds its rounding (half an ulp: 2^-9 / 2^-12 relative).
      if (c.bias) want += bias.at(n), abs_sum += std::fabs(bias.at(n));
      if (c.accumulate) want += y_before[size_t(m * (c.N + 3) + n)], abs_sum += std::fabs(y_before[size_t(m * (c.N + 3) + n)]);
      const double rounding = c.y_dtype == DType::bf16 ? 1.0 / 256 : c.y_dtype == DType::f16 ? 1.0 / 2048 : 0;
      const float got = y.at(m * (c.N + 3) + n);
      if (!(std::fabs(double(got) - want) <= 1e-5 * abs_sum + 1e-6 + rounding * std::fabs(want))) {  // NaN fails too
        ADD_FAILURE() << "row " << n << " activation row " << m << ": got " << got << ", want " << want
                      << " (sum |w x| " << abs_sum << ")";
        return {l.params.w_load_bytes, l.params.x_async};  // one row says it; the rest would repeat it
      }
    }
  }
  return {l.params.w_load_bytes, l.params.x_async};
}

// A few blocks; a tile plus a tail; past a tile (whole 16-byte rows where the format allows).
std::vector<int64_t> ks(QuantType t) {
  if (block_shape(t).elems == 256) return {256, 2304, 4096};
  return {96, 2208, 2304};
}

void check_format(QuantType t) {
  std::set<int> widths;
  std::set<bool> x_async;
  auto run = [&](const GemvCase& c, uint64_t seed) {
    const Paths took = check(c, seed);
    widths.insert(took.w_load_bytes);
    x_async.insert(took.x_async);
    return took;
  };
  uint64_t seed = 100 + uint64_t(t) * 17;
  // x: f32 rows padded by 5 (loaded: not whole vectors) at M = 8, bf16 (converted) at M = 3, one row (copied) at M = 1.
  for (int64_t K : ks(t))
    for (int64_t M : {1, 3, 8}) run({t, M, 37, K, M == 3 ? DType::bf16 : DType::f32}, seed++);
  // Rows padded by 4: whole vectors, copied.
  EXPECT_TRUE(run({t, 2, 9, ks(t)[1], DType::f32, 0, 4}, seed++).x_async);
  EXPECT_TRUE(run({t, 8, 11, ks(t)[2], DType::f32, 0, 4}, seed++).x_async);
  // Past a tile, w moved 4 and 2 bytes off a 16-byte boundary: 4-byte loads, then 2-byte ones, whatever the rows.
  EXPECT_EQ(run({t, 1, 5, ks(t)[2], DType::f32, 4}, seed++).w_load_bytes, 4);
  EXPECT_EQ(run({t, 1, 5, ks(t)[2], DType::f32, 2}, seed++).w_load_bytes, 2);
  // The epilogue as a model's projections use it: bias into a 16-bit y from f16 x (attention q / k / v), and
  // accumulated into an f32 y (the residual), with and without a bias.
  run({t, 3, 37, ks(t)[0], DType::f16, 0, 5, DType::bf16, true, false}, seed++);
  run({t, 1, 37, ks(t)[1], DType::bf16, 0, 5, DType::f16, true, false}, seed++);
  run({t, 8, 37, ks(t)[0], DType::f32, 0, 4, DType::f32, false, true}, seed++);
  run({t, 2, 37, ks(t)[1], DType::f32, 0, 5, DType::f32, true, true}, seed++);
  EXPECT_TRUE(widths.count(16)) << "no case with aligned w took the 16-byte loads";
  EXPECT_EQ(x_async.size(), 2u) << "x took only one of its paths";
}

// Each weight exactly the reference's (bit for bit: the host compiler does not fuse the scale and the offset; the
// device may, a rounding's difference), over a tile's worth of random blocks of every format.
template <QuantType kType>
void check_decode() {
  using F = Format<kType>;
  const int64_t n = kTileElems;
  const std::vector<uint8_t> raw = testing::random_quant_rows(kType, 1, n, 3 + uint64_t(kType));
  std::vector<float> want(static_cast<size_t>(n));
  dequantize_row_reference(kType, raw.data(), want.data(), n);
  for (int64_t e = 0; e < n; e += 4) {
    float w[4];
    F::decode4(raw.data() + e / F::kElems * F::kBytes, int(e % F::kElems), w);
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(std::memcmp(&w[i], &want[size_t(e + i)], 4), 0)
          << quant_type_name(kType) << " element " << e + i << ": " << w[i] << " vs " << want[size_t(e + i)];
  }
}

TEST(CudaQuantGemvEmulated, DecodesEveryWeightAsTheReference) {
  check_decode<QuantType::BF16>();
  check_decode<QuantType::F16>();
  check_decode<QuantType::Q8_0>();
  check_decode<QuantType::Q4_0>();
  check_decode<QuantType::Q4_1>();
  check_decode<QuantType::Q4_K>();
  check_decode<QuantType::Q5_K>();
  check_decode<QuantType::Q6_K>();
}

TEST(CudaQuantGemvEmulated, Bf16) { check_format(QuantType::BF16); }
TEST(CudaQuantGemvEmulated, F16) { check_format(QuantType::F16); }
TEST(CudaQuantGemvEmulated, Q8_0) { check_format(QuantType::Q8_0); }
TEST(CudaQuantGemvEmulated, Q4_0) { check_format(QuantType::Q4_0); }
TEST(CudaQuantGemvEmulated, Q4_1) { check_format(QuantType::Q4_1); }
TEST(CudaQuantGemvEmulated, Q4_K) { check_format(QuantType::Q4_K); }
TEST(CudaQuantGemvEmulated, Q5_K) { check_format(QuantType::Q5_K); }
TEST(CudaQuantGemvEmulated, Q6_K) { check_format(QuantType::Q6_K); }

// An empty product launches nothing; the refusals name the argument.
TEST(CudaQuantGemvEmulated, RefusesByName) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, 4, 64, 1);
  const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, 4, 64, "w");
  std::vector<float> xs(9 * 64), ys(9 * 4);
  auto view = [](std::vector<float>& v, int64_t r, int64_t c) {
    TensorView t = TensorView::contiguous(v.data(), DType::f32, {r, c});
    t.device = Device::cuda();
    return t;
  };
  const Device gpu = Device::cuda();
  EXPECT_TRUE(plan_quant_gemv(make_quant_gemv_cuda_problem(w, gpu, view(xs, 0, 64), view(ys, 0, 4))).empty);
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 9, 64), view(ys, 9, 4)); }, "x: M=9");
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 1, 32), view(ys, 1, 4)); }, "x: must be [1, 64]");
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 1, 64), view(ys, 1, 5)); }, "y: must be [1, 4]");
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, Device::cpu(), view(xs, 1, 64), view(ys, 1, 4)); }, "w: lives on cpu");
  TensorView host_x = view(xs, 1, 64);
  host_x.device = Device::cpu();
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, host_x, view(ys, 1, 4)); }, "x: lives on cpu");
  TensorView x_i32 = view(xs, 1, 64);
  x_i32.dtype = DType::i32;
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, x_i32, view(ys, 1, 4)); }, "x: takes float32, bfloat16 or float16");
  std::vector<float> short_bias(3);
  TensorView bias = TensorView::contiguous(short_bias.data(), DType::f32, {3});
  bias.device = gpu;
  QuantGemvEpilogue with_bias;
  with_bias.bias = &bias;
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 1, 64), view(ys, 1, 4), with_bias); }, "bias: must be [4]");
  QuantMatrix odd = w;
  odd.data = raw.data() + 1;
  expect_refusal([&] { make_quant_gemv_cuda_problem(odd, gpu, view(xs, 1, 64), view(ys, 1, 4)); }, "w: data must be 2-byte aligned");
  QuantMatrix q5 = w;
  q5.type = QuantType::Q5_0;
  expect_refusal([&] { make_quant_gemv_cuda_problem(q5, gpu, view(xs, 1, 64), view(ys, 1, 4)); }, "w: format Q5_0 has no CUDA GEMV");
  const std::vector<uint8_t> bf16_raw = testing::random_quant_rows(QuantType::BF16, 4, 48, 2);
  const QuantMatrix bf16 = make_quant_matrix(bf16_raw.data(), bf16_raw.size(), QuantType::BF16, 4, 48, "w");
  expect_refusal([&] { make_quant_gemv_cuda_problem(bf16, gpu, view(xs, 1, 48), view(ys, 1, 4)); }, "w: BF16 rows of 48 columns");
  expect_refusal([&] { make_quant_gemv_cuda_problem(w, gpu, view(xs, 1, 64), view(xs, 1, 4)); }, "y: overlaps x");
  QuantMatrix w_in_y = w;
  w_in_y.data = ys.data();  // 4 x 36 bytes inside y's 9 x 4 floats
  expect_refusal([&] { make_quant_gemv_cuda_problem(w_in_y, gpu, view(xs, 1, 64), view(ys, 1, 4)); }, "y: overlaps w");
  QuantMatrix grouped = w;
  grouped.row_group = 16;
  expect_refusal([&] { make_quant_gemv_cuda_problem(grouped, gpu, view(xs, 1, 64), view(ys, 1, 4)); }, "w: rows regrouped");
}

}  // namespace
}  // namespace attnzoo
