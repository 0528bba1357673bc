#pragma once
// The sampling rows of `attnzoo bench kernels --device cuda` (issue 27): a decode step's logits sampled where
// they live (sample_rows), at a Qwen-sized vocabulary (151936) for one sequence and for a batch of 64, greedy,
// plain temperature and a typical request's top-k 50 + top-p 0.9. Measured, like the other bandwidth rows, in
// bytes of what the step must read at least once (the f32 logits) per second beside the copy bandwidth; the time
// includes the host's plan, the settings' upload and the ids' copy back, as an engine pays them.
#include <string>
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

// mode 0 greedy, 1 temperature 1, 2 top-k 50 + top-p 0.9.
std::vector<LinearCase> sampling_cases(Scale s);
double sampling_bytes(const LinearCase& c);  // B x V x 4
std::vector<LinearRow> run_sampling_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::string format_sampling_text(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_sampling_json(const std::vector<LinearRow>& rows, double copy_gbps);

}  // namespace attnzoo::bench
