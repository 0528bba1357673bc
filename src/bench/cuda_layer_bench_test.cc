#include "bench/cuda_layer_bench.h"

#include <gtest/gtest.h>

#include "bench/cuda_bench_testing.h"

namespace attnzoo::bench {
namespace {

// The smaller kernels' rows run their CPU twins on the CPU, on the arguments the GPU rows build.
TEST(CudaLayerBench, RowsRunOnTheCpuAndCountTheirBytes) {
  CudaKernelReport r = test_report();
  r.layer = run_tables_on_cpu(layer_tables(), {{"dequant", 6}, {"delta_gates", 2}, {"elementwise", 7}});
  // Q4_K at [4096, 14336]: 56 super-blocks of 144 bytes a row read, the bf16 row written.
  for (const LinearCase& c : dequant_cases(Scale::full))
    if (c.kernel == "dequant_Q4_K") EXPECT_EQ(dequant_bytes(c), 4096.0 * (56 * 144 + 14336 * 2));
  // KDA: 4096 tokens of a [32 x 128] and b [32] read, g and beta written, f32.
  EXPECT_EQ(delta_gates_bytes(delta_gates_cases(Scale::full)[1]), 4096.0 * (32 + 4096) * 8);
  for (const LinearCase& c : elementwise_cases(Scale::full)) {
    const double n = double(c["rows"]) * double(c["cols"]);
    if (c.kernel == "sigmoid_gate") EXPECT_EQ(elementwise_bytes(c), n * 6);    // bf16 a, gate, y
    if (c.kernel == "scale_softcap") EXPECT_EQ(elementwise_bytes(c), n * 6);   // f32 in, bf16 out
    if (c.kernel == "row_copy") EXPECT_EQ(elementwise_bytes(c), 64.0 * 32 * 128 * 128 * 8);
  }
  expect_report_holds(r, {"\"dequant\": [{\"kernel\": \"dequant_Q8_0\"",
                          "\"delta_gates\": [{\"kernel\": \"delta_gates_gdn\"",
                          "\"elementwise\": [{\"kernel\": \"mul\""},
                      {"GGUF blocks to bf16", "delta gates", "element-wise and copies"});
}

}  // namespace
}  // namespace attnzoo::bench
