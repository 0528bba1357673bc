#include "bench/cuda_model_bench.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>

#include "bench/case_io.h"
#include "bench/cuda_bench.h"
#include "bench/timer.h"
#include "core/error.h"
#include "layers/batch.h"
#include "models/format_choice.h"
#include "models/cuda/step_graphs.h"
#include "models/model.h"

namespace attnzoo::bench {
namespace {

// Sequences prefilled together: 8 x 1024 tokens keeps the step's activations in the hundreds of MB.
constexpr int64_t kFillSeqs = 8;

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = int32_t(rng() % uint64_t(vocab));
  return ids;
}

CudaModelDecodeRow decode_row(const Model& model, int64_t batch, const CudaModelBenchOptions& o,
                              std::mt19937_64& rng) {
  const int64_t vocab = model.info().vocab_size;
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int64_t i = 0; i < batch; ++i) seqs.push_back(model.new_sequence());
  Batch b;
  for (int64_t first = 0; first < batch; first += kFillSeqs) {
    b.clear();
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t i = first; i < std::min(batch, first + kFillSeqs); ++i) prompts.push_back(random_ids(rng, o.context, vocab));
    for (size_t i = 0; i < prompts.size(); ++i) b.add(*seqs[size_t(first) + i], prompts[i]);
    model.forward(b, /*last_only=*/true);
  }
  std::vector<double> samples;
  int64_t replays_before = 0;
  for (int64_t step = 0; step <= o.steps; ++step) {
    if (step == 1) replays_before = cuda_graph_replays_total();  // the first step is untimed: the step's buffers grow there
    const std::vector<int32_t> ids = random_ids(rng, batch, vocab);
    b.clear();
    for (int64_t i = 0; i < batch; ++i) b.add(*seqs[size_t(i)], std::span<const int32_t>(ids).subspan(size_t(i), 1));
    const double t0 = now_seconds();
    model.forward(b, /*last_only=*/true);  // returns with the logits on the host: the step is done
    if (step > 0) samples.push_back(now_seconds() - t0);
  }
  const Timing t = summarize(samples);
  return {batch, o.context, o.steps, t.median_s, t.min_s, double(batch) / t.median_s,
          cuda_graph_replays_total() - replays_before};
}

}  // namespace

void check_cuda_model_bench(const CudaModelBenchOptions& o) {
  require(!o.model.empty(), "-m", "needs a checkpoint directory or .gguf");
  require(o.device.is_cuda(), "--device", "bench model's GPU rows need a CUDA device, got " + o.device.str());
  require(!o.batches.empty(), "--batches", "needs at least one batch size");
  for (int64_t b : o.batches) require(b >= 1, "--batches", "batch sizes must be >= 1, got " + std::to_string(b));
  require(o.context >= 1, "--context", "must be >= 1, got " + std::to_string(o.context));
  require(o.steps >= 1, "--steps", "must be >= 1, got " + std::to_string(o.steps));
}

CudaModelReport run_cuda_model_bench(const CudaModelBenchOptions& o) {
  check_cuda_model_bench(o);
  const CudaDeviceInfo dev = cuda_device_info(o.device.index);
  CudaModelReport r;
  r.device = o.device.str() + " " + dev.name;
  r.model = o.model;
  // Before the model takes its pool out of the device's memory: 1 GiB each way.
  r.copy_gbps = measure_copy_gbps(o.device, size_t(1) << 30, 10);

  LoadOptions load = load_options(resolve_formats(o.model, {"auto", o.kv_cache_dtype}));
  load.pool.device = o.device;
  const std::unique_ptr<Model> model = Model::load(o.model, load);
  const ModelInfo& info = model->info();
  require(info.max_position_embeddings == 0 || o.context + o.steps + 1 <= info.max_position_embeddings, "--context",
          "context + steps must fit the model's max_position_embeddings (" +
              std::to_string(info.max_position_embeddings) + ")");
  r.architecture = info.architecture;
  r.weight_bytes = info.decode_weight_bytes;
  r.weights_once_s = r.copy_gbps > 0 ? double(r.weight_bytes) / (r.copy_gbps * 1e9) : 0.0;
  std::mt19937_64 rng(27);
  for (int64_t batch : o.batches) r.decode.push_back(decode_row(*model, batch, o, rng));
  return r;
}

std::string format_cuda_model_text(const CudaModelReport& r) {
  char line[512];
  std::string s = "device       " + r.device + "\nmodel        " + r.model + " (" + r.architecture + ")\n";
  std::snprintf(line, sizeof line,
                "copy         %.0f GB/s (device to device, read + write)\n"
                "weights      %.1f MiB per step; read once at copy bandwidth: %.3f ms (the batch-1 floor)\n",
                r.copy_gbps, double(r.weight_bytes) / double(1 << 20), r.weights_once_s * 1e3);
  s += line;
  s += "decode       batch  context  steps   step ms   tokens/s   x floor  replayed\n";
  for (const CudaModelDecodeRow& row : r.decode) {
    std::snprintf(line, sizeof line, "             %5lld  %7lld  %5lld  %8.3f  %9.1f  %8.2f  %8lld\n",
                  static_cast<long long>(row.batch), static_cast<long long>(row.context),
                  static_cast<long long>(row.steps), row.median_step_s * 1e3, row.tokens_per_s,
                  bound_ratio(r, row), static_cast<long long>(row.replayed));
    s += line;
  }
  return s;
}

std::string format_cuda_model_json(const CudaModelReport& r) {
  char head[256];
  std::snprintf(head, sizeof head, ", \"weight_bytes\": %llu, \"copy_gbps\": %.6g, \"weights_once_s\": %.9g",
                static_cast<unsigned long long>(r.weight_bytes), r.copy_gbps, r.weights_once_s);
  std::string s = "{\"device\": " + json_string(r.device) + ", \"model\": " + json_string(r.model) +
                  ", \"architecture\": " + json_string(r.architecture) + head + ", \"decode\": [";
  for (size_t i = 0; i < r.decode.size(); ++i) {
    const CudaModelDecodeRow& row = r.decode[i];
    char item[320];
    std::snprintf(item, sizeof item,
                  "%s{\"batch\": %lld, \"context\": %lld, \"steps\": %lld, \"median_step_s\": %.9g, "
                  "\"min_step_s\": %.9g, \"tokens_per_s\": %.6g, \"x_weights_once\": %.6g, \"replayed\": %lld}",
                  i ? ", " : "", static_cast<long long>(row.batch), static_cast<long long>(row.context),
                  static_cast<long long>(row.steps), row.median_step_s, row.min_step_s, row.tokens_per_s,
                  bound_ratio(r, row), static_cast<long long>(row.replayed));
    s += item;
  }
  return s + "]}";
}

}  // namespace attnzoo::bench
