// The CUDA table's arithmetic and output, which a GPU run relies on; the timing itself runs only on a GPU
// (scripts/gpu_check.sh).
#include "bench/cuda_bench.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo::bench {
namespace {

TEST(CudaBench, CountsOnlyVisibleProducts) {
  // Non-causal: every (query, key) pair, 2 FLOPs per multiply-add in each of the two products.
  EXPECT_DOUBLE_EQ(prefill_flops({1, 4, 1, 1, 8, false}), 4.0 * 8 * 16);
  // Causal: the lower triangle with its diagonal, as count_visible_pairs counts it for the CPU table.
  EXPECT_DOUBLE_EQ(prefill_flops({2, 4, 3, 1, 8, true}), 4.0 * 2 * 3 * 8 * 10);
  EXPECT_EQ(double(count_visible_pairs(MaskGeometry{true, 0, nullptr}, 4, 4)), 10.0);
  // The headline case, 4 x 4096 causal, GQA 32 / 8, D 128: the figure the peers' TFLOP/s were computed with.
  EXPECT_NEAR(prefill_flops({4, 4096, 32, 8, 128, true}) * 1e-12, 0.55, 0.001);
}

TEST(CudaBench, DecodeCountsEveryCachedRowOnce) {
  // The headline: 32 sequences of 32k tokens, 8 kv heads of 128 bf16 values, K and V: 4.29 GB per step.
  EXPECT_DOUBLE_EQ(decode_cache_bytes({32, 32768, 32, 8, 128, 16, DType::bf16}), 2.0 * 32 * 32768 * 8 * 128 * 2);
  // One-byte caches read their f32 row scales too; the query heads (32 here) read nothing more.
  EXPECT_DOUBLE_EQ(decode_cache_bytes({1, 10, 4, 2, 64, 16, DType::i8}), 2.0 * 10 * 2 * (64 + 4));
  EXPECT_DOUBLE_EQ(decode_cache_bytes({1, 10, 64, 2, 64, 64, DType::f8_e4m3}), 2.0 * 10 * 2 * (64 + 4));
}

TEST(CudaBench, StateDecodeCountsTheStateReadAndWritten) {
  // B 32, H 32, K = V = 128 in f32: 64 MiB read and 64 MiB written per step (fla's 178 us is 754 GB/s of it).
  EXPECT_DOUBLE_EQ(state_decode_bytes({32, 32, 128, 128}), 2.0 * 32 * 32 * 128 * 128 * 4);
  EXPECT_NEAR(state_decode_bytes({32, 32, 128, 128}) / 178e-6 * 1e-9, 754, 1);
}

TEST(CudaBench, JsonHoldsEveryRow) {
  CudaKernelReport r;
  r.device = "cuda:0 test";
  r.copy_gbps = 4000;
  for (const CudaPrefillCase& c : cuda_prefill_cases(Scale::full)) r.prefill.push_back({c, 1e-3, 9e-4, 1.5});
  for (const CudaDecodeCase& c : cuda_decode_cases(Scale::full)) r.decode.push_back({c, 1e-3, 9e-4, 4000});
  for (const CudaStateDecodeCase& c : cuda_state_decode_cases(Scale::full))
    r.gated_delta_decode.push_back({c, 1e-4, 9e-5, 3000});
  const std::string json = format_cuda_json(r);
  size_t rows = 0;
  for (size_t at = json.find("\"causal\""); at != std::string::npos; at = json.find("\"causal\"", at + 1)) ++rows;
  EXPECT_EQ(rows, cuda_prefill_cases(Scale::full).size());
  EXPECT_NE(json.find("\"T\": 16384"), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("TFLOP/s"), std::string::npos);
  size_t decode_rows = 0;
  for (size_t at = json.find("\"context\""); at != std::string::npos; at = json.find("\"context\"", at + 1)) ++decode_rows;
  EXPECT_EQ(decode_rows, cuda_decode_cases(Scale::full).size());
  EXPECT_NE(json.find("\"kv_dtype\": \"int8\""), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("GB/s of cache read"), std::string::npos);
  EXPECT_NE(json.find("\"gated_delta_decode\": [{\"B\": 32, \"H\": 32"), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("GB/s of state read + written"), std::string::npos);
}

TEST(CudaBench, NeedsAGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(run_cuda_kernel_report(Scale::tiny, Device::cuda()), DeviceError);
  attnzoo::testing::expect_error<ArgumentError>([] { run_cuda_kernel_report(Scale::tiny, Device::cpu()); }, "--device");
}

}  // namespace
}  // namespace attnzoo::bench
