#pragma once
// A model step's memory-bound small kernels in `attnzoo bench kernels --device cuda`, each through the call a model
// step makes with device tensors: the paged KV write (write_paged_rows_cuda, unchecked as the step trusts its pool's
// slots; bf16 / int8 / fp8 caches), the embedding gather (EmbeddingCuda::lookup over a dense or GGUF table,
// device ids unchecked) and DeepSeek-V3's grouped routing (route_grouped_top_k_cuda). Bandwidth rows: bytes read +
// written per second, the copy bandwidth's count, so "of copy" compares like with like. On the CPU (make test)
// the same rows run the CPU twins (write_kv_paged, Embedding::lookup, route_grouped_top_k) on the same arguments.
#include <string>
#include <vector>

#include "bench/bandwidth_tables.h"

namespace attnzoo::bench {

// kernel "kv_write_<cache dtype>" (bfloat16, int8, float8_e4m3fn): T new tokens of Hkv heads x D, block_size.
std::vector<LinearCase> kv_write_cases(Scale s);
// The new rows read (bf16 k and v) and the cache rows and their f32 scales written.
double kv_write_bytes(const LinearCase& c);
// kernel "embedding_<table format>" (BF16, Q8_0, Q4_K, Q6_K): T ids into a [vocab, dim] table, f32 rows out.
std::vector<LinearCase> embedding_cases(Scale s);
double embedding_bytes(const LinearCase& c);  // T table rows read (as stored) + T x dim x 4 written
// kernel "grouped_routing": DeepSeek-V3's router (E 256, 8 groups, top-4 groups, top-8, sigmoid + bias), T tokens.
std::vector<LinearCase> grouped_routing_cases(Scale s);
double grouped_routing_bytes(const LinearCase& c);  // T x E f32 logits read + T x top_k (id, weight) written

// The tables above, in the report's order (keys kv_write, embedding, grouped_routing).
const std::vector<BandwidthTable>& step_tables();

}  // namespace attnzoo::bench
