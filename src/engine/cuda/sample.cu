// The GPU sampler's launch: the plan (sample_plan.cc) uploaded in one copy, scratch for the rows' working copies
// and candidates from the stream-ordered pool, one CTA per row (sample_kernel.cuh), then the ids and statuses
// back in one copy.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "engine/cuda/sample_cuda.h"
#include "engine/cuda/sample_kernel.cuh"
#include "engine/cuda/sample_plan.h"

namespace attnzoo {
namespace cuda_sample {
namespace {

__global__ void __launch_bounds__(kThreads) sample_kernel(const SampleParams p) { sample_row(p); }

size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace
}  // namespace cuda_sample

void sample_rows_cuda(const TensorView& logits, std::span<const int64_t> logit_rows, std::span<Sampler* const> samplers,
                      std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out,
                      std::span<std::string> errors, Stream stream) {
  using namespace cuda_sample;
  // `rows`: the sampled rows, one CTA each (the logits may hold fewer when samples share a row).
  const int64_t rows = int64_t(samplers.size()), vocab = logits.shape[1];
  if (rows == 0) return;
  require(rows <= INT32_MAX, "samplers", "are too many rows for one launch");
  const SamplePlan plan = plan_samples(vocab, samplers, contexts, logit_rows);
  const DeviceGuard on(logits.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);

  // One allocation: settings and penalties (uploaded), then ids and statuses (downloaded together), then the
  // rows' working copies and candidates.
  const size_t settings_bytes = plan.rows.size() * sizeof(RowSettings);
  const size_t penalty_bytes = plan.penalties.size() * sizeof(PenaltyEntry);
  const size_t upload = align_up(settings_bytes + penalty_bytes);
  const size_t results = align_up(2 * size_t(rows) * sizeof(int32_t));
  const size_t work = align_up(size_t(rows) * size_t(vocab) * sizeof(float));
  // Only top-k / top-p rows gather candidates: a greedy or plain-temperature step allocates none.
  bool filtered = false;
  for (const RowSettings& r : plan.rows) filtered = filtered || (r.temperature != 0.f && (r.top_k > 0 || r.top_p < 1.f));
  const size_t candidates = filtered ? size_t(rows) * size_t(vocab) * sizeof(Candidate) : 0;
  StreamScratch scratch(upload + results + work + candidates, s);
  std::vector<unsigned char> staged(settings_bytes + penalty_bytes);
  std::memcpy(staged.data(), plan.rows.data(), settings_bytes);
  if (penalty_bytes) std::memcpy(staged.data() + settings_bytes, plan.penalties.data(), penalty_bytes);
  scratch.upload(staged.data(), staged.size());

  unsigned char* base = scratch.data();
  SampleParams p{};
  p.logits = logits.ptr<const float>();
  p.row_stride = logits.stride(0);
  p.vocab = int32_t(vocab);
  p.rows = reinterpret_cast<const RowSettings*>(base);
  p.penalties = reinterpret_cast<const PenaltyEntry*>(base + settings_bytes);
  p.out = reinterpret_cast<int32_t*>(base + upload);
  p.status = p.out + rows;
  p.work = reinterpret_cast<float*>(base + upload + results);
  p.candidates = filtered ? reinterpret_cast<Candidate*>(base + upload + results + work) : nullptr;
  sample_kernel<<<unsigned(rows), kThreads, 0, s>>>(p);
  cuda_check(cudaGetLastError(), "sample_kernel launch");

  std::vector<int32_t> back(2 * size_t(rows));
  cuda_check(cudaMemcpyAsync(back.data(), p.out, back.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync");
  scratch.finish();
  cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (errors.empty())
    for (int64_t r = 0; r < rows; ++r) raise_row_status(back[size_t(rows + r)], r);
  else
    for (int64_t r = 0; r < rows; ++r) errors[size_t(r)] = row_status_message(back[size_t(rows + r)], r);
  for (int64_t r = 0; r < rows; ++r) out[size_t(r)] = back[size_t(r)];
}

}  // namespace attnzoo
