// gemm_cuda's cuBLASLt path (gemm_cublaslt.h), compiled only where cmake/Cuda.cmake found cublasLt.h and its
// library (ATTNZOO_WITH_CUBLASLT, linked as CUDA::cublasLt); elsewhere only cublaslt_built() and a refusal.
//
// cuBLASLt is column-major, so the row-major y[M, N] = x W^T is computed as its transpose: y^T (N x M, ld ldy) =
// op_T(A) op_N(B) with A = W seen as the K x N column-major matrix it already is (ld ldw) and B = x as K x M (ld
// ldx); the bias epilogue adds a vector along D's rows, i.e. one value per output feature n, and beta = 1 is the
// accumulation into y. No copy or transpose of anything.
//
// Per device and stream (the "owner": a workspace must not be shared by kernels that may run concurrently) one
// handle and one 32 MiB workspace (cuBLAS's recommendation on Hopper), and per problem shape (sizes, strides,
// dtypes, epilogue and the operands' pointer alignment, which the chosen kernel may rely on) the descriptors and
// the heuristic's first algorithm, made once and kept for the process.
#include "layers/cuda/gemm_cublaslt.h"

#include "core/error.h"

#if !defined(ATTNZOO_WITH_CUBLASLT)
namespace attnzoo {
bool cublaslt_built() { return false; }
void cublaslt_gemm(const GemmProblem&, Stream) { throw DeviceError("cuBLASLt: this build has none"); }
}  // namespace attnzoo
#else
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "core/cuda_check.h"

namespace attnzoo {
namespace {

void lt_check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS) throw DeviceError(std::string(call) + ": " + cublasLtGetStatusString(status));
}

cudaDataType_t lt_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, bool, uint32_t,
                           uint32_t, uint32_t, uint32_t>;

PlanKey key_of(const GemmProblem& p) {
  return {p.M, p.N, p.K, p.ldx, p.ldw, p.ldy, int(p.x_dtype), int(p.w_dtype), int(p.y_dtype),
          p.bias ? int(p.bias_dtype) : -1, p.accumulate, alignment_of(p.x), alignment_of(p.w), alignment_of(p.y),
          p.bias ? alignment_of(p.bias) : 0u};
}

// One shape's descriptors and algorithm. The bias pointer is set per call (the descriptor is otherwise fixed).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  Plan(cublasLtHandle_t handle, const GemmProblem& p, size_t workspace_bytes) {
    lt_check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
             "cublasLtMatmulDescSetAttribute(TRANSA)");
    lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none),
             "cublasLtMatmulDescSetAttribute(TRANSB)");
    if (p.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bias_type = lt_type(p.bias_dtype);
      lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)");
      lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
               "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
      set_bias(p.bias);  // the heuristic reads its alignment
    }
    lt_check(cublasLtMatrixLayoutCreate(&a, lt_type(p.w_dtype), uint64_t(p.K), uint64_t(p.N), p.ldw),
             "cublasLtMatrixLayoutCreate(w)");
    lt_check(cublasLtMatrixLayoutCreate(&b, lt_type(p.x_dtype), uint64_t(p.K), uint64_t(p.M), p.ldx),
             "cublasLtMatrixLayoutCreate(x)");
    lt_check(cublasLtMatrixLayoutCreate(&d, lt_type(p.y_dtype), uint64_t(p.N), uint64_t(p.M), p.ldy),
             "cublasLtMatrixLayoutCreate(y)");

    cublasLtMatmulPreference_t pref = nullptr;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t bytes) {
      const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, attr, value, bytes);
      if (s != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);
      lt_check(s, "cublasLtMatmulPreferenceSetAttribute");
    };
    const uint64_t ws = workspace_bytes;
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const uint32_t align_a = alignment_of(p.w), align_b = alignment_of(p.x), align_d = alignment_of(p.y);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    lt_check(s, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw DeviceError("cublasLtMatmulAlgoGetHeuristic: no algorithm for M = " + std::to_string(p.M) + ", N = " +
                        std::to_string(p.N) + ", K = " + std::to_string(p.K));
    algo = result.algo;
  }
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
  void set_bias(const void* bias) {
    lt_check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
};

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Owner {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  explicit Owner(Device device) : workspace(device, kWorkspaceBytes) {
    lt_check(cublasLtCreate(&handle), "cublasLtCreate");
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  // Kept for the process: destroying a handle at exit can run after the CUDA runtime has gone.
  ~Owner() = default;
};

// One lock for the owners and their plans: a plan's bias pointer is set and used within it. Holding it across the
// (asynchronous) cublasLtMatmul call costs a launch, not a GEMM.
std::mutex g_mutex;
std::map<std::pair<int, void*>, std::unique_ptr<Owner>>& owners() {
  static auto* map = new std::map<std::pair<int, void*>, std::unique_ptr<Owner>>();  // never destroyed, as above
  return *map;
}

}  // namespace

bool cublaslt_built() { return true; }

void cublaslt_gemm(const GemmProblem& p, Stream stream) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  std::unique_ptr<Owner>& owner = owners()[{p.device.index, stream.handle}];
  if (!owner) owner = std::make_unique<Owner>(p.device);
  std::unique_ptr<Plan>& plan = owner->plans[key_of(p)];
  if (!plan) plan = std::make_unique<Plan>(owner->handle, p, kWorkspaceBytes);
  if (p.bias) plan->set_bias(p.bias);
  const float alpha = 1.f, beta = p.accumulate ? 1.f : 0.f;
  lt_check(cublasLtMatmul(owner->handle, plan->desc, &alpha, p.w, plan->a, p.x, plan->b, &beta, p.y, plan->d, p.y,
                          plan->d, &plan->algo, owner->workspace.data(), kWorkspaceBytes,
                          static_cast<cudaStream_t>(stream.handle)),
           "cublasLtMatmul");
}

}  // namespace attnzoo
#endif  // ATTNZOO_WITH_CUBLASLT
