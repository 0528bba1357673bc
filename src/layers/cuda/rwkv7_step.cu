// RWKV-7's per-token launchers (rwkv7_step_cuda.h); the kernels' bodies are rwkv7_step_kernel.cuh.
#include <cuda_runtime.h>

#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/rwkv7_step_cuda.h"
#include "layers/cuda/rwkv7_step_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_layer_norm_kernel(const Rwkv7NormParams p) {
  rwkv7_layer_norm(p);
}
__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_shift_mix_kernel(const Rwkv7ShiftParams p) {
  rwkv7_shift_mix(p);
}
__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_norm_shift_mix_kernel(const Rwkv7NormShiftParams p) {
  rwkv7_norm_shift_mix(p);
}
template <class Out>
__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_activate_kernel(const Rwkv7ActParams<Out> p) {
  rwkv7_activate(p);
}
__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_prepare_keys_kernel(const Rwkv7KeyParams p) {
  rwkv7_prepare_keys(p);
}
__global__ void __launch_bounds__(kRwkv7Threads) rwkv7_output_kernel(const Rwkv7OutputParams p) { rwkv7_output(p); }

cudaStream_t native(Stream s) { return static_cast<cudaStream_t>(s.handle); }

}  // namespace
}  // namespace cuda_step

using namespace cuda_step;

void rwkv7_layer_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& bias, const TensorView& y,
                           float eps, Stream stream) {
  check_rwkv7_layer_norm_cuda(x, weight, bias, y, eps);
  const Rwkv7NormParams p{x.ptr<const float>(), y.ptr<float>(), weight.ptr<const float>(),
                          bias.data ? bias.ptr<const float>() : nullptr, x.shape[0], 1, x.shape[1], eps};
  if (p.rows == 0) return;
  const DeviceGuard on(x.device);
  rwkv7_layer_norm_kernel<<<grid_for(p.rows, kRwkv7Warps), kRwkv7Threads, 0, native(stream)>>>(p);
  cuda_check(cudaGetLastError(), "rwkv7_layer_norm_kernel launch");
}

void rwkv7_shift_mix_cuda(const Rwkv7TokenShift& s, Stream stream) {
  check_rwkv7_shift_mix_cuda(s);
  const int64_t T = s.x.shape[0], C = s.x.shape[1];
  if (T == 0) return;
  const Rwkv7ShiftParams p{s.x.ptr<const float>(), s.shift, s.shift_stride, s.slots, s.seq_of, s.cu_seqlens,
                           s.mixes.ptr<const float>(), s.out.ptr<__nv_bfloat16>(), T, C, int(s.mixes.shape[0])};
  const DeviceGuard on(s.x.device);
  if (s.norm_weight.data) {
    const Rwkv7NormShiftParams q{p, s.norm_weight.ptr<const float>(),
                                 s.norm_bias.data ? s.norm_bias.ptr<const float>() : nullptr, s.eps};
    rwkv7_norm_shift_mix_kernel<<<grid_for(T, kRwkv7Warps), kRwkv7Threads, 0, native(stream)>>>(q);
    cuda_check(cudaGetLastError(), "rwkv7_norm_shift_mix_kernel launch");
    return;
  }
  rwkv7_shift_mix_kernel<<<grid_for(T * C, kRwkv7Threads), kRwkv7Threads, 0, native(stream)>>>(p);
  cuda_check(cudaGetLastError(), "rwkv7_shift_mix_kernel launch");
}

void rwkv7_activate_cuda(Rwkv7Activation act, const TensorView& x, const TensorView& y, Stream stream) {
  check_rwkv7_activate_cuda(x, y);
  const int64_t n = x.numel();
  if (n == 0) return;
  const DeviceGuard on(x.device);
  const unsigned blocks = grid_for(n, kRwkv7Threads);
  if (y.dtype == DType::f32) {
    rwkv7_activate_kernel<float><<<blocks, kRwkv7Threads, 0, native(stream)>>>(
        Rwkv7ActParams<float>{x.ptr<const float>(), y.ptr<float>(), n, act});
  } else {
    rwkv7_activate_kernel<__nv_bfloat16><<<blocks, kRwkv7Threads, 0, native(stream)>>>(
        Rwkv7ActParams<__nv_bfloat16>{x.ptr<const float>(), y.ptr<__nv_bfloat16>(), n, act});
  }
  cuda_check(cudaGetLastError(), "rwkv7_activate_kernel launch");
}

void rwkv7_activate_pair_cuda(Rwkv7Activation act0, const TensorView& x0, const TensorView& y0, Rwkv7Activation act1,
                              const TensorView& x1, const TensorView& y1, Stream stream) {
  check_rwkv7_activate_cuda(x0, y0);
  check_rwkv7_activate_cuda(x1, y1);
  require(y1.dtype == y0.dtype && x1.device == x0.device, "y1", "must be of y0's dtype, on x0's device");
  const int64_t n0 = x0.numel(), n1 = x1.numel();
  if (n0 + n1 == 0) return;
  const DeviceGuard on(x0.device);
  const unsigned blocks = grid_for(n0 + n1, kRwkv7Threads);
  auto params = [&](auto* y0p, auto* y1p) {
    using Out = std::remove_pointer_t<decltype(y0p)>;
    return Rwkv7ActParams<Out>{x0.ptr<const float>(), y0p, n0, act0, x1.ptr<const float>(), y1p, n1, act1};
  };
  if (y0.dtype == DType::f32) {
    rwkv7_activate_kernel<float><<<blocks, kRwkv7Threads, 0, native(stream)>>>(
        params(y0.ptr<float>(), y1.ptr<float>()));
  } else {
    rwkv7_activate_kernel<__nv_bfloat16><<<blocks, kRwkv7Threads, 0, native(stream)>>>(
        params(y0.ptr<__nv_bfloat16>(), y1.ptr<__nv_bfloat16>()));
  }
  cuda_check(cudaGetLastError(), "rwkv7_activate_kernel launch");
}

void rwkv7_prepare_keys_cuda(const Rwkv7Keys& k, Stream stream) {
  check_rwkv7_prepare_keys_cuda(k);
  const int64_t T = k.k.shape[0], H = k.heads;
  if (T == 0) return;
  const Rwkv7KeyParams p{k.w.data ? k.w.ptr<float>() : nullptr,
                         k.k.ptr<float>(),         k.a.ptr<float>(),
                         k.a_rec.ptr<float>(),     k.k_k.ptr<const float>(),
                         k.k_a.ptr<const float>(), k.v.ptr<float>(),
                         k.v_first.ptr<float>(),   k.v_gate.data ? k.v_gate.ptr<const float>() : nullptr,
                         T,                        H,
                         k.k.shape[1] / H,         k.v.shape[1] / H,
                         k.fused_l2norm};
  const DeviceGuard on(k.k.device);
  rwkv7_prepare_keys_kernel<<<grid_for(T * H, kRwkv7Warps), kRwkv7Threads, 0, native(stream)>>>(p);
  cuda_check(cudaGetLastError(), "rwkv7_prepare_keys_kernel launch");
}

void rwkv7_output_cuda(const Rwkv7Output& o, Stream stream) {
  check_rwkv7_output_cuda(o);
  const int64_t T = o.o.shape[0], H = o.heads;
  if (T == 0) return;
  const Rwkv7OutputParams p{o.o.ptr<const float>(),     o.norm_weight.ptr<const float>(),
                            o.norm_bias.ptr<const float>(), o.r.ptr<const float>(),
                            o.k.ptr<const float>(),     o.r_k.ptr<const float>(),
                            o.v.ptr<const float>(),     o.g.ptr<const float>(),
                            o.out.ptr<__nv_bfloat16>(), T,
                            H,                          o.r.shape[1] / H,
                            o.o.shape[1] / H,           o.eps};
  const DeviceGuard on(o.o.device);
  rwkv7_output_kernel<<<grid_for(T * H, kRwkv7Warps), kRwkv7Threads, 0, native(stream)>>>(p);
  cuda_check(cudaGetLastError(), "rwkv7_output_kernel launch");
}

}  // namespace attnzoo
