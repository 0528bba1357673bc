// The GPU model bench's refusals and its report (the ratio issue 27's proof reads); the timing itself runs only on
// a GPU (scripts/gpu_check.sh).
#include "bench/cuda_model_bench.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo::bench {
namespace {

CudaModelBenchOptions options() {
  CudaModelBenchOptions o;
  o.model = "/some/model";
  o.device = Device::cuda(0);
  return o;
}

TEST(CudaModelBench, RefusesNamingTheOption) {
  EXPECT_NO_THROW(check_cuda_model_bench(options()));
  CudaModelBenchOptions o = options();
  o.model.clear();
  testing::expect_error<ArgumentError>([&] { check_cuda_model_bench(o); }, "-m: needs a checkpoint");
  o = options();
  o.device = Device::cpu();
  testing::expect_error<ArgumentError>([&] { check_cuda_model_bench(o); }, "--device: bench model's GPU rows need a CUDA device");
  o = options();
  o.batches = {1, 0};
  testing::expect_error<ArgumentError>([&] { check_cuda_model_bench(o); }, "--batches: batch sizes must be >= 1, got 0");
  o = options();
  o.context = 0;
  testing::expect_error<ArgumentError>([&] { check_cuda_model_bench(o); }, "--context: must be >= 1");
  o = options();
  o.steps = 0;
  testing::expect_error<ArgumentError>([&] { check_cuda_model_bench(o); }, "--steps: must be >= 1");
}

TEST(CudaModelBench, ReportsEachRowAgainstTheWeightsOnceFloor) {
  CudaModelReport r;
  r.device = "cuda:0 NVIDIA H100";
  r.model = "m";
  r.architecture = "Qwen2ForCausalLM";
  r.weight_bytes = 988'000'000;  // a 0.5B model's projections and head in bf16
  r.copy_gbps = 2600;
  r.weights_once_s = double(r.weight_bytes) / (r.copy_gbps * 1e9);
  r.decode = {{1, 1024, 16, 0.57e-3, 0.55e-3, 1 / 0.57e-3, 14}, {64, 1024, 16, 4e-3, 3.9e-3, 64 / 4e-3, 12}};
  EXPECT_NEAR(bound_ratio(r, r.decode[0]), 1.5, 0.01);
  const std::string text = format_cuda_model_text(r);
  EXPECT_NE(text.find("0.380 ms (the batch-1 floor)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.50        14\n"), std::string::npos) << text;
  const std::string json = format_cuda_model_json(r);
  EXPECT_NE(json.find("\"weight_bytes\": 988000000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"batch\": 64, \"context\": 1024"), std::string::npos) << json;
  EXPECT_NE(json.find("\"x_weights_once\": 1.5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"replayed\": 12}"), std::string::npos) << json;
  EXPECT_EQ(json.back(), '}');
}

}  // namespace
}  // namespace attnzoo::bench
