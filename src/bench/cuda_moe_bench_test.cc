#include "bench/cuda_moe_bench.h"

#include <gtest/gtest.h>

#include <vector>

#include "bench/cuda_bench_testing.h"

namespace attnzoo::bench {
namespace {

// The MoE rows run their CPU twins on the CPU, on the arguments the GPU rows build, and count what the table says.
TEST(CudaMoeBench, RowsRunOnTheCpuAndCountQwen3MoeShapes) {
  CudaKernelReport r = test_report();
  r.moe_router = run_moe_router_rows(Scale::tiny, Device::cpu(), Stream{}, run_once);
  r.moe_experts = run_moe_experts_rows(Scale::tiny, Device::cpu(), Stream{}, run_once);
  for (const auto* rows : {&r.moe_router, &r.moe_experts}) {
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_TRUE(rows->front().available()) << rows->front().shape.kernel << ": " << rows->front().error;
  }
  const std::vector<LinearCase> experts = moe_experts_cases(Scale::full);
  ASSERT_EQ(experts.size(), 2u);
  // Decode: 64 x 8 = 512 routed rows reach all 128 experts, each [gate | up | down] of 3 x 768 x 2048 bf16 read.
  EXPECT_EQ(moe_experts_bytes(experts[0]), 128.0 * 3 * 768 * 2048 * 2 + 64.0 * 2048 * 10);
  EXPECT_EQ(moe_experts_flops(experts[1]), 2.0 * 4096 * 8 * 3 * 768 * 2048);
  const LinearCase tiny = moe_experts_cases(Scale::tiny)[0];  // 5 x 2 = 10 rows over 8 experts: all 8 touched
  EXPECT_EQ(moe_experts_bytes(tiny), 8.0 * 3 * 32 * 64 * 2 + 5.0 * 64 * 10);
  EXPECT_EQ(moe_router_bytes(moe_router_cases(Scale::full)[0]), 128.0 * 2048 * 4 + 64.0 * 2048 * 2 + 64.0 * 128 * 4 +
                                                                     64.0 * 8 * 8);
  // A GEMM row makes the experts' TFLOP/s share: here the experts at exactly half of it.
  r.gemm = {{{"gemm_ours", {{"M", 64}, {"N", 96}, {"K", 128}}}, {}, 1e-3, 1e-3}};
  r.moe_experts[0].median_s = 2 * moe_experts_flops(tiny) / (2.0 * 64 * 96 * 128 / 1e-3);
  expect_report_holds(r, {"\"moe_router\": [{\"kernel\": \"moe_router\"",
                          "\"moe_experts\": [{\"kernel\": \"moe_experts\"",
                          "\"gemm_fraction\": 0.5}"},
                      {"MoE router", "MoE experts"});
}

}  // namespace
}  // namespace attnzoo::bench
