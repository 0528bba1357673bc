// Argument checks shared by the LSH attention kernels and the hashing step.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/softmax/lsh.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_bthd(const TensorView& t, const char* name) {
  check_float_tensor(t, name);
  require(t.ndim == 4, name, "must be [batch, time, heads, head_dim], got " + t.shape_str());
  if (t.numel() == 0) return;
  require(t.stride(-1) == 1, name, "last dimension (head_dim) must be contiguous (stride 1)");
  for (int d = 0; d < 4; ++d) require(t.strides[d] >= 0, name, "negative strides are not supported");
}

}  // namespace

LshProblem make_lsh_problem(const TensorView& qk, const TensorView& v, const TensorView& buckets,
                            const TensorView& out, const LshOptions& opts) {
  check_bthd(qk, "qk");
  check_bthd(v, "v");
  check_bthd(out, "out");
  LshProblem p;
  p.B = qk.shape[0], p.T = qk.shape[1], p.H = qk.shape[2], p.D = qk.shape[3], p.Dv = v.shape[3];
  p.opts = opts;
  require(p.D >= 1 && p.D <= kMaxHeadDim, "qk", "head_dim must be in [1, " + str(kMaxHeadDim) + "], got " + str(p.D));
  require(p.Dv >= 1 && p.Dv <= kMaxHeadDim, "v", "head_dim must be in [1, " + str(kMaxHeadDim) + "], got " + str(p.Dv));
  require(v.shape[0] == p.B && v.shape[1] == p.T && v.shape[2] == p.H, "v",
          "must be [" + str(p.B) + ", " + str(p.T) + ", " + str(p.H) + ", Dv] as qk, got " + v.shape_str());
  require(out.shape[0] == p.B && out.shape[1] == p.T && out.shape[2] == p.H && out.shape[3] == p.Dv, "out",
          "must be [" + str(p.B) + ", " + str(p.T) + ", " + str(p.H) + ", " + str(p.Dv) + "], got " + out.shape_str());
  require(opts.chunk_length >= 1 && opts.chunk_length <= 1024, "chunk_length",
          "must be in [1, 1024], got " + str(opts.chunk_length));
  require(buckets.dtype == DType::i32, "buckets", std::string("must be int32, got ") + dtype_name(buckets.dtype));
  require(buckets.ndim == 4 && buckets.shape[0] == p.B && buckets.shape[1] == p.H && buckets.shape[3] == p.T &&
              buckets.shape[2] >= 1,
          "buckets",
          "must be [" + str(p.B) + ", " + str(p.H) + ", num_hashes, " + str(p.T) + "] (num_hashes >= 1), got " +
              buckets.shape_str());
  require(buckets.is_contiguous(), "buckets", "must be contiguous");
  p.num_hashes = buckets.shape[2];
  require(p.num_hashes <= 64, "buckets", "num_hashes must be <= 64, got " + str(p.num_hashes));
  p.qk = qk, p.v = v, p.out = out;
  p.buckets = static_cast<const int32_t*>(buckets.data);
  const int64_t n = buckets.numel();
  int32_t hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    require(p.buckets[i] >= 0, "buckets", "must be >= 0, got " + str(p.buckets[i]) + " at flat index " + str(i));
    hi = std::max(hi, p.buckets[i]);
  }
  require(hi < (1 << 20), "buckets", "must be < 2^20 (num_buckets), got " + str(hi));
  p.num_buckets = int64_t(hi) + 1;
  return p;
}

}  // namespace attnzoo
