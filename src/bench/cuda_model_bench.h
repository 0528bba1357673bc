#pragma once
// `attnzoo bench model -m DIR --device cuda[:N]`: a checkpoint's decode speed on the GPU runner against the
// bound of reading its weights once per step at the device's copy bandwidth, measured in the same run (issue 27's
// proof: batch 1 within 1.5x of that bound). Each row fills `batch` sequences to `context` tokens, then times
// single-token steps of all of them together; a step's time includes copying its logits rows to the host, which
// the runner does until sampling moves onto the device.
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"

namespace attnzoo::bench {

struct CudaModelBenchOptions {
  std::string model;                     // checkpoint directory (or .gguf)
  Device device;                         // a CUDA device
  std::vector<int64_t> batches{1, 64};   // sequences decoded together, one row each
  int64_t context = 1024;                // tokens each sequence holds before the timed steps
  int64_t steps = 16;                    // timed steps per row (after one untimed)
  std::string kv_cache_dtype = "auto";   // as --kv-cache-dtype
};

struct CudaModelDecodeRow {
  int64_t batch = 0, context = 0, steps = 0;
  double median_step_s = 0, min_step_s = 0;
  double tokens_per_s = 0;  // batch / median step
  int64_t replayed = 0;      // timed steps replayed from a CUDA graph (models/cuda/step_graphs.h)
};

struct CudaModelReport {
  std::string device, model, architecture;
  uint64_t weight_bytes = 0;   // what one decode step streams (ModelInfo::decode_weight_bytes)
  double copy_gbps = 0;        // device-to-device copy, bytes read + written per second
  double weights_once_s = 0;   // weight_bytes / copy bandwidth: the batch-1 step's floor
  std::vector<CudaModelDecodeRow> decode;
};

// A step of `batch` sequences' rows against the bound: how many times the floor the step took (issue 27's ratio).
inline double bound_ratio(const CudaModelReport& r, const CudaModelDecodeRow& row) {
  return r.weights_once_s > 0 ? row.median_step_s / r.weights_once_s : 0.0;
}

// ArgumentError naming the option for what cannot run (no model, not a CUDA device, batch / context / steps below
// 1); DeviceError without a GPU or without CUDA in this build.
void check_cuda_model_bench(const CudaModelBenchOptions& o);
CudaModelReport run_cuda_model_bench(const CudaModelBenchOptions& o);
std::string format_cuda_model_text(const CudaModelReport& r);
std::string format_cuda_model_json(const CudaModelReport& r);

}  // namespace attnzoo::bench
