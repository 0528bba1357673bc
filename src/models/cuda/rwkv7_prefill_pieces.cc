#include "models/cuda/rwkv7_prefill_pieces.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace attnzoo {
namespace {

// `rows` token rows on from `first`, on a [1, T, ...] view.
TensorView token_rows(const TensorView& t, int64_t first, int64_t rows) {
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + first * t.strides[1] * int64_t(dtype_size(t.dtype));
  v.shape[1] = rows;
  return v;
}

// `rows` state rows on from `first`, on an [N, H, K, V] view.
TensorView state_rows(const TensorView& t, int64_t first, int64_t rows) {
  TensorView v = t;
  v.data = static_cast<char*>(t.data) + first * t.strides[0] * int64_t(dtype_size(t.dtype));
  v.shape[0] = rows;
  return v;
}

}  // namespace

std::vector<Rwkv7PrefillPiece> plan_rwkv7_prefill_pieces(std::span<const int32_t> cu_seqlens, int64_t chunk_size,
                                                         int64_t max_chunks) {
  require(chunk_size >= 1, "chunk_size", "must be at least 1, got " + std::to_string(chunk_size));
  require(max_chunks >= 1, "max_chunks", "must be at least 1, got " + std::to_string(max_chunks));
  require(!cu_seqlens.empty() && cu_seqlens[0] == 0, "cu_seqlens", "must start at 0");
  for (size_t n = 1; n < cu_seqlens.size(); ++n)
    require(cu_seqlens[n] >= cu_seqlens[n - 1], "cu_seqlens", "must not decrease");
  std::vector<Rwkv7PrefillPiece> pieces;
  const int64_t N = int64_t(cu_seqlens.size()) - 1;
  Rwkv7PrefillPiece piece;
  piece.cu_seqlens = {0};
  int64_t budget = max_chunks;
  int64_t n = 0, done = 0;  // sequence n, its first `done` tokens in earlier pieces
  while (n < N) {
    const int64_t left = cu_seqlens[n + 1] - cu_seqlens[n] - done;
    const int64_t chunks = (left + chunk_size - 1) / chunk_size;
    if (chunks > budget && budget == 0) {  // full: close it, the sequence goes on in the next
      pieces.push_back(std::move(piece));
      piece = Rwkv7PrefillPiece{};
      piece.first_row = cu_seqlens[n] + done, piece.first_seq = n, piece.cu_seqlens = {0};
      budget = max_chunks;
      continue;
    }
    const int64_t taken = std::min(left, budget * chunk_size);
    piece.rows += taken;
    piece.cu_seqlens.push_back(int32_t(piece.rows));
    budget -= std::min(chunks, budget);
    if (taken == left) {
      ++n, done = 0;
    } else {
      done += taken;
    }
  }
  pieces.push_back(std::move(piece));
  return pieces;
}

Rwkv7Args rwkv7_piece_args(const Rwkv7Args& whole, const Rwkv7PrefillPiece& piece) {
  Rwkv7Args a = whole;
  for (TensorView* t : {&a.r, &a.w, &a.k, &a.v, &a.a, &a.b, &a.o}) *t = token_rows(*t, piece.first_row, piece.rows);
  a.cu_seqlens = piece.cu_seqlens.data();
  a.cu_seqlens_len = int64_t(piece.cu_seqlens.size());
  const int64_t seqs = a.cu_seqlens_len - 1;
  if (whole.ssm_state_indices) {
    a.ssm_state_indices = whole.ssm_state_indices + piece.first_seq;
  } else {
    require(!whole.final_state.empty() && whole.initial_state.data == whole.final_state.data, "final_state",
            "must be initial_state itself (states in place, or a pool with ssm_state_indices) when a prefill runs "
            "in pieces: a sequence cut between two carries its state through it");
    a.initial_state = state_rows(whole.initial_state, piece.first_seq, seqs);
    a.final_state = state_rows(whole.final_state, piece.first_seq, seqs);
  }
  return a;
}

}  // namespace attnzoo
