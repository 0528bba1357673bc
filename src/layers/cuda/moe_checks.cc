// The MoE dispatch on CUDA, the host side that needs no CUDA: the tile choice, every refusal before a launch and the
// grouped GEMM's plan.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/moe_plan.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// A contiguous tensor of `dtype` and exactly `shape` on `device` (or any CUDA device when null).
void require_exact(const TensorView& t, const char* name, DType dtype, std::initializer_list<int64_t> shape,
                   const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != dtype)
    throw DTypeError(std::string(name) + ": dtype " + dtype_name(t.dtype) + ", expected " + dtype_name(dtype));
  bool same = t.ndim == int(shape.size());
  int d = 0;
  for (int64_t s : shape) same = same && t.shape[size_t(d++)] == s;
  require(same, name, [&] {
    std::string want = "[";
    for (int64_t s : shape) want += (want.size() > 1 ? ", " : "") + str(s);
    return "expected shape " + want + "], got " + t.shape_str();
  });
  require(t.is_contiguous(), name, "must be contiguous");
}

void require_rows(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  require(t.ndim == 2 && t.strides[0] >= t.shape[1] && (t.strides[1] == 1 || t.shape[1] <= 1), name,
          [&] { return "expected 2-D rows with a contiguous last dimension, got " + t.shape_str(); });
}

// The dtypes the gather and the router read rows of: the runner's bf16 normed rows, or f32 / f16 ones.
bool float_rows(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

void require_grouping(const MoeGroupingCuda& g, int64_t E, int64_t n, const Device* device) {
  require_exact(g.offsets, "offsets", DType::i32, {E + 1}, device);
  require_exact(g.tiles, "tiles", DType::i32, {E + 1}, device);
  require_exact(g.source, "source", DType::i32, {n}, device);
  require_exact(g.dest, "dest", DType::i32, {n}, device);
}

}  // namespace

cuda_gemm::TileKind moe_tile(int64_t rows, int64_t experts) {
  return rows >= experts * cuda_gemm::LargeTile::BM ? cuda_gemm::TileKind::large : cuda_gemm::TileKind::small;
}

int64_t moe_tile_rows(cuda_gemm::TileKind tile) {
  return tile == cuda_gemm::TileKind::large ? cuda_gemm::LargeTile::BM : cuda_gemm::SmallTile::BM;
}

int64_t moe_group_scratch(int64_t n, int64_t experts) {
  const cuda_moe::GroupPlan plan = cuda_moe::plan_group(n);
  return plan.ctas > 1 ? experts * plan.ctas : 0;
}

void check_moe_group_cuda(const TensorView& experts, int64_t num_experts, int64_t tile_rows, const MoeGroupingCuda& g) {
  require_cuda_tensor(experts, "experts");
  if (experts.dtype != DType::i32)
    throw DTypeError(std::string("experts: dtype ") + dtype_name(experts.dtype) + ", expected int32");
  require(experts.ndim == 2 && experts.is_contiguous(), "experts",
          [&] { return "expected a contiguous [tokens, top_k], got " + experts.shape_str(); });
  require(num_experts >= 1 && num_experts <= kMaxExpertsCuda, "num_experts",
          [&] { return "must be in [1, " + str(kMaxExpertsCuda) + "], got " + str(num_experts); });
  require(tile_rows >= 1, "tile_rows", [&] { return "must be positive, got " + str(tile_rows); });
  const int64_t n = experts.shape[0] * experts.shape[1];
  require(n < (int64_t(1) << 31), "experts", "T * top_k must be below 2^31");
  require_grouping(g, num_experts, n, &experts.device);
  const int64_t scratch = moe_group_scratch(n, num_experts);
  if (scratch > 0) require_exact(g.counts, "counts", DType::i32, {scratch}, &experts.device);
}

void check_moe_gather_cuda(const TensorView& h, const TensorView& source, int64_t top_k, const TensorView& x) {
  require_rows(h, "h", nullptr);
  if (!float_rows(h.dtype))
    throw DTypeError(std::string("h: dtype ") + dtype_name(h.dtype) + " is not supported (float32, bfloat16 or float16)");
  require(top_k >= 1, "top_k", [&] { return "must be positive, got " + str(top_k); });
  const int64_t n = h.shape[0] * top_k;
  require_exact(source, "source", DType::i32, {n}, &h.device);
  require_cuda_tensor(x, "x", &h.device);
  if (x.dtype != DType::bf16 && x.dtype != DType::f16)
    throw DTypeError(std::string("x: dtype ") + dtype_name(x.dtype) + " is not supported (bfloat16 or float16)");
  require(x.ndim == 2 && x.shape[0] == n && x.shape[1] == h.shape[1] && x.is_contiguous(), "x", [&] {
    return "expected a contiguous [" + str(n) + ", " + str(h.shape[1]) + "], got " + x.shape_str();
  });
}

void check_grouped_gemm_cuda(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, const TensorView& y) {
  require_cuda_tensor(w, "w");
  if (w.dtype != DType::bf16 && w.dtype != DType::f16)
    throw DTypeError(std::string("w: dtype ") + dtype_name(w.dtype) + " is not supported (bfloat16 or float16)");
  require(w.ndim == 3 && w.is_contiguous() && w.shape[0] >= 1, "w",
          [&] { return "expected a contiguous [experts, N, K], got " + w.shape_str(); });
  require(w.shape[0] <= kMaxExpertsCuda, "w",
          [&] { return str(w.shape[0]) + " experts: at most " + str(kMaxExpertsCuda); });
  require_rows(x, "x", &w.device);
  require_rows(y, "y", &w.device);
  require(x.shape[1] == w.shape[2], "x", [&] { return "K = " + str(x.shape[1]) + ", w's is " + str(w.shape[2]); });
  require(y.shape[0] == x.shape[0] && y.shape[1] == w.shape[1], "y",
          [&] { return "expected [" + str(x.shape[0]) + ", " + str(w.shape[1]) + "], got " + y.shape_str(); });
  require_grouping(g, w.shape[0], x.shape[0], &w.device);
  // make_gemm_problem's own checks (dtypes, sizes below 2^31) over expert 0's matrix.
  TensorView w0 = TensorView::contiguous(w.data, w.dtype, {w.shape[1], w.shape[2]});
  w0.device = w.device;
  make_gemm_problem(x, w0, nullptr, y, {});
}

void check_moe_combine_cuda(const TensorView& expert_out, const TensorView& dest, const TensorView& weights,
                            const TensorView* shared, const TensorView* shared_gate, const TensorView& x) {
  require_rows(x, "x", nullptr);
  if (x.dtype != DType::f32) throw DTypeError(std::string("x: dtype ") + dtype_name(x.dtype) + ", expected float32");
  const int64_t T = x.shape[0], H = x.shape[1];
  require(weights.ndim == 2 && weights.shape[0] == T, "weights",
          [&] { return "expected [" + str(T) + ", top_k], got " + weights.shape_str(); });
  const int64_t k = weights.shape[1];
  require_exact(weights, "weights", DType::f32, {T, k}, &x.device);
  require_exact(dest, "dest", DType::i32, {T * k}, &x.device);
  require_exact(expert_out, "expert_out", DType::f32, {T * k, H}, &x.device);
  if (shared) {
    require_rows(*shared, "shared", &x.device);
    if (shared->dtype != DType::f32 || shared->shape[0] != T || shared->shape[1] != H)
      throw ArgumentError("shared: expected float32 [" + str(T) + ", " + str(H) + "], got " +
                          dtype_name(shared->dtype) + " " + shared->shape_str());
  }
  if (shared_gate) {
    require(shared != nullptr, "shared_gate", "given without a shared expert");
    require_rows(*shared_gate, "shared_gate", &x.device);
    if (shared_gate->dtype != DType::f32 || shared_gate->shape[0] != T || shared_gate->shape[1] != 1)
      throw ArgumentError("shared_gate: expected float32 [" + str(T) + ", 1], got " + dtype_name(shared_gate->dtype) +
                          " " + shared_gate->shape_str());
  }
}

void check_router_logits_cuda(const TensorView& x, const TensorView& w, const TensorView& logits) {
  require_rows(x, "x", nullptr);
  if (!float_rows(x.dtype))
    throw DTypeError(std::string("x: dtype ") + dtype_name(x.dtype) + " is not supported (float32, bfloat16 or float16)");
  require(w.ndim == 2, "w", [&] { return "expected [experts, hidden], got " + w.shape_str(); });
  require_exact(w, "w", DType::f32, {w.shape[0], x.shape[1]}, &x.device);
  require_exact(logits, "logits", DType::f32, {x.shape[0], w.shape[0]}, &x.device);
  require(x.shape[0] * w.shape[0] < (int64_t(1) << 40) && x.shape[1] < (int64_t(1) << 31), "x", "too large");
}

void check_activation_inplace_cuda(const TensorView& x) {
  require_cuda_tensor(x, "x");
  if (x.dtype != DType::f32) throw DTypeError(std::string("x: dtype ") + dtype_name(x.dtype) + ", expected float32");
  require(x.is_contiguous(), "x", "must be contiguous");
}

namespace cuda_moe {

GroupPlan plan_group(int64_t n) {
  if (n <= kGroupOneCtaMax) return {1, int(std::max<int64_t>(n, 0))};
  // kGroupRange per CTA until that would take more than kGroupMaxCtas; then whole chunks spread evenly.
  const int64_t chunks = (n + kGroupThreads - 1) / kGroupThreads;
  const int64_t per_cta = std::max<int64_t>(kGroupRange / kGroupThreads, (chunks + kGroupMaxCtas - 1) / kGroupMaxCtas);
  const int64_t range = per_cta * kGroupThreads;
  return {int((n + range - 1) / range), int(range)};
}

GroupedGemmLaunch plan_grouped_gemm(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g,
                                    cuda_gemm::TileKind tile, const TensorView& y) {
  const int64_t E = w.shape[0], N = w.shape[1], K = w.shape[2], n = x.shape[0];
  TensorView w0 = TensorView::contiguous(w.data, w.dtype, {N, K});
  w0.device = w.device;
  const GemmProblem p = make_gemm_problem(x, w0, nullptr, y, {});
  const cuda_gemm::GemmLaunch one = cuda_gemm::plan_gemm(p, 1, &tile);
  GroupedGemmLaunch l{};
  l.tile = tile;
  l.threads = one.threads;
  l.smem = one.smem;
  l.grid_n = one.grid_n;
  // Each expert's rows round up to whole tiles at most once: n / BM whole tiles plus one partial per busy expert.
  const int64_t bm = moe_tile_rows(tile);
  l.grid_m = unsigned(n / bm + std::min(E, n));
  require(l.grid_m < (1u << 31), "x", "too many row tiles");
  GroupedGemmParams& q = l.params;
  q.gemm = one.params;
  q.x_row_bytes = x.strides[0] * int64_t(dtype_size(x.dtype));
  q.y_row_bytes = y.strides[0] * int64_t(dtype_size(y.dtype));
  q.w_expert_elems = N * K;
  q.offsets = g.offsets.ptr<int32_t>();
  q.tiles = g.tiles.ptr<int32_t>();
  q.experts = int(E);
  return l;
}

}  // namespace cuda_moe

#if !defined(ATTNZOO_WITH_CUDA)
// A build without CUDA: the checks refuse what they would, then the build says why the rest cannot run.
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string(what) + ": this build has no CUDA (ATTNZOO_CUDA=OFF or no compiler found)");
}
}  // namespace
void moe_group_cuda(const TensorView& experts, int64_t num_experts, int64_t tile_rows, const MoeGroupingCuda& g,
                    Stream) {
  check_moe_group_cuda(experts, num_experts, tile_rows, g);
  no_cuda("moe_group_cuda");
}
void moe_gather_cuda(const TensorView& h, const TensorView& source, int64_t top_k, const TensorView& x, Stream) {
  check_moe_gather_cuda(h, source, top_k, x);
  no_cuda("moe_gather_cuda");
}
void grouped_gemm_cuda(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g, cuda_gemm::TileKind,
                       const TensorView& y, Stream) {
  check_grouped_gemm_cuda(x, w, g, y);
  no_cuda("grouped_gemm_cuda");
}
void moe_combine_cuda(const TensorView& expert_out, const TensorView& dest, const TensorView& weights,
                      const TensorView* shared, const TensorView* shared_gate, const TensorView& x, Stream) {
  check_moe_combine_cuda(expert_out, dest, weights, shared, shared_gate, x);
  no_cuda("moe_combine_cuda");
}
void router_logits_cuda(const TensorView& x, const TensorView& w, const TensorView& logits, Stream) {
  check_router_logits_cuda(x, w, logits);
  no_cuda("router_logits_cuda");
}
void activation_inplace_cuda(Activation, const TensorView& x, Stream) {
  check_activation_inplace_cuda(x);
  no_cuda("activation_inplace_cuda");
}
#endif

}  // namespace attnzoo
