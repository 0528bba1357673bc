#pragma once
// A validated prefill problem: every sequence's span in q/k/v/out plus the strides, so the reference and the
// fast kernel read memory the same way whether the batch is padded [B,T,H,D] or packed with cu_seqlens.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/softmax/options.h"

namespace attnzoo {

struct VarlenInfo {
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1] token offsets into packed q/out
  const int32_t* cu_seqlens_k = nullptr;  // [num_seqs + 1] into packed k/v; nullptr: same as q
  int64_t num_seqs = 0;
};

struct SeqSpan {
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements to the sequence's first token, head 0
  int64_t Tq, Tk;
};

struct TokenStrides {
  int64_t token, head;  // elements; the last (head_dim) stride is 1
};

struct AttentionProblem {
  int64_t Hq = 0, Hkv = 0, D = 0, Dv = 0;
  float scale = 1.f;
  AttentionOptions opts;
  std::vector<SeqSpan> seqs;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  DType q_dtype = DType::f32, kv_dtype = DType::f32, o_dtype = DType::f32;
  TokenStrides qs{}, ks{}, vs{}, os{};

  int64_t group() const { return Hq / Hkv; }
  int64_t max_tq() const;
};

// Validates shapes, dtypes, strides, lengths and options; names the offending argument in ArgumentError /
// DTypeError. Accepts q [B,Tq,Hq,D]; with varlen, q [total,Hq,D] or [1,total,Hq,D].
AttentionProblem make_prefill_problem(const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const AttentionOptions& opts, const VarlenInfo& varlen);

// Shared checks, also used by decode and MLA entry points.
void check_float_tensor(const TensorView& t, const char* name);
void check_head_options(const AttentionOptions& opts, int64_t Hq);
float resolve_scale(float scale, int64_t D);

}  // namespace attnzoo
