#include "bench/cuda_runner_bench.h"

#include <gtest/gtest.h>

#include "bench/cuda_bench_testing.h"
#include "bench/cuda_rwkv7_bench.h"

namespace attnzoo::bench {
namespace {

// The runners' own kernels run their CPU twins on the CPU, on the arguments the GPU rows build.
TEST(CudaRunnerBench, RowsRunOnTheCpuAndCountTheirBytes) {
  CudaKernelReport r = test_report();
  r.runner = run_tables_on_cpu(runner_tables(),
                               {{"rwkv7_step", 7}, {"gpt_oss_moe", 2}, {"head_rows", 3}, {"moe_group", 2}});
  // RWKV-7 2.9B's time-mix shift: 4096 x 2560 f32 read, six bf16 lerps written, 8 sequences' shift rows.
  const LinearCase shift = rwkv7_step_cases(Scale::full)[0];
  EXPECT_EQ(rwkv7_step_bytes(shift), 4096.0 * 2560 * 4 + 6 * 2560 * 4 + 6 * 4096.0 * 2560 * 2 + 2 * 8 * 2560 * 4);
  EXPECT_EQ(rwkv7_step_bytes(rwkv7_step_cases(Scale::full)[3]), 4096.0 * 10240 * 6);  // relu^2: f32 in, bf16 out
  // The same shift with the block's LayerNorm fused in: its weight and bias read besides.
  EXPECT_EQ(rwkv7_step_bytes(rwkv7_step_cases(Scale::full)[6]), rwkv7_step_bytes(shift) + 2 * 2560 * 4);
  // gpt-oss-20b: 16384 rows of gate | up (2 x 2880 f32) read and written, 32 experts' biases.
  EXPECT_EQ(gpt_oss_moe_bytes(gpt_oss_moe_cases(Scale::full)[0]), 16384.0 * 5760 * 8 + 32 * 5760 * 4);
  // The rope key: one head of 64 read per token, 128 heads of 128 (64 of them zeros) written.
  EXPECT_EQ(head_rows_bytes(head_rows_cases(Scale::full)[1]), 2.0 * 4096 * (64 + 128 * 128));
  // The prefill's grouping: 32768 entries, past one CTA's 2048.
  const LinearCase prefill = moe_group_cases(Scale::full)[1];
  EXPECT_GT(prefill["T"] * prefill["top_k"], 2048);
  EXPECT_EQ(moe_group_bytes(prefill), 32768.0 * 12 + 129 * 8);
  expect_report_holds(r, {"rwkv7_step\": [{\"kernel\": \"rwkv7_shift_mix\"",
                          "gpt_oss_moe\": [{\"kernel\": \"grouped_bias\"",
                          "head_rows\": [{\"kernel\": \"head_rows_k_nope\"",
                          "moe_group\": [{\"kernel\": \"moe_group\""},
                      {"RWKV-7 step kernels", "gpt-oss experts", "MLA head rows", "MoE grouping"});
}

}  // namespace
}  // namespace attnzoo::bench
