// The CUDA table's arithmetic and output, which a GPU run relies on; the timing itself runs only on a GPU
// (scripts/gpu_check.sh).
#include "bench/cuda_bench.h"

#include <gtest/gtest.h>

#include <functional>

#include "bench/cuda_bench_testing.h"
#include "bench/timer.h"
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

// Issue 25's two causal shapes (GQA 32 / 8, D = 128 at 4k x 4 and 16k x 1) are timed under both of the Hopper
// kernel's schedules, the rows told apart by kernel and schedule in the JSON and the text.
TEST(CudaBench, HeadlinePrefillShapesRunBothSchedules) {
  std::vector<CudaPrefillCase> both;
  for (const CudaPrefillCase& c : cuda_prefill_cases(Scale::full))
    if (c.both_schedules) both.push_back(c);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].B * both[0].T, 4 * 4096);
  EXPECT_EQ(both[1].B * both[1].T, 16384);
  for (const CudaPrefillCase& c : both) EXPECT_TRUE(c.causal && c.Hq == 32 && c.Hkv == 8 && c.D == 128);
  CudaKernelReport r = test_report();
  r.prefill.push_back({both[0], 2e-3, 2e-3, 1.0, "sm90", "static"});
  r.prefill.push_back({both[0], 1e-3, 1e-3, 2.0, "sm90", "dynamic"});
  r.prefill.push_back({cuda_prefill_cases(Scale::full)[3], 1e-3, 1e-3, 2.0});  // D = 96: the sm_80 kernel
  const std::string json = format_cuda_json(r), text = format_cuda_text(r);
  EXPECT_NE(json.find("\"kernel\": \"sm90\", \"schedule\": \"static\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kernel\": \"sm90\", \"schedule\": \"dynamic\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kernel\": \"sm80\", \"schedule\": \"none\""), std::string::npos) << json;
  EXPECT_NE(text.find("sm90 dynamic"), std::string::npos) << text;
}

TEST(CudaBench, JsonHoldsEveryRow) {
  CudaKernelReport r = test_report();
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

TEST(CudaBench, LinearRowsCountTheStateAndTheChunkedWork) {
  const std::vector<LinearCase> decode = linear_decode_cases(Scale::full);
  ASSERT_EQ(decode.size(), 13u);
  // Issue 26's decode shape for KDA: the same 64 MiB of state read and written as the GDN row.
  EXPECT_EQ(decode[0].kernel, "kda");
  EXPECT_DOUBLE_EQ(linear_state_bytes(decode[0]), state_decode_bytes({32, 32, 128, 128}));
  // Mamba-2 2.7B: 80 heads of [64, 128]; Mamba 2.8B: 5120 channels of 16; the convolution keeps W - 1 inputs.
  EXPECT_DOUBLE_EQ(linear_state_bytes(decode[6]), 2.0 * 32 * 80 * 64 * 128 * 4);
  EXPECT_DOUBLE_EQ(linear_state_bytes(decode[8]), 2.0 * 32 * 5120 * 16 * 4);
  EXPECT_DOUBLE_EQ(linear_state_bytes(decode[10]), 2.0 * 32 * 5376 * 3 * 4);
  // Each pool-addressed form beside its dense one, the same 32 states moved (not the pool's 64).
  for (size_t i : {size_t(2), size_t(7), size_t(9), size_t(11)}) {
    EXPECT_EQ(decode[i].kernel, decode[i - 1].kernel + "_pool");
    EXPECT_EQ(decode[i]["slots"], 64);
    EXPECT_DOUBLE_EQ(linear_state_bytes(decode[i]), linear_state_bytes(decode[i - 1]));
  }
  // RWKV-7 2.9B: 40 heads of [64, 64].
  EXPECT_EQ(decode[12].kernel, "rwkv7");
  EXPECT_DOUBLE_EQ(linear_state_bytes(decode[12]), 2.0 * 32 * 40 * 64 * 64 * 4);
  const std::vector<LinearCase> prefill = chunk_prefill_cases(Scale::full);
  ASSERT_EQ(prefill.size(), 9u);
  EXPECT_EQ(prefill[0].kernel, "gated_delta_rule");
  EXPECT_EQ(prefill[1]["T"], 16384);
  EXPECT_DOUBLE_EQ(chunk_prefill_tokens(prefill[0]), 4.0 * 4096);
  // Per token and head C (3K + 2V) + 6KV at C = 64, K = V = 128: 139264 FLOPs; the two shapes hold as many tokens.
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[0]), 4.0 * 4096 * 16 * 139264);
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[1]), chunk_prefill_flops(prefill[0]));
  // Simple GLA and GLA: C (K + V) + 4KV = 81920 FLOPs per token and head at C = 64, K = V = 128.
  EXPECT_EQ(prefill[4].kernel, "simple_gla");
  EXPECT_EQ(prefill[5].kernel, "gla");
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[5]), 4.0 * 4096 * 16 * 81920);
  // Mamba-2: C B^T once per group and, like every intra-chunk triangle here, half of it (python/attnzoo/bench/
  // ssm.py's CPU count takes it the same way), then per head C h, the state update and half of the intra-chunk
  // product, times the batch.
  EXPECT_EQ(prefill[6].kernel, "mamba2");
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[6]),
                   4 * 2.0 * 4096 * (64 * 128 / 2.0 + 80 * (2 * 128 * 64 + 64 * 64 / 2.0)));
  // RWKV-7 2.9B's 40 heads of 64: 8KV + C (5K + 4V) = 69632 FLOPs per token and head at C = 64, the recurrent form
  // on the same inputs held to the same count (so the two rows' TFLOP/s compare as their times do).
  EXPECT_EQ(prefill[7].kernel, "rwkv7");
  EXPECT_EQ(prefill[8].kernel, "rwkv7_recurrent");
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[7]), 4.0 * 4096 * 40 * 69632);
  EXPECT_DOUBLE_EQ(chunk_prefill_flops(prefill[8]), chunk_prefill_flops(prefill[7]));
  attnzoo::testing::expect_error<ArgumentError>([&] { (void)decode[6]["K"]; }, "K");
}

// The CPU runs the same public entries, so every argument the GPU rows build is checked here: a wrong shape would
// otherwise first show as "not available" in the one GPU run.
Timing run_warm(const std::function<void()>& launch) {
  launch();
  const double t0 = now_seconds();
  launch();
  return summarize({now_seconds() - t0 + 1e-9});
}

TEST(CudaBench, LinearRowsRunOnTheCpu) {
  // The pool forms reach their entries too, which take device states only (their arguments are checked there).
  for (const LinearRow& r : run_linear_decode_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm)) {
    if (r.shape.kernel.ends_with("_pool"))
      EXPECT_NE(r.error.find("addresses device states only"), std::string::npos) << r.shape.kernel << ": " << r.error;
    else
      EXPECT_TRUE(r.available()) << r.shape.kernel << ": " << r.error;
  }
  for (const LinearRow& r : run_chunk_prefill_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm))
    EXPECT_TRUE(r.available()) << r.shape.kernel << ": " << r.error;
}

TEST(CudaBench, MlaRowsRunOnTheCpuAndCountTheirBytes) {
  for (const LinearRow& r : run_mla_decode_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm))
    EXPECT_TRUE(r.available()) << r.error;
  const LinearCase v3 = mla_decode_cases(Scale::full)[0];
  // 32 x 4096 latent rows of 576 bf16 values, and 128 heads x 256 rows of W_UK / W_UV over rank 512.
  EXPECT_EQ(mla_decode_bytes(v3), 2.0 * (32.0 * 4096 * 576 + 128.0 * 256 * 512));
  CudaKernelReport r = test_report();
  r.mla_decode = run_mla_decode_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  EXPECT_NE(format_cuda_json(r).find("\"mla_decode\": [{\"kernel\": \"mla_decode\""), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("MLA absorbed decode"), std::string::npos);
}

TEST(CudaBench, SamplingRowsRunOnTheCpuAndCountTheLogits) {
  for (const LinearRow& r : run_sampling_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm))
    EXPECT_TRUE(r.available()) << r.error;
  const std::vector<LinearCase> full = sampling_cases(Scale::full);
  EXPECT_EQ(sampling_bytes(full.back()), 4.0 * 64 * 151936);
  CudaKernelReport r = test_report();
  r.sampling = run_sampling_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  EXPECT_NE(format_cuda_json(r).find("\"sampling\": [{\"kernel\": \"sample\""), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("sampling (f32 logits"), std::string::npos);
}

TEST(CudaBench, QuantGemvRowsRunOnTheCpuAndCountTheirBytes) {
  for (const LinearRow& r : run_quant_gemv_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm))
    EXPECT_TRUE(r.available()) << r.shape.kernel << ": " << r.error;
  const std::vector<LinearCase> full = quant_gemv_cases(Scale::full);
  ASSERT_EQ(full.size(), 32u);  // 8 formats x 2 shapes x M = 1, 8
  // Q4_0 [4096, 14336]: 448 blocks of 18 bytes per row.
  for (const LinearCase& c : full)
    if (c.kernel == "gemv_Q4_0" && c["K"] == 14336) EXPECT_EQ(quant_gemv_bytes(c), 4096.0 * 448 * 18);
  CudaKernelReport r = test_report();
  r.quant_gemv = run_quant_gemv_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  EXPECT_NE(format_cuda_json(r).find("\"quant_gemv\": [{\"kernel\": \"gemv_BF16\""), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("gemv_Q6_K"), std::string::npos);
}

// gemm_cuda takes device tensors only: on the CPU every row reaches the entry and says so.
TEST(CudaBench, GemmRowsReachTheEntryAndCountTheirFlops) {
  const std::vector<LinearCase> full = gemm_cases(Scale::full);
  ASSERT_EQ(full.size(), 8u);
  EXPECT_EQ(full[2].kernel, "gemm_ours");
  EXPECT_EQ(full[3].kernel, "gemm_cublaslt");
  EXPECT_DOUBLE_EQ(gemm_flops(full[2]), 2.0 * 4096 * 14336 * 4096);
  CudaKernelReport r;
  r.device = "cuda:0 test";
  r.gemm = run_gemm_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  for (const LinearRow& row : r.gemm) EXPECT_NE(row.error.find("x: lives on cpu"), std::string::npos) << row.error;
  EXPECT_NE(format_cuda_json(r).find("\"gemm\": [{\"kernel\": \"gemm_ours\""), std::string::npos);
  EXPECT_NE(format_cuda_text(r).find("projection GEMM"), std::string::npos);
  r.gemm[0].error.clear();
  r.gemm[0].median_s = 1e-3;  // 2 x 64 x 96 x 128 flops in a millisecond
  EXPECT_NE(format_cuda_json(r).find("\"flops\": 1572864, \"tflops\": 0.001572864"), std::string::npos);
}

// The step kernels' rows run their CPU twins on the CPU, on the arguments the GPU rows build.
TEST(CudaBench, StepAndConvRowsRunOnTheCpuAndCountTheirBytes) {
  CudaKernelReport r = test_report();
  r.conv_prefill = run_conv_prefill_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  r.step = run_bandwidth_tables(step_tables(), Scale::tiny, Device::cpu(), Stream{}, run_warm);
  ASSERT_EQ(r.step.size(), 3u);
  for (const std::vector<LinearRow>* rows : {&r.conv_prefill, &r.step[0].rows, &r.step[1].rows, &r.step[2].rows}) {
    ASSERT_FALSE(rows->empty());
    for (const LinearRow& row : *rows) EXPECT_TRUE(row.available()) << row.shape.kernel << ": " << row.error;
  }
  // Qwen3-Next's convolution: 4 x 4096 tokens of 8192 bf16 channels read and written.
  EXPECT_EQ(conv_prefill_bytes(conv_prefill_cases(Scale::full)[0]), 2.0 * 4 * 4096 * 8192 * 2);
  // 4096 tokens x 8 heads, k and v: bf16 rows read, int8 rows and their f32 scales written.
  const std::vector<LinearCase> kv = kv_write_cases(Scale::full);
  ASSERT_EQ(kv.size(), 6u);
  EXPECT_EQ(kv[3].kernel, "kv_write_int8");
  EXPECT_EQ(kv_write_bytes(kv[3]), 2.0 * 4096 * 8 * (128 * 2 + 128 + 4));
  // Q4_K rows of 4096: 16 super-blocks of 144 bytes read, 4096 f32 written, per token.
  for (const LinearCase& c : embedding_cases(Scale::full))
    if (c.kernel == "embedding_Q4_K") EXPECT_EQ(embedding_bytes(c), 4096.0 * (16 * 144 + 4096 * 4));
  const LinearCase v3 = grouped_routing_cases(Scale::full)[1];
  EXPECT_EQ(v3["E"], 256);
  EXPECT_EQ(grouped_routing_bytes(v3), 4096.0 * (256 * 4 + 8 * 8));
  expect_report_holds(r, {"\"conv_prefill\": [{\"kernel\": \"conv1d_prefill\"",
                          "\"kv_write\": [{\"kernel\": \"kv_write_bfloat16\"",
                          "\"embedding\": [{\"kernel\": \"embedding_BF16\"",
                          "\"grouped_routing\": [{\"kernel\": \"grouped_routing\""},
                      {"causal conv1d prefill", "paged KV write", "embedding gather", "grouped routing"});
}

TEST(CudaBench, ARefusedRowSaysWhyAndTheTableGoesOn) {
  const RowTimer refuses = [](const std::function<void()>&) -> Timing {
    throw ArgumentError("q: chunk_gated_delta_rule runs on the CPU only so far");
  };
  CudaKernelReport r = test_report();
  r.chunk_prefill = run_chunk_prefill_rows(Scale::tiny, Device::cpu(), Stream{}, refuses);
  r.state_decode = run_linear_decode_rows(Scale::tiny, Device::cpu(), Stream{}, run_warm);
  ASSERT_EQ(r.chunk_prefill.size(), 7u);
  EXPECT_FALSE(r.chunk_prefill[0].available());
  const std::string text = format_cuda_text(r), json = format_cuda_json(r);
  EXPECT_NE(text.find("not available: q: chunk_gated_delta_rule runs on the CPU only so far"), std::string::npos)
      << text;
  EXPECT_NE(json.find("\"chunk_prefill\": [{\"kernel\": \"gated_delta_rule\", \"dims\": {\"B\": 2, \"T\": 100"),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"available\": false, \"error\": \"q: chunk_gated_delta_rule runs on the CPU only so far\", "
                      "\"median_s\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tflops\": null, \"tokens_per_s\": null}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"state_decode\": [{\"kernel\": \"kda\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"copy_fraction\": "), std::string::npos);
  EXPECT_EQ(json.find("\"available\": false, \"error\": null"), std::string::npos);
  EXPECT_NE(text.find("of copy"), std::string::npos);
}

TEST(CudaBench, NeedsAGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(run_cuda_kernel_report(Scale::tiny, Device::cuda()), DeviceError);
  attnzoo::testing::expect_error<ArgumentError>([] { run_cuda_kernel_report(Scale::tiny, Device::cpu()); }, "--device");
}

}  // namespace
}  // namespace attnzoo::bench
