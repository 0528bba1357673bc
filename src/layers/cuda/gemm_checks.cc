// The GEMM entry's host side that needs no CUDA (gemm_cuda.h): the problem's checks, which implementation runs
// it, and our kernel's launch plan, so refusals and plans are tested on machines without a GPU.
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "layers/cuda/gemm_cuda.h"
#include "layers/cuda/gemm_plan.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// A 2-D operand with a contiguous last dimension and a non-negative row stride.
void require_matrix(const TensorView& t, const char* name, const char* dims) {
  require(t.ndim == 2, name, [&] { return std::string("must be 2-D ") + dims + ", got shape " + t.shape_str(); });
  require(t.strides[1] == 1 || t.shape[1] <= 1, name,
          [&] { return "last dimension must be contiguous (stride 1), got stride " + str(t.strides[1]); });
  require(t.strides[0] >= 0, name, [&] { return "negative row stride " + str(t.strides[0]); });
}

void require_dim(const TensorView& t, const char* name, int d, int64_t want, const char* what) {
  require(t.shape[size_t(d)] == want, name, [&] {
    return "shape " + t.shape_str() + ": dimension " + str(d) + " must be " + what + " = " + str(want);
  });
}

bool aligned16(const void* p, int64_t ld, DType t) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld * int64_t(dtype_size(t)) % 16 == 0;
}

}  // namespace

const char* gemm_backend_name(GemmBackend b) {
  switch (b) {
    case GemmBackend::ours: return "ours";
    case GemmBackend::cublaslt: return "cublaslt";
    default: return "automatic";
  }
}

GemmProblem make_gemm_problem(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                              const GemmOptions& opts) {
  require_cuda_tensor(x, "x");
  require_cuda_tensor(w, "w", &x.device);
  require_cuda_tensor(y, "y", &x.device);
  if (bias) require_cuda_tensor(*bias, "bias", &x.device);
  require_float_dtype(x, "x");
  require_float_dtype(y, "y");
  if (w.dtype != DType::bf16 && w.dtype != DType::f16)
    throw DTypeError(std::string("w: dtype ") + dtype_name(w.dtype) + " is not supported (bfloat16 or float16)");
  require_matrix(x, "x", "[M, K]");
  require_matrix(w, "w", "[N, K]");
  require_matrix(y, "y", "[M, N]");
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  require_dim(w, "w", 1, K, "x's K");
  require_dim(y, "y", 0, M, "x's M");
  require_dim(y, "y", 1, N, "w's N");
  // Rows written by different threads must be different memory.
  require(M <= 1 || y.strides[0] >= N, "y", [&] { return "rows overlap: row stride " + str(y.strides[0]) + " < N = " + str(N); });
  if (bias) {
    if (!is_float(bias->dtype))
      throw DTypeError(std::string("bias: dtype ") + dtype_name(bias->dtype) + " is not a float dtype");
    require(bias->ndim == 1 && bias->shape[0] == N, "bias",
            [&] { return "must be 1-D [N] with N = " + str(N) + ", got shape " + bias->shape_str(); });
    require(bias->strides[0] == 1 || N <= 1, "bias", "must be contiguous");
  }
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  require(M <= kMax && N <= kMax && K <= kMax, "x", [&] {
    return "M = " + str(M) + ", N = " + str(N) + ", K = " + str(K) + ": each must be below 2^31";
  });

  GemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.x = x.data, p.w = w.data, p.y = y.data, p.bias = bias ? bias->data : nullptr;
  p.ldx = x.strides[0], p.ldw = w.strides[0], p.ldy = y.strides[0];
  p.x_dtype = x.dtype, p.w_dtype = w.dtype, p.y_dtype = y.dtype;
  if (bias) p.bias_dtype = bias->dtype;
  p.accumulate = opts.accumulate;
  p.device = x.device;
  return p;
}

bool cublaslt_takes(const GemmProblem& p, const char** why) {
  const char* reason = nullptr;
  if (!cublaslt_built()) reason = "this build has no cuBLASLt (configure found none, or ATTNZOO_CUBLASLT=OFF)";
  else if (p.K == 0) reason = "K = 0";
  else if (p.x_dtype != p.w_dtype) reason = "x and w differ in dtype (cuBLASLt multiplies one dtype)";
  else if (p.y_dtype != DType::f32 && p.y_dtype != p.w_dtype) reason = "y is neither float32 nor w's dtype";
  else if (p.bias && p.bias_dtype != p.y_dtype) reason = "bias's dtype differs from y's";
  if (why) *why = reason;
  return reason == nullptr;
}

GemmBackend resolve_gemm_backend(const GemmProblem& p, GemmBackend requested) {
  if (requested == GemmBackend::ours) return GemmBackend::ours;
  const char* why = nullptr;
  const bool takes = cublaslt_takes(p, &why);
  if (requested == GemmBackend::cublaslt)
    require(takes, "backend", [&] { return std::string("cublaslt cannot run this problem: ") + why; });
  return takes ? GemmBackend::cublaslt : GemmBackend::ours;
}

#if !defined(ATTNZOO_WITH_CUDA)
// A build without CUDA has no device tensors to multiply: the checks refuse what they would, then the build says
// why the rest cannot run.
GemmBackend gemm_cuda(const TensorView& x, const TensorView& w, const TensorView* bias, const TensorView& y,
                      const GemmOptions& opts, Stream) {
  make_gemm_problem(x, w, bias, y, opts);
  throw DeviceError("gemm_cuda: this build has no CUDA (ATTNZOO_CUDA=OFF or no compiler found)");
}
#endif

namespace cuda_gemm {

GemmLaunch plan_gemm(const GemmProblem& p, int sm_count, const TileKind* force) {
  auto blocks = [&](int bm, int bn) { return ((p.M + bm - 1) / bm) * ((p.N + bn - 1) / bn); };
  GemmLaunch l{};
  l.tile = force ? *force
                 : blocks(LargeTile::BM, LargeTile::BN) >= int64_t(sm_count) ? TileKind::large : TileKind::small;
  const int bm = l.tile == TileKind::large ? LargeTile::BM : SmallTile::BM;
  const int bn = l.tile == TileKind::large ? LargeTile::BN : SmallTile::BN;
  l.threads = l.tile == TileKind::large ? LargeTile::kThreads : SmallTile::kThreads;
  l.smem = l.tile == TileKind::large ? LargeTile::kSmemBytes : SmallTile::kSmemBytes;
  l.grid_m = unsigned((p.M + bm - 1) / bm);
  l.grid_n = unsigned((p.N + bn - 1) / bn);
  // blockIdx.y is below 65536 on every GPU: N up to 4M columns at 64 per block.
  require(l.grid_n <= 65535, "w", [&] { return "N = " + str(p.N) + " needs more than 65535 column blocks"; });

  GemmParams& g = l.params;
  g.x = p.x, g.w = p.w, g.bias = p.bias, g.y = p.y;
  g.ldx = p.ldx, g.ldw = p.ldw, g.ldy = p.ldy;
  g.M = int(p.M), g.N = int(p.N), g.K = int(p.K);
  g.x_type = cuda_linear::elem_of(p.x_dtype);
  g.bias_type = cuda_linear::elem_of(p.bias_dtype);
  g.y_type = cuda_linear::elem_of(p.y_dtype);
  const bool whole_pieces = p.K % 8 == 0;
  g.x_async = whole_pieces && p.x_dtype == p.w_dtype && aligned16(p.x, p.ldx, p.x_dtype);
  g.w_async = whole_pieces && aligned16(p.w, p.ldw, p.w_dtype);
  g.x_f32_pieces = whole_pieces && p.x_dtype == DType::f32 && aligned16(p.x, p.ldx, p.x_dtype);
  const int64_t pair = 2 * int64_t(dtype_size(p.y_dtype));
  g.y_pairs = reinterpret_cast<uintptr_t>(p.y) % pair == 0 && p.ldy % 2 == 0;
  g.accumulate = p.accumulate;
  return l;
}

}  // namespace cuda_gemm
}  // namespace attnzoo
