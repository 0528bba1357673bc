// The step kernels' host side that needs no CUDA: how a tensor becomes rows, and every refusal, so bad input is
// an error naming the argument before any CUDA call (and testable on a machine without a GPU).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool same_shape(const TensorView& a, const TensorView& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[size_t(d)] != b.shape[size_t(d)]) return false;
  return true;
}

void require_same_shape(const TensorView& t, const char* name, const TensorView& like, const char* like_name) {
  require(same_shape(t, like), name,
          [&] { return "shape " + t.shape_str() + " differs from " + like_name + "'s " + like.shape_str(); });
}

void require_same_dtype(const TensorView& t, const char* name, const TensorView& like, const char* like_name) {
  if (t.dtype != like.dtype)
    throw DTypeError(std::string(name) + ": dtype " + dtype_name(t.dtype) + " differs from " + like_name + "'s " +
                     dtype_name(like.dtype));
}

// An activation operand: on the device, a float dtype, and rows the kernels can address.
Rows activation_rows(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  require_float_dtype(t, name);
  return rows_of(t, name);
}

}  // namespace

Rows rows_of(const TensorView& t, const char* name) {
  require(t.ndim >= 1, name, "needs at least one dimension");
  for (int d = 0; d < t.ndim; ++d)
    require(t.shape[size_t(d)] >= 0 && t.strides[size_t(d)] >= 0, name,
            [&] { return "negative sizes or strides are not supported, got shape " + t.shape_str(); });
  Rows r;
  r.cols = t.size(-1);
  require(t.stride(-1) == 1 || r.cols <= 1, name,
          [&] { return "last dimension must be contiguous (stride 1), got stride " + str(t.stride(-1)); });
  if (t.ndim == 1) {
    r.count = 1;
  } else if (t.ndim == 2) {
    r.count = t.shape[0];
    r.outer_stride = t.strides[0];
  } else if (t.ndim == 3) {
    r.count = t.shape[0] * t.shape[1];
    r.inner = std::max<int64_t>(t.shape[1], 1);
    r.outer_stride = t.strides[0];
    r.inner_stride = t.strides[1];
  } else {
    require(t.is_contiguous(), name, [&] {
      return "a tensor of more than 3 dimensions must be contiguous, got shape " + t.shape_str();
    });
    r.count = t.numel() / std::max<int64_t>(r.cols, 1);
    r.outer_stride = r.cols;
  }
  if (r.count <= 1) r.outer_stride = r.inner_stride = 0;  // a single row's strides are never used
  return r;
}

bool rows_vectorizable(const Rows& r, const void* data, size_t elem_bytes) {
  const int64_t vec = int64_t(16 / elem_bytes);
  return reinterpret_cast<uintptr_t>(data) % 16 == 0 && r.cols % vec == 0 && r.outer_stride % vec == 0 &&
         (r.inner == 1 || r.inner_stride % vec == 0);
}

void require_cuda_tensor(const TensorView& t, const char* name, const Device* device) {
  require(t.device.is_cuda(), name,
          [&] { return "lives on " + t.device.str() + "; this CUDA kernel needs device memory"; });
  if (device)
    require(t.device == *device, name,
            [&] { return "lives on " + t.device.str() + ", the other operands on " + device->str(); });
  require(t.data != nullptr || t.numel() == 0, name, "data is null");
}

void check_rms_norm_cuda(const TensorView& x, const TensorView* residual, const TensorView& weight,
                         const TensorView& y, const RmsNormCudaOptions& opts) {
  const Rows rows = activation_rows(x, "x", nullptr);
  require(rows.cols > 0, "x", "rows must not be empty (dim 0)");
  activation_rows(y, "y", &x.device);
  require_same_shape(y, "y", x, "x");
  // A 16-bit y of an f32 x: the residual stream's norm handed to bf16 projections.
  if (x.dtype != DType::f32) require_same_dtype(y, "y", x, "x");
  if (residual) {
    activation_rows(*residual, "residual", &x.device);
    require_same_shape(*residual, "residual", x, "x");
    require_same_dtype(*residual, "residual", x, "x");
  }
  require_cuda_tensor(weight, "weight", &x.device);
  if (weight.dtype != DType::f32)
    throw DTypeError(std::string("weight: must be float32 (RmsNorm::weight(), folded), got ") +
                     dtype_name(weight.dtype));
  require(weight.ndim == 1 && weight.shape[0] == rows.cols && weight.strides[0] == 1, "weight", [&] {
    return "expected a contiguous [" + str(rows.cols) + "] (x's last dimension), got " + weight.shape_str();
  });
  require(std::isfinite(opts.eps) && opts.eps >= 0.f, "eps", "must be finite and >= 0");
}

RmsNormCuda::RmsNormCuda(const RmsNorm& norm, Device device, Stream stream) : dim_(norm.dim()) {
  require(device.is_cuda(), "device", [&] { return "RmsNormCuda needs a CUDA device, got " + device.str(); });
  weight_ = DeviceBuffer(device, size_t(dim_) * sizeof(float));
  opts_.eps = norm.eps();
  opts_.mean_centered = norm.mean_centered();
  weight_.upload(norm.weight().data(), weight_.bytes(), stream);
}

TensorView RmsNormCuda::weight() const {
  TensorView t = TensorView::contiguous(weight_.data(), DType::f32, {dim_});
  t.device = weight_.device();
  return t;
}

RopeCuda::RopeCuda(const Rope& rope, Device device, Stream stream) : rope_(rope), device_(device) {
  require(device.is_cuda(), "device", [&] { return "RopeCuda needs a CUDA device, got " + device.str(); });
  if (rope.rotary_dim() == 0) return;  // NoPE: nothing rotates, nothing to upload
  inv_freq_ = DeviceBuffer(device, rope.inv_freq().size() * sizeof(float));
  inv_freq_.upload(rope.inv_freq().data(), inv_freq_.bytes(), stream);
}

void RopeCuda::check(const TensorView& q, const TensorView& k, const TensorView& positions) const {
  check_rope_cuda(rope_, device_, q, k, positions);
}

void check_rope_cuda(const Rope& rope, Device device, const TensorView& q, const TensorView& k,
                     const TensorView& positions) {
  const int64_t head_dim = rope.config().head_dim;
  require(head_dim > 0, "rope", "made from a default-constructed Rope");
  // The kernel's per-token cos / sin table takes rotary_dim floats of shared memory, under the 48 KB a launch may
  // use without opting in.
  require(rope.rotary_dim() <= 8192, "rope",
          [&] { return "rotary_dim above 8192 is not supported on CUDA, got " + str(rope.rotary_dim()); });
  auto check_heads = [&](const TensorView& t, const char* name) {
    activation_rows(t, name, &device);
    require(t.ndim == 3 && t.shape[2] == head_dim, name, [&] {
      return "expected [tokens, heads, " + str(head_dim) + "] (the rope's head_dim), got " + t.shape_str();
    });
  };
  check_heads(q, "q");
  if (!k.empty()) {
    check_heads(k, "k");
    require_same_dtype(k, "k", q, "q");
    require(k.shape[0] == q.shape[0], "k",
            [&] { return "has " + str(k.shape[0]) + " tokens, q " + str(q.shape[0]); });
  }
  require_cuda_tensor(positions, "positions", &device);
  if (positions.dtype != DType::i32 && positions.dtype != DType::i64)
    throw DTypeError(std::string("positions: must be int32 or int64, got ") + dtype_name(positions.dtype));
  require(positions.ndim == 1 && positions.shape[0] == q.shape[0] && positions.strides[0] == 1, "positions", [&] {
    return "expected a contiguous [" + str(q.shape[0]) + "] (q's tokens), got " + positions.shape_str();
  });
}

namespace {

// Two inputs and an output of one elementwise kernel: the same rows, shape, dtype and device as the first.
void check_elementwise(const TensorView& a, const char* a_name, const TensorView& b, const char* b_name,
                       const TensorView& y, const char* y_name) {
  activation_rows(a, a_name, nullptr);
  activation_rows(b, b_name, &a.device);
  activation_rows(y, y_name, &a.device);
  require_same_shape(b, b_name, a, a_name);
  require_same_shape(y, y_name, a, a_name);
  require_same_dtype(b, b_name, a, a_name);
  require_same_dtype(y, y_name, a, a_name);
}

}  // namespace

void check_gated_activation_cuda(const TensorView& gate, const TensorView& up, const TensorView& out) {
  check_elementwise(gate, "gate", up, "up", out, "out");
}

void check_add_cuda(const TensorView& a, const TensorView& b, const TensorView& y) {
  check_elementwise(a, "a", b, "b", y, "y");
}

void check_add_scaled_cuda(const TensorView& a, const TensorView& b, float alpha, const TensorView& y) {
  check_elementwise(a, "a", b, "b", y, "y");
  require(std::isfinite(alpha), "alpha", "must be finite");
}

void check_scale_softcap_cuda(const TensorView& x, const TensorView& y, float scale, float cap) {
  if (x.dtype == DType::f32 && (y.dtype == DType::bf16 || y.dtype == DType::f16)) {
    activation_rows(x, "x", nullptr);
    activation_rows(y, "y", &x.device);
    require_same_shape(y, "y", x, "x");
  } else {
    check_elementwise(x, "x", x, "x", y, "y");
  }
  require(std::isfinite(scale), "scale", "must be finite");
  require(std::isfinite(cap) && cap >= 0.f, "cap", "must be finite and >= 0 (0: no softcap)");
}

void check_query_temperature_cuda(const TensorView& q, const TensorView& positions, float beta, int64_t interval) {
  check_elementwise(q, "q", q, "q", q, "q");
  require(q.ndim == 2, "q", [&] { return "expected [tokens, heads * head_dim], got " + q.shape_str(); });
  require_cuda_tensor(positions, "positions", &q.device);
  if (positions.dtype != DType::i32)
    throw DTypeError(std::string("positions: must be int32, got ") + dtype_name(positions.dtype));
  require(positions.ndim == 1 && positions.shape[0] == q.shape[0] && positions.strides[0] == 1, "positions", [&] {
    return "expected a contiguous [" + str(q.shape[0]) + "] (q's tokens), got " + positions.shape_str();
  });
  require(std::isfinite(beta), "beta", "must be finite");
  require(interval > 0, "interval", [&] { return "must be positive, got " + str(interval); });
}

void check_route_top_k_cuda(const TensorView& logits, const TensorView& experts, const TensorView& weights,
                            const RouteCudaOptions& opts) {
  activation_rows(logits, "logits", nullptr);
  require(logits.ndim == 2, "logits", [&] { return "expected [tokens, experts], got " + logits.shape_str(); });
  const int64_t T = logits.shape[0], E = logits.shape[1];
  require(E >= 1 && E <= kMaxExpertsCuda, "logits", [&] {
    return "CUDA routing takes 1 to " + str(kMaxExpertsCuda) + " experts (one warp per token), got " + str(E);
  });
  require(opts.top_k >= 1 && opts.top_k <= E, "top_k",
          [&] { return "must be in [1, " + str(E) + "] (the experts), got " + str(opts.top_k); });
  require(opts.top_k <= kMaxTopKCuda, "top_k", [&] {
    return "CUDA routing chooses at most " + str(kMaxTopKCuda) + " experts per token (a lane each), got " +
           str(opts.top_k);
  });
  require(!opts.normalize || opts.order == RouteOrder::softmax_then_top_k, "normalize",
          "only applies to softmax_then_top_k (top_k_then_softmax weights already sum to 1)");
  auto check_out = [&](const TensorView& t, const char* name, DType dtype) {
    require_cuda_tensor(t, name, &logits.device);
    if (t.dtype != dtype)
      throw DTypeError(std::string(name) + ": must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
    require(t.ndim == 2 && t.shape[0] == T && t.shape[1] == opts.top_k && t.is_contiguous(), name, [&] {
      return "expected a contiguous [" + str(T) + ", " + str(opts.top_k) + "], got " + t.shape_str();
    });
  };
  check_out(experts, "experts", DType::i32);
  check_out(weights, "weights", DType::f32);
}

void require_f32_matrix(const TensorView& t, const char* name, const Device* device) {
  require_cuda_tensor(t, name, device);
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
  require(t.ndim == 2, name, [&] { return "expected 2 dims [rows, cols], got " + t.shape_str(); });
  require(t.strides[1] == 1 || t.shape[1] <= 1, name, "last dimension must be contiguous (stride 1)");
  require(t.strides[0] >= t.shape[1] || t.shape[0] <= 1, name,
          [&] {
            return "rows overlap: row stride " + std::to_string(t.strides[0]) + " < " + std::to_string(t.shape[1]);
          });
}

}  // namespace attnzoo
