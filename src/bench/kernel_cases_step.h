#pragma once
// A model step's kernels for `attnzoo bench kernels --write-cases` (issue 27), each through the entry a step calls
// on the case's device: the quantized GEMV (quant_gemv_tensors over real Q8_0 / Q4_0 / Q4_K / Q6_K / BF16 blocks),
// the paged KV write (write_kv_paged into bf16 / int8 / fp8 caches over shuffled slots, some skipped), the
// embedding gather (GGUF and bf16 tables; EmbeddingCuda on a GPU, Embedding::lookup on the CPU), DeepSeek's grouped
// routing (V3's sigmoid + bias + top-2-sum groups and V2's softmax + max groups) and sampling (sample_rows: greedy
// and seeded top-k / top-p rows). scripts/check_step_vs_torch.py recomputes each independently in torch / numpy
// (the GGUF blocks decoded by gguf-py, the routing as DeepSeek's reference code writes it).
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/quant_type.h"

namespace attnzoo::bench {

struct HostArray;

// N(0, 1) values with every row scaled by 2^(r % 7 - 3), quantized to `t` by the CPU's quantizer: the blocks a
// GGUF file holds, rows of differing scale.
std::vector<uint8_t> quantized_rows(QuantType t, int64_t rows, int64_t cols, uint32_t seed);
// The bytes as a uint8 [rows, bytes / rows] array.
HostArray bytes_array(const std::vector<uint8_t>& bytes, int64_t rows);

// Runs every step case on `device`, writes its files into `dir` and hands each manifest entry to `add`.
void write_step_cases(const std::filesystem::path& dir, Device device, uint32_t& seed,
                      const std::function<void(const std::string& entry, bool refused)>& add);

}  // namespace attnzoo::bench
