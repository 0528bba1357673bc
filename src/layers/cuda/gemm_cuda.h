#pragma once
// The projections' GEMM on an NVIDIA GPU: y = x W^T (+ bias) (+ y when accumulating), torch.nn.functional.linear's
// semantics. x [M, K] f32 / bf16 / f16 activations, W [N, K] bf16 / f16 as checkpoints store it (row-major, rows
// the output features), bias [N] of any float dtype, y [M, N] f32 / bf16 / f16; products in W's dtype (an x of
// another dtype is rounded to it while staged), f32 accumulation. `accumulate` adds into y (the residual stream
// fused into the output projection: y += x W^T, read and written once).
//
// Two implementations behind one entry: cuBLASLt, in builds whose configure step found it (ATTNZOO_CUBLASLT,
// cmake/Cuda.cmake), and ours on mma.sync tensor cores (gemm_kernel.cuh) everywhere else and for what cuBLASLt
// cannot multiply (x and W of different dtypes: f32 activations, bf16 x with f16 W). No CUDA headers here.
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace attnzoo {

enum class GemmBackend : uint8_t {
  automatic,  // cuBLASLt where built and it takes the problem, ours otherwise
  ours,       // the mma.sync kernel, always
  cublaslt,   // cuBLASLt or an error saying why not (tests and benches)
};
const char* gemm_backend_name(GemmBackend b);

struct GemmOptions {
  bool accumulate = false;
  GemmBackend backend = GemmBackend::automatic;
};

// A validated problem: what both implementations read. Strides are in elements; every last dimension is
// contiguous.
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;  // null: none
  void* y = nullptr;
  int64_t ldx = 0, ldw = 0, ldy = 0;
  DType x_dtype = DType::bf16, w_dtype = DType::bf16, bias_dtype = DType::f32, y_dtype = DType::f32;
  bool accumulate = false;
  Device device;
};

// Every refusal, before any CUDA call: x 2-D [M, K], w 2-D [N, K] bf16 / f16, bias 1-D [N] contiguous (may be
// null), y 2-D [M, N] with rows that do not overlap, every last dimension contiguous, all on one CUDA device,
// sizes below 2^31. ArgumentError / DTypeError naming the argument.
GemmProblem make_gemm_problem(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                              const GemmOptions& opts);

// Whether this build has the cuBLASLt path, and whether it takes `p`: x and W of one dtype, y f32 or W's dtype,
// bias none or of y's dtype (cuBLASLt's default bias type). `why` (may be null) gets the reason when not.
bool cublaslt_built();
bool cublaslt_takes(const GemmProblem& p, const char** why);

// The implementation `requested` resolves to for `p`: automatic picks cuBLASLt when built and it takes p;
// cublaslt when it cannot is an ArgumentError naming `backend` with the reason.
GemmBackend resolve_gemm_backend(const GemmProblem& p, GemmBackend requested);

// Checks, resolves the backend, then runs on the tensors' device and `stream` (gemm.cu; a build without CUDA
// refuses after the checks). Returns the backend that ran.
GemmBackend gemm_cuda(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                      const GemmOptions& opts = {}, Stream stream = current_stream());

}  // namespace attnzoo
