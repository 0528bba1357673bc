#pragma once
// The GPU runners' own kernels in `attnzoo bench kernels --device cuda`, beside the shared ones
// (cuda_layer_bench.h), each through the launcher the runner calls; bandwidth rows (bytes read + written per
// second, the copy's count):
//   rwkv7_step     RWKV-7's per-token kernels (cuda_rwkv7_bench.h)
//   gpt_oss_moe    gpt-oss-20b's expert extras over a 4096-token prefill's 16384 routed rows (32 experts, I 2880):
//                  grouped_bias (the [n, 2I] gate | up rows += their expert's bias) and the clamped SwiGLU
//   head_rows      MLA's expanded prefill around DeepSeek-V3's 128 heads (copy_head_rows_cuda): k_nope into the
//                  padded K, the shared rope key broadcast to every head, V padded to 256
//   moe_group      the MoE grouping by expert (moe_group_cuda): a decode step's 512 entries (one CTA) and a
//                  4096-token prefill's 32768 (count, scan, scatter over several CTAs), Qwen3-MoE's 128 experts top-8
// On the CPU (make test) the same rows run the CPU twins (the gpt-oss expert's bias and gpt_oss_clamped_swiglu,
// copy_head_rows, the CPU MoE's stable grouping) on the same arguments.
#include <cstdint>
#include <vector>

#include "bench/bandwidth_tables.h"

namespace attnzoo::bench {

std::vector<LinearCase> gpt_oss_moe_cases(Scale s);  // dims n (routed rows), E, I
std::vector<LinearCase> head_rows_cases(Scale s);    // dims N (tokens), H, src_heads, cols, width
std::vector<LinearCase> moe_group_cases(Scale s);    // dims T, top_k, E
double gpt_oss_moe_bytes(const LinearCase& c);
double head_rows_bytes(const LinearCase& c);  // the source heads read, the destination's rows written (pad included)
double moe_group_bytes(const LinearCase& c);  // the ids read, source and dest written, offsets and tiles

// The grouping's CPU twin: the CPU MoE's per-expert lists of the n entries (ids in [0, E)) as moe_group_cuda's
// arrays, offsets and tiles [E + 1], source and dest [n].
void moe_group_host(const int32_t* ids, int64_t n, int64_t E, int64_t tile_rows, int32_t* offsets, int32_t* tiles,
                    int32_t* source, int32_t* dest);

// rwkv7_step, gpt_oss_moe, head_rows, moe_group, in the report's order.
const std::vector<BandwidthTable>& runner_tables();

}  // namespace attnzoo::bench
