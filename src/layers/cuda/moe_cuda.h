#pragma once
// A mixture-of-experts feed-forward's routed half on an NVIDIA GPU, after the routing (routing_cuda.h) and without
// a host round trip: the routed (token, slot) entries grouped by expert, their normed rows gathered into that
// order, each expert's segment multiplied by its own weights in one grouped GEMM launch, and the slots combined
// into the residual stream. The twin of layers/moe.h's run_routed_experts: a token's slots are summed in slot
// order, after the shared expert's output, as the CPU sums them. No CUDA headers here.
//
//   moe_group_cuda     experts int32 [T, top_k] -> offsets / tiles [E + 1], source / dest [T * top_k] (int32)
//                      (through counts, a prefill's scratch: moe_group_scratch)
//   moe_gather_cuda    h [T, H] (f32 / bf16 / f16) -> x [T * top_k, H] in W's dtype, row r = h[source[r] / top_k]
//   grouped_gemm_cuda  y [n, N] = x [n, K] W[e]^T over each expert e's rows [offsets[e], offsets[e + 1])
//   moe_combine_cuda   x[t] += shared[t] (* sigmoid(gate[t])) + sum over slots j of weight[t, j] * y[dest[t, j]]
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/activations.h"
#include "layers/cuda/gemm_plan.h"

namespace attnzoo {

// The grouped order of a step's n = T * top_k routed entries (entry i = t * top_k + j), all int32 on the device:
// stable, so rows go by expert, then token, then slot, and a step's order never depends on timing.
struct MoeGroupingCuda {
  TensorView offsets;  // [E + 1]: expert e's rows of the grouped order are [offsets[e], offsets[e + 1])
  TensorView tiles;    // [E + 1]: the prefix sums of ceil(rows_e / tile_rows), the grouped GEMM's row tiles
  TensorView source;   // [n]: the entry grouped row r holds
  TensorView dest;     // [n]: the grouped row of entry i
  // [moe_group_scratch(n, E)] int32 scratch of the grouping alone; may stay empty when that is 0 (a decode step).
  TensorView counts;
};

// The scratch moe_group_cuda needs for n entries over E experts: E per CTA once n spreads over several CTAs
// (moe_plan.h), else 0.
int64_t moe_group_scratch(int64_t n, int64_t experts);

// The grouped GEMM's tile for n routed rows over E experts: the large tile once the average expert fills one.
// The grouping's tile_rows is that tile's BM.
cuda_gemm::TileKind moe_tile(int64_t rows, int64_t experts);
int64_t moe_tile_rows(cuda_gemm::TileKind tile);

// Every refusal, before any CUDA call. ArgumentError / DTypeError naming the argument.
void check_moe_group_cuda(const TensorView& experts, int64_t num_experts, int64_t tile_rows, const MoeGroupingCuda& g);
void check_moe_gather_cuda(const TensorView& h, const TensorView& source, int64_t top_k, const TensorView& x);
void check_grouped_gemm_cuda(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, const TensorView& y);
void check_moe_combine_cuda(const TensorView& expert_out, const TensorView& dest, const TensorView& weights,
                            const TensorView* shared, const TensorView* shared_gate, const TensorView& x);

void check_router_logits_cuda(const TensorView& x, const TensorView& w, const TensorView& logits);
void check_activation_inplace_cuda(const TensorView& x);

// The launchers (moe.cu, CUDA builds only) check first, then run on the tensors' device and `stream`.
// logits f32 [T, E] = x [T, H] (f32, bf16 or f16: the runner's bf16 normed rows, widened exactly; any row stride)
// w f32 [E, H]ᵀ in f32: the router a checkpoint keeps in f32
// (DeepSeek-V3, GLM-4.5, LFM2-MoE: transformers keeps gate.weight f32, since a rounded router can pick other
// experts), which the bf16 tensor-core GEMM would round. A warp per (token, expert) dot product.
void router_logits_cuda(const TensorView& x, const TensorView& w, const TensorView& logits,
                        Stream stream = current_stream());
// x <- act(x) over a contiguous f32 tensor: the ungated experts' activation (PlainMlp: Nemotron-H's relu²), the twin
// of apply_activation_inplace with elementwise_kernel.cuh's formulas.
void activation_inplace_cuda(Activation act, const TensorView& x, Stream stream = current_stream());
// experts: the routing's ids, every one in [0, num_experts) (route_top_k_cuda's output is).
void moe_group_cuda(const TensorView& experts, int64_t num_experts, int64_t tile_rows, const MoeGroupingCuda& g,
                    Stream stream = current_stream());
// h f32 / bf16 / f16 [T, H] (any row stride); source int32 [n]; x [n, H] bf16 / f16 contiguous.
void moe_gather_cuda(const TensorView& h, const TensorView& source, int64_t top_k, const TensorView& x,
                     Stream stream = current_stream());
// x [n, K] (any float dtype, contiguous last dimension), w [E, N, K] bf16 / f16 contiguous, y [n, N] f32 / bf16 /
// f16; the grid is sized for the worst case (n / BM + min(E, n) row tiles) and the CTAs past the step's tiles
// exit, so one launch serves any expert load, and a decode step of a few rows launches a few CTAs per column
// block, not E GEMMs. `tile` must be the one the grouping's tile_rows came from.
void grouped_gemm_cuda(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, cuda_gemm::TileKind tile,
                       const TensorView& y, Stream stream = current_stream());
// expert_out f32 [n, H]; dest int32 [n]; weights f32 [T, top_k]; shared f32 [T, H] or null; shared_gate f32 [T, 1]
// (logits, sigmoid taken here) or null, only with shared; x f32 [T, H], the residual stream, added into.
void moe_combine_cuda(const TensorView& expert_out, const TensorView& dest, const TensorView& weights,
                      const TensorView* shared, const TensorView* shared_gate, const TensorView& x,
                      Stream stream = current_stream());

}  // namespace attnzoo
