// The GPU runner's split of a long chunked RWKV-7 prefill (models/cuda/rwkv7_prefill_pieces.h): every piece within
// its chunk budget, cuts only on a sequence's chunk boundaries, the pieces covering the batch's rows and sequences
// in order, and the per-piece arguments pointing at the right rows and states. Bit-equality of the pieces' run with
// one call is the emulator's (EmulatedRwkv7Chunk.PiecesMatchOneCall).
#include "models/cuda/rwkv7_prefill_pieces.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

int64_t chunks_of(const Rwkv7PrefillPiece& p, int64_t C) {
  int64_t n = 0;
  for (size_t i = 0; i + 1 < p.cu_seqlens.size(); ++i) n += (p.cu_seqlens[i + 1] - p.cu_seqlens[i] + C - 1) / C;
  return n;
}

// Walks the pieces and checks them against cu_seqlens: contiguous rows, each sequence's tokens in order across the
// pieces it spans, cuts on multiples of C from the sequence's start, at most `budget` chunks a piece.
void expect_pieces(const std::vector<int32_t>& cu, int64_t C, int64_t budget, size_t want_pieces) {
  SCOPED_TRACE("C=" + std::to_string(C) + " budget=" + std::to_string(budget));
  const std::vector<Rwkv7PrefillPiece> pieces = plan_rwkv7_prefill_pieces(cu, C, budget);
  EXPECT_EQ(pieces.size(), want_pieces);
  std::vector<int64_t> seen(cu.size() - 1, 0);  // tokens of each sequence covered so far
  int64_t row = 0;
  for (const Rwkv7PrefillPiece& p : pieces) {
    EXPECT_EQ(p.first_row, row);
    EXPECT_LE(chunks_of(p, C), budget);
    ASSERT_GE(p.cu_seqlens.size(), 1u);
    EXPECT_EQ(p.cu_seqlens.front(), 0);
    EXPECT_EQ(p.cu_seqlens.back(), p.rows);
    for (size_t i = 0; i + 1 < p.cu_seqlens.size(); ++i) {
      const int64_t n = p.first_seq + int64_t(i), len = p.cu_seqlens[i + 1] - p.cu_seqlens[i];
      ASSERT_LT(n, int64_t(seen.size()));
      EXPECT_EQ(cu[n] + seen[n], p.first_row + p.cu_seqlens[i]) << "sequence " << n << " out of order";
      EXPECT_EQ(seen[n] % C, 0) << "sequence " << n << " cut off its chunk boundaries";
      seen[n] += len;
    }
    row += p.rows;
  }
  EXPECT_EQ(row, cu.back());
  for (size_t n = 0; n + 1 < cu.size(); ++n) EXPECT_EQ(seen[n], cu[n + 1] - cu[n]) << "sequence " << n;
}

TEST(Rwkv7PrefillPieces, CutsOnChunkBoundariesWithinTheBudget) {
  const std::vector<int32_t> cu{0, 1, 150, 150, 300, 333};  // 1, 149, 0, 150, 33 tokens
  expect_pieces(cu, 64, 1000, 1);                          // fits: one piece
  expect_pieces(cu, 64, 1, 8);                             // a chunk a piece: 1 + 3 + 3 + 1
  expect_pieces(cu, 64, 3, 3);                             // [1, 2 of 149] [last of 149, 2 of 150] [last, 33]
  expect_pieces(cu, 16, 5, 5);                             // 1 + 10 + 10 + 3 = 24 chunks of 16 in 5s
  expect_pieces({0, 4096, 8192, 12288, 16384}, 64, 74, 4);  // the runner's 4 x 4096 tokens at 40 heads of 64
  expect_pieces({0}, 64, 3, 1);
  expect_pieces({0, 0, 0}, 64, 3, 1);
}

TEST(Rwkv7PrefillPieces, PieceArgsPointAtTheirRowsAndStates) {
  const std::vector<int32_t> cu{0, 10, 100};
  const std::vector<Rwkv7PrefillPiece> pieces = plan_rwkv7_prefill_pieces(cu, 16, 2);
  ASSERT_EQ(pieces.size(), 4u);  // [10, 16 of 90] [32] [32] [10]
  EXPECT_EQ(pieces[1].first_row, 26);
  EXPECT_EQ(pieces[1].first_seq, 1);
  const int64_t H = 2, K = 4, V = 8;
  std::vector<float> tokens(size_t(100 * H * K)), values(size_t(100 * H * V)), states(size_t(5 * H * K * V));
  Rwkv7Args whole;
  for (TensorView* t : {&whole.r, &whole.w, &whole.k, &whole.a, &whole.b})
    *t = TensorView::contiguous(tokens.data(), DType::f32, {1, 100, H, K});
  whole.v = whole.o = TensorView::contiguous(values.data(), DType::f32, {1, 100, H, V});
  TensorView pool = TensorView::contiguous(states.data(), DType::f32, {2, H, K, V});
  pool.strides[0] = 2 * H * K * V + 3;  // a pool slot's stride
  const int32_t slots[2] = {1, 0};
  whole.initial_state = whole.final_state = pool;
  whole.ssm_state_indices = slots;
  const Rwkv7Args a = rwkv7_piece_args(whole, pieces[1]);
  EXPECT_EQ(a.r.data, tokens.data() + 26 * H * K);
  EXPECT_EQ(a.o.data, values.data() + 26 * H * V);
  EXPECT_EQ(a.r.shape[1], 32);
  EXPECT_EQ(a.ssm_state_indices, slots + 1);
  EXPECT_EQ(a.cu_seqlens_len, 2);
  EXPECT_EQ(a.initial_state.data, pool.data);  // the indices pick the rows
  // Dense states in place: the piece's rows of them.
  whole.ssm_state_indices = nullptr;
  whole.initial_state = whole.final_state = TensorView::contiguous(states.data(), DType::f32, {2, H, K, V});
  const Rwkv7Args d = rwkv7_piece_args(whole, pieces[1]);
  EXPECT_EQ(d.final_state.data, states.data() + H * K * V);
  EXPECT_EQ(d.final_state.shape[0], 1);
}

TEST(Rwkv7PrefillPieces, RefusesStatesThatCannotCarryACutSequence) {
  const std::vector<int32_t> cu{0, 100};
  const std::vector<Rwkv7PrefillPiece> pieces = plan_rwkv7_prefill_pieces(cu, 16, 2);
  std::vector<float> tokens(100 * 4), s0(16), s1(16);
  Rwkv7Args whole;
  for (TensorView* t : {&whole.r, &whole.w, &whole.k, &whole.a, &whole.b, &whole.v, &whole.o})
    *t = TensorView::contiguous(tokens.data(), DType::f32, {1, 100, 1, 4});
  whole.initial_state = TensorView::contiguous(s0.data(), DType::f32, {1, 1, 4, 4});
  whole.final_state = TensorView::contiguous(s1.data(), DType::f32, {1, 1, 4, 4});
  testing::expect_error<ArgumentError>([&] { rwkv7_piece_args(whole, pieces[0]); }, "final_state: must be");
  whole.initial_state = whole.final_state = TensorView{};
  testing::expect_error<ArgumentError>([&] { rwkv7_piece_args(whole, pieces[0]); }, "final_state: must be");
  testing::expect_error<ArgumentError>([&] { plan_rwkv7_prefill_pieces(cu, 16, 0); }, "max_chunks:");
  testing::expect_error<ArgumentError>([&] { plan_rwkv7_prefill_pieces(std::vector<int32_t>{0, 5, 3}, 16, 2); },
                                       "cu_seqlens:");
}

}  // namespace
}  // namespace attnzoo
