// The MoE dispatch launchers (moe_cuda.h): the checks and the grouped GEMM's plan are moe_checks.cc's, the
// kernels' bodies moe_kernel.cuh and grouped_gemm_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/grouped_gemm_kernel.cuh"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/moe_kernel.cuh"
#include "layers/cuda/moe_plan.h"
#include "layers/cuda/tiled_launch.cuh"

namespace attnzoo {
namespace cuda_moe {
namespace {

constexpr int kElementThreads = 256;

__global__ void __launch_bounds__(kGroupThreads) group_kernel(const GroupParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  group_entries(p, smem);
}

__global__ void __launch_bounds__(kGroupThreads) count_kernel(const GroupParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  count_entries(p, smem);
}

__global__ void __launch_bounds__(kScanThreads) scan_kernel(const GroupParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  scan_counts(p, smem);
}

__global__ void __launch_bounds__(kGroupThreads) scatter_kernel(const GroupParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  scatter_entries(p, smem);
}

template <class In, class Out>
__global__ void __launch_bounds__(kElementThreads) gather_kernel(const GatherParams p) {
  gather_rows<In, Out>(p);
}

__global__ void __launch_bounds__(kElementThreads) combine_kernel(const CombineParams p) { combine_slots(p); }

template <class In>
__global__ void __launch_bounds__(kElementThreads) router_kernel(const RouterParams p) {
  router_dots<In>(p);
}

// gather_kernel<In, Out> for h's dtype In.
template <class Out>
void launch_gather(DType h, unsigned grid, cudaStream_t s, const GatherParams& p) {
  if (h == DType::bf16) gather_kernel<__nv_bfloat16, Out><<<grid, kElementThreads, 0, s>>>(p);
  else if (h == DType::f16) gather_kernel<__half, Out><<<grid, kElementThreads, 0, s>>>(p);
  else gather_kernel<float, Out><<<grid, kElementThreads, 0, s>>>(p);
}

template <Activation kAct>
__global__ void __launch_bounds__(kElementThreads) activation_kernel(const ActivationParams p) {
  activate_in_place<kAct>(p);
}

template <class Tile, class W>
__global__ void __launch_bounds__(Tile::kThreads) grouped_gemm_kernel(const GroupedGemmParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  grouped_gemm_block<Tile, W>(p, smem);
}

template <class Tile, class W>
void launch_grouped(const GroupedGemmLaunch& l, cudaStream_t stream) {
  cuda_gemm::launch_tiled<Tile>(grouped_gemm_kernel<Tile, W>, l, stream, "grouped_gemm_kernel launch");
}

}  // namespace
}  // namespace cuda_moe

void moe_group_cuda(const TensorView& experts, int64_t num_experts, int64_t tile_rows, const MoeGroupingCuda& g,
                    Stream stream) {
  using namespace cuda_moe;
  check_moe_group_cuda(experts, num_experts, tile_rows, g);
  const DeviceGuard on(experts.device);
  const GroupPlan plan = plan_group(experts.numel());
  const GroupParams p{experts.ptr<const int32_t>(), int(experts.numel()), int(num_experts), int(tile_rows),
                      g.offsets.ptr<int32_t>(), g.tiles.ptr<int32_t>(), g.source.ptr<int32_t>(), g.dest.ptr<int32_t>(),
                      plan.ctas > 1 ? g.counts.ptr<int32_t>() : nullptr, plan.ctas, plan.range};
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const size_t smem = group_smem_bytes(p.experts);
  if (plan.ctas == 1) {
    // Runs for n = 0 too: the offsets and tiles of an empty step are zeros.
    group_kernel<<<1, kGroupThreads, smem, s>>>(p);
    cuda_check(cudaGetLastError(), "moe group_kernel launch");
    return;
  }
  count_kernel<<<unsigned(plan.ctas), kGroupThreads, smem, s>>>(p);
  cuda_check(cudaGetLastError(), "moe count_kernel launch");
  scan_kernel<<<1, kScanThreads, scan_smem_bytes(p.experts), s>>>(p);
  cuda_check(cudaGetLastError(), "moe scan_kernel launch");
  scatter_kernel<<<unsigned(plan.ctas), kGroupThreads, smem, s>>>(p);
  cuda_check(cudaGetLastError(), "moe scatter_kernel launch");
}

void moe_gather_cuda(const TensorView& h, const TensorView& source, int64_t top_k, const TensorView& x,
                     Stream stream) {
  using namespace cuda_moe;
  check_moe_gather_cuda(h, source, top_k, x);
  if (x.shape[0] == 0 || x.shape[1] == 0) return;
  const DeviceGuard on(h.device);
  const GatherParams p{h.data, h.strides[0], source.ptr<const int32_t>(), x.data,
                       int(x.shape[0]), int(x.shape[1]), int(top_k)};
  const unsigned grid = cuda_step::grid_for(x.numel(), kElementThreads);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (x.dtype == DType::bf16) launch_gather<__nv_bfloat16>(h.dtype, grid, s, p);
  else launch_gather<__half>(h.dtype, grid, s, p);
  cuda_check(cudaGetLastError(), "moe gather_kernel launch");
}

void grouped_gemm_cuda(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, cuda_gemm::TileKind tile,
                       const TensorView& y, Stream stream) {
  using namespace cuda_moe;
  check_grouped_gemm_cuda(x, w, g, y);
  if (x.shape[0] == 0 || w.shape[1] == 0) return;
  const DeviceGuard on(w.device);
  const GroupedGemmLaunch l = plan_grouped_gemm(x, w, g, tile, y);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const bool bf16 = w.dtype == DType::bf16;
  if (tile == cuda_gemm::TileKind::large) {
    bf16 ? launch_grouped<cuda_gemm::LargeTile, __nv_bfloat16>(l, s) : launch_grouped<cuda_gemm::LargeTile, __half>(l, s);
  } else {
    bf16 ? launch_grouped<cuda_gemm::SmallTile, __nv_bfloat16>(l, s) : launch_grouped<cuda_gemm::SmallTile, __half>(l, s);
  }
}

void moe_combine_cuda(const TensorView& expert_out, const TensorView& dest, const TensorView& weights,
                      const TensorView* shared, const TensorView* shared_gate, const TensorView& x, Stream stream) {
  using namespace cuda_moe;
  check_moe_combine_cuda(expert_out, dest, weights, shared, shared_gate, x);
  if (x.shape[0] == 0 || x.shape[1] == 0) return;
  const DeviceGuard on(x.device);
  const CombineParams p{expert_out.ptr<const float>(),
                        dest.ptr<const int32_t>(),
                        weights.ptr<const float>(),
                        shared ? shared->ptr<const float>() : nullptr,
                        shared ? shared->strides[0] : 0,
                        shared_gate ? shared_gate->ptr<const float>() : nullptr,
                        shared_gate ? shared_gate->strides[0] : 0,
                        x.ptr<float>(),
                        x.strides[0],
                        int(x.shape[0]),
                        int(x.shape[1]),
                        int(weights.shape[1])};
  combine_kernel<<<cuda_step::grid_for(x.shape[0] * x.shape[1], kElementThreads), kElementThreads, 0,
                   static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "moe combine_kernel launch");
}

void router_logits_cuda(const TensorView& x, const TensorView& w, const TensorView& logits, Stream stream) {
  using namespace cuda_moe;
  check_router_logits_cuda(x, w, logits);
  if (logits.numel() == 0) return;
  const DeviceGuard on(x.device);
  const RouterParams p{x.data, x.strides[0], w.ptr<const float>(), logits.ptr<float>(),
                       int(x.shape[0]), int(w.shape[0]), int(x.shape[1])};
  const unsigned grid = cuda_step::grid_for(logits.numel(), kElementThreads / 32);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (x.dtype == DType::bf16) router_kernel<__nv_bfloat16><<<grid, kElementThreads, 0, s>>>(p);
  else if (x.dtype == DType::f16) router_kernel<__half><<<grid, kElementThreads, 0, s>>>(p);
  else router_kernel<float><<<grid, kElementThreads, 0, s>>>(p);
  cuda_check(cudaGetLastError(), "moe router_kernel launch");
}

void activation_inplace_cuda(Activation act, const TensorView& x, Stream stream) {
  using namespace cuda_moe;
  check_activation_inplace_cuda(x);
  if (x.numel() == 0) return;
  const DeviceGuard on(x.device);
  const ActivationParams p{x.ptr<float>(), x.numel()};
  const unsigned grid = cuda_step::grid_for(p.count, kElementThreads);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  switch (act) {
    case Activation::silu: activation_kernel<Activation::silu><<<grid, kElementThreads, 0, s>>>(p); break;
    case Activation::gelu_tanh: activation_kernel<Activation::gelu_tanh><<<grid, kElementThreads, 0, s>>>(p); break;
    case Activation::gelu: activation_kernel<Activation::gelu><<<grid, kElementThreads, 0, s>>>(p); break;
    case Activation::relu2: activation_kernel<Activation::relu2><<<grid, kElementThreads, 0, s>>>(p); break;
  }
  cuda_check(cudaGetLastError(), "moe activation_kernel launch");
}

}  // namespace attnzoo
