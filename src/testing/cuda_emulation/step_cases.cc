// The model-step kernels (layers/cuda: norm_kernel.cuh, elementwise_kernel.cuh) under the CTA emulator against
// their CPU twins, with the GPU tests' tolerances: RMSNorm (warp and block per row, 16-byte and scalar accesses,
// the fused residual add, mean-centred), the gated activations, add, product and sigmoid gate. RoPE and routing have files of
// their own (rope_cases.cc, routing_cases.cc). Grids are capped at two or three blocks so that every grid-stride loop takes
// more than one round; bytes between rows must stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/activations.h"
#include "layers/cuda/elementwise_kernel.cuh"
#include "layers/cuda/norm_kernel.cuh"
#include "layers/cuda/rows.h"
#include "layers/norm.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"
#include "testing/step_reference.h"

namespace attnzoo {
namespace {
using namespace cuda_step;
using cuda_emulation::DeviceMemory;
using cuda_emulation::StridedOperand;

// step_test_util.h's output_tolerance: one ulp of the output dtype plus the f32 difference allowed.
double output_tolerance(DType dtype, double ref, double f32_rel, double f32_abs) {
  const double ulp = dtype == DType::bf16 ? 1.0 / 128 : dtype == DType::f16 ? 1.0 / 1024 : 0.0;
  return std::fabs(ref) * (ulp + f32_rel) + f32_abs;
}

unsigned capped(unsigned blocks, unsigned cap) { return blocks < cap ? blocks : cap; }

// ---- RMSNorm -------------------------------------------------------------------------------------------------

template <class T, int N, bool kResidual, class Y>
void launch_norm(const NormParams<T, Y>& p) {
  // norm.cu's choice of threads per row.
  if ((p.x_rows.cols + N - 1) / N <= 4 * 32) {
    cuda_emulation::launch(dim3(capped(grid_for(p.x_rows.count, kBlock / 32), 2)), kBlock, 0,
                           [&](unsigned char*) { rms_norm_rows<T, N, 32, kResidual, Y>(p); });
  } else {
    cuda_emulation::launch(dim3(capped(grid_for(p.x_rows.count, 1), 2)), kBlock, 0,
                           [&](unsigned char*) { rms_norm_rows<T, N, kBlock, kResidual, Y>(p); });
  }
}

struct NormCase {
  DType dtype;
  int64_t rows, dim;
  bool residual = false, centered = false;
  int64_t row_pad = 0;
  DType y_dtype = DType::f32;  // with an f32 x: bf16 / f16 for a 16-bit y (the runner's projection input)
};

void check_norm(const NormCase& c) {
  SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " rows " + std::to_string(c.rows) + " dim " +
               std::to_string(c.dim) + (c.residual ? " +residual" : "") + (c.centered ? " centered" : "") + " pad " +
               std::to_string(c.row_pad));
  const DType y_dtype = c.dtype == DType::f32 ? c.y_dtype : c.dtype;
  auto operand = [&](DType dt, uint64_t seed) {
    return StridedOperand(dt, {c.rows, c.dim}, seed, {c.dim + c.row_pad, 1});
  };
  StridedOperand x = operand(c.dtype, 1), y = operand(y_dtype, 0), residual = operand(c.dtype, 3);
  StridedOperand w(DType::f32, {c.dim}, 7, {}, 0.3f);
  for (int64_t i = 0; i < c.dim; ++i) w.set(i, 1.f + w.at(i));
  w.upload();

  std::vector<int64_t> offs;
  x.for_each([&](int64_t o) { offs.push_back(o); });
  std::vector<float> src(offs.size()), want(offs.size());
  for (size_t i = 0; i < src.size(); ++i) {
    uint8_t rounded[4];
    store_from_f32(rounded, c.dtype, 0, x.at(offs[i]) + (c.residual ? residual.at(offs[i]) : 0.f));
    src[i] = c.residual ? load_as_f32(rounded, c.dtype, 0) : x.at(offs[i]);
  }
  const float* wf = w.view.ptr<float>();
  testing::norm_rows_reference(src.data(), wf, c.rows, c.dim, c.centered, want.data());

  const Rows rows = rows_of(x.device_view(), "x");
  auto run = [&](auto x_tag, auto y_tag) {
    using T = decltype(x_tag);
    using Y = decltype(y_tag);
    constexpr int V = 16 / sizeof(T);
    const NormParams<T, Y> p{x.device_ptr<const T>(), c.residual ? residual.device_ptr<T>() : nullptr,
                             w.device_ptr<const float>(), y.device_ptr<Y>(), RowMap(rows), RowMap(rows), RowMap(rows),
                             1e-5f, c.centered};
    // norm.cu's test: x, y and residual alike (same rows), y by its own element size
    const bool vec = rows_vectorizable(rows, x.device.data(), sizeof(T)) &&
                     rows_vectorizable(rows, y.device.data(), sizeof(Y));
    if (c.residual) vec ? launch_norm<T, V, true>(p) : launch_norm<T, 1, true>(p);
    else vec ? launch_norm<T, V, false>(p) : launch_norm<T, 1, false>(p);
  };
  if (y_dtype == c.dtype) with_float_type(c.dtype, [&](auto tag) { run(tag, tag); });
  else with_float_type(y_dtype, [&](auto tag) { run(float{}, tag); });
  y.download();
  residual.download();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double tol = output_tolerance(y_dtype, want[i], 4e-6, 1e-6);
    worst = std::max(worst, std::fabs(double(y.at(offs[i])) - want[i]) / tol);
    if (c.residual) {
      ASSERT_EQ(residual.at(offs[i]), src[i]) << "residual element " << i;
    }
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_TRUE(y.outside_untouched());
  EXPECT_TRUE(residual.outside_untouched());
}

TEST(EmulatedStepKernels, RmsNormMatchesReference) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    check_norm({dt, 19, 128});                    // warp per row, vectors, two rounds of the grid
    check_norm({dt, 3, 2048});                    // block per row
    check_norm({dt, 5, 100});                     // no whole number of vectors: scalar
    check_norm({dt, 21, 64, true});               // fused residual
    check_norm({dt, 3, 1040, true, false, 8});    // fused residual, block per row, padded rows
    check_norm({dt, 6, 96, false, true});         // mean-centred
    check_norm({dt, 3, 1200, true, true, 3});     // mean-centred after the add, unaligned rows: scalar, block
  }
  // A 16-bit y under an f32 x: the residual stream's norm as the projections' bf16 / f16 input.
  for (DType y16 : {DType::bf16, DType::f16}) {
    check_norm({DType::f32, 19, 128, false, false, 0, y16});  // warp per row, f32 vectors in, scalar stores out
    check_norm({DType::f32, 3, 2048, true, false, 0, y16});   // block per row, fused residual (f32) add
    check_norm({DType::f32, 5, 100, false, false, 0, y16});   // scalar
  }
}

// ---- Gated activations and add ----------------------------------------------------------------------------------

template <class Op, Activation kAct>
void check_binary(DType dtype, int64_t rows, int64_t cols, int64_t pad, float alpha = 1.f) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " act " + activation_name(kAct) + " rows " + std::to_string(rows) +
               " cols " + std::to_string(cols) + " pad " + std::to_string(pad) + " alpha " + std::to_string(alpha));
  constexpr bool kAdd = std::is_same_v<Op, AddOp>, kMul = std::is_same_v<Op, MulOp>,
                 kSigmoid = std::is_same_v<Op, SigmoidGateOp>;
  StridedOperand a(dtype, {rows, cols}, 1, {cols + pad, 1}), b(dtype, {rows, cols}, 2, {cols + pad, 1}),
      out(dtype, {rows, cols}, 0, {cols + pad, 1});
  const Rows r = rows_of(a.device_view(), "a");
  with_float_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    const BinaryParams<T> p{a.device_ptr<const T>(), b.device_ptr<const T>(), out.device_ptr<T>(), RowMap(r),
                            RowMap(r), RowMap(r), alpha};
    const bool vec = rows_vectorizable(r, a.device.data(), sizeof(T));
    const int n = vec ? V : 1;
    const dim3 grid(capped(grid_for(cols / n, kThreads), 2), capped(unsigned(rows), 3));
    cuda_emulation::launch(grid, kThreads, 0, [&](unsigned char*) {
      vec ? binary_rows<Op, kAct, T, V>(p) : binary_rows<Op, kAct, T, 1>(p);
    });
  });
  out.download();
  double worst = 0;
  a.for_each([&](int64_t o) {
    const double x = a.at(o), y = b.at(o);
    // Add and product: one f32 operation and one rounding, as the CPU's; the product compared after the same
    // rounding to the dtype (an f16 product of two small values lands among the subnormals, under one ulp's bound).
    // The scaled add as the CPU's x = 1 * x + rs * y: alpha 1 exact, otherwise within an f32 rounding of a fused
    // multiply-add.
    auto rounded = [&](float v) {
      uint8_t bytes[4] = {};  // zeroed: the compiler cannot see store_from_f32 fill what load_as_f32 reads
      store_from_f32(bytes, dtype, 0, v);
      return double(load_as_f32(bytes, dtype, 0));
    };
    const double want = kAdd       ? double(float(x + double(float(alpha * y))))
                        : kMul     ? rounded(float(x * y))
                        : kSigmoid ? x / (1.0 + std::exp(-y))
                                   : double(activation_reference(kAct, float(x))) * y;
    const double tol = kAdd    ? output_tolerance(dtype, want, alpha == 1.f ? 0 : 1.2e-7, alpha == 1.f ? 0 : 1e-30)
                       : kMul  ? output_tolerance(dtype, want, 0, 0)
                       : kSigmoid ? output_tolerance(dtype, want, 1e-6, 1e-7 * (1 + std::fabs(x)))
                                  : output_tolerance(dtype, want, 1e-6, 2e-6 * (1 + std::fabs(y)));
    worst = std::max(worst, std::fabs(out.at(o) - want) / std::max(tol, 1e-30));
  });
  EXPECT_LE(worst, 1.0);
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedStepKernels, GatedActivationsAddProductAndSigmoidGateMatchReference) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (auto [rows, cols, pad] : {std::tuple{5, 2304, 0}, {4, 100, 3}}) {  // vectors over 2 x-blocks; scalar
      check_binary<GatedOp, Activation::silu>(dt, rows, cols, pad);
      check_binary<GatedOp, Activation::gelu_tanh>(dt, rows, cols, pad);
      check_binary<GatedOp, Activation::gelu>(dt, rows, cols, pad);
      check_binary<GatedOp, Activation::relu2>(dt, rows, cols, pad);
      check_binary<AddOp, Activation::silu>(dt, rows, cols, pad);
      check_binary<AddOp, Activation::silu>(dt, rows, cols, pad, 0.22f);  // Granite's residual multiplier
      check_binary<MulOp, Activation::silu>(dt, rows, cols, pad);
      check_binary<SigmoidGateOp, Activation::silu>(dt, rows, cols, pad);
    }
  }
}

// ---- Logits multiplier and softcap -------------------------------------------------------------------------------

void check_scale_softcap(DType dtype, int64_t rows, int64_t cols, int64_t pad, float scale, float cap,
                         DType out_dtype) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " -> " + dtype_name(out_dtype) + " rows " + std::to_string(rows) +
               " cols " + std::to_string(cols) + " pad " + std::to_string(pad) + " scale " + std::to_string(scale) +
               " cap " + std::to_string(cap));
  StridedOperand x(dtype, {rows, cols}, 1, {cols + pad, 1}, 40.f), out(out_dtype, {rows, cols}, 0, {cols + pad, 1});
  const Rows r = rows_of(x.device_view(), "x");
  with_float_type(dtype, [&](auto x_tag) {
    with_float_type(out_dtype, [&](auto y_tag) {
      using T = decltype(x_tag);
      using TY = decltype(y_tag);
      if constexpr (std::is_same_v<T, TY> || std::is_same_v<T, float>) {
        constexpr int V = 16 / sizeof(T);
        const ScaleSoftcapParams<T, TY> p{x.device_ptr<const T>(), out.device_ptr<TY>(), RowMap(r), RowMap(r), scale,
                                          cap};
        const bool vec = rows_vectorizable(r, x.device.data(), sizeof(T)) &&
                         rows_vectorizable(r, out.device.data(), sizeof(TY));
        const int n = vec ? V : 1;
        const dim3 grid(capped(grid_for(cols / n, kThreads), 2), capped(unsigned(rows), 3));
        cuda_emulation::launch(grid, kThreads, 0, [&](unsigned char*) {
          vec ? scale_softcap_rows<T, V, TY>(p) : scale_softcap_rows<T, 1, TY>(p);
        });
      } else {
        FAIL() << "no such pair";
      }
    });
  });
  out.download();
  double worst = 0;
  int64_t capped_values = 0;  // values the cap bends by more than 10%: the case exercises the tanh
  x.for_each([&](int64_t o) {
    // DecoderModel::run_layers' f32 steps, in double for the reference.
    const double scaled = double(float(x.at(o) * scale));
    const double want = cap > 0.f ? cap * std::tanh(scaled / cap) : scaled;
    if (cap > 0.f && std::fabs(want) < 0.9 * std::fabs(scaled)) ++capped_values;
    worst = std::max(worst,
                     std::fabs(out.at(o) - want) / std::max(output_tolerance(out_dtype, want, 1e-6, 1e-6), 1e-30));
  });
  EXPECT_LE(worst, 1.0);
  if (cap > 0.f) {
    EXPECT_GT(capped_values, 0);
  }
  EXPECT_TRUE(out.outside_untouched());
}

TEST(EmulatedStepKernels, LogitsScaleAndSoftcapMatchReference) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    check_scale_softcap(dt, 3, 2304, 0, 1.f, 30.f, dt);   // Gemma 2's softcap alone, vectors over 2 x-blocks
    check_scale_softcap(dt, 4, 100, 3, 0.125f, 0.f, dt);  // Granite's multiplier alone, scalar
    check_scale_softcap(dt, 5, 96, 8, 2.5f, 10.f, dt);    // both, padded rows: vectors by rows
  }
  // The f32 residual stream rounded into the projections' 16-bit rows (a block without a norm, OLMo 2).
  for (DType out : {DType::bf16, DType::f16}) {
    check_scale_softcap(DType::f32, 3, 2304, 0, 1.f, 0.f, out);
    check_scale_softcap(DType::f32, 4, 100, 3, 1.f, 0.f, out);
  }
}

// ---- Query temperature ---------------------------------------------------------------------------------------------

// Rows of q scaled in place against AttentionLayer::scale_queries' f32 formula (positions past several intervals,
// and rows whose factor is exactly 1, which stay as they were).
void check_query_temperature(DType dtype, int64_t tokens, int64_t width, int64_t pad, float beta, int64_t interval) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " tokens " + std::to_string(tokens) + " width " +
               std::to_string(width) + " pad " + std::to_string(pad) + " beta " + std::to_string(beta));
  StridedOperand q(dtype, {tokens, width}, 4, {width + pad, 1});
  std::vector<float> before;
  q.for_each([&](int64_t o) { before.push_back(q.at(o)); });
  std::vector<int32_t> pos(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) pos[size_t(t)] = int32_t(t * 37 % 200);  // 0 .. 199 over interval 16
  DeviceMemory positions(pos.size() * sizeof(int32_t));
  std::memcpy(positions.data(), pos.data(), positions.size());
  const Rows r = rows_of(q.device_view(), "q");
  with_float_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    const TemperatureParams<T> p{q.device_ptr<T>(), RowMap(r), reinterpret_cast<const int32_t*>(positions.data()),
                                 beta, float(interval)};
    const bool vec = rows_vectorizable(r, q.device.data(), sizeof(T));
    const int n = vec ? V : 1;
    const dim3 grid(capped(grid_for(width / n, kThreads), 2), capped(unsigned(tokens), 3));
    cuda_emulation::launch(grid, kThreads, 0, [&](unsigned char*) {
      vec ? query_temperature_rows<T, V>(p) : query_temperature_rows<T, 1>(p);
    });
  });
  q.download();
  double worst = 0;
  int64_t scaled_rows = 0;
  size_t i = 0;
  q.for_each([&](int64_t o) {
    const int64_t t = int64_t(i) / width;
    const float steps = std::floor(float(pos[size_t(t)]) / float(interval));
    const float s = 1.f + beta * std::log(1.f + steps);
    if (s == 1.f) {
      ASSERT_EQ(q.at(o), before[i]) << "row " << t << " has factor 1";
    } else if (int64_t(i) % width == 0) {
      ++scaled_rows;
    }
    const double want = double(before[i]) * s;
    worst = std::max(worst, std::fabs(q.at(o) - want) / std::max(output_tolerance(dtype, want, 4e-7, 1e-30), 1e-30));
    ++i;
  });
  EXPECT_LE(worst, 1.0);
  EXPECT_GT(scaled_rows, tokens / 2);
  EXPECT_TRUE(q.outside_untouched());
}

TEST(EmulatedStepKernels, QueryTemperatureMatchesTheCpuFormula) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    check_query_temperature(dt, 9, 512, 0, 0.1f, 16);  // Ministral 3's beta, vectors
    check_query_temperature(dt, 5, 100, 3, 0.5f, 16);  // scalar, padded rows
  }
}

}  // namespace
}  // namespace attnzoo
