#include "layers/rwkv7_state.h"

#include <gtest/gtest.h>

#include <memory>

namespace attnzoo {
namespace {

TEST(Rwkv7TokenShift, EachSequenceShiftsAgainstItsOwnPreviousToken) {
  const int64_t D = 3;
  // Two sequences in one batch; the second already has a remembered last token.
  Batch batch;
  batch.tokens = {0, 0, 0, 0, 0};
  batch.positions = {0, 1, 4, 5, 6};
  batch.cu_seqlens = {0, 2, 5};
  std::vector<float> shift0(D, 0.f), shift1 = {5.f, 6.f, 7.f};
  const std::vector<float> remembered = shift1;
  std::vector<float> x(size_t(5 * D)), delta(size_t(5 * D));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
  rwkv7_token_shift(x.data(), batch, D, [&](int64_t s) { return s == 0 ? shift0.data() : shift1.data(); },
                    delta.data());
  for (int64_t i = 0; i < D; ++i) {
    EXPECT_EQ(delta[size_t(i)], 0.f - x[size_t(i)]);                       // fresh sequence: previous is zero
    EXPECT_EQ(delta[size_t(D + i)], x[size_t(i)] - x[size_t(D + i)]);      // within the sequence
    EXPECT_EQ(delta[size_t(2 * D + i)], remembered[size_t(i)] - x[size_t(2 * D + i)]);  // from the state
    EXPECT_EQ(shift0[size_t(i)], x[size_t(D + i)]);                        // state = last token
  }
  EXPECT_EQ(delta[size_t(3 * D)], x[size_t(2 * D)] - x[size_t(3 * D)]);  // not the other sequence's token
  EXPECT_EQ(shift1[0], x[size_t(4 * D)]);
}

TEST(Rwkv7State, ViewsTheSequencesSlotAsShiftsThenMatrixState) {
  std::vector<float> slab(3 * 64, 0.f);
  LayerMemory memory;
  memory.states = slab.data();
  memory.state_stride = 64;
  Batch batch;
  batch.cu_seqlens = {0, 1, 2};
  batch.state_slots = {2, 1};
  const Rwkv7State st(memory, batch, 1, /*hidden=*/8);
  EXPECT_EQ(Rwkv7State::elements(8, 2, 4, 3), 2 * 8 + 2 * 4 * 3);
  EXPECT_EQ(st.attn_shift(), slab.data() + 64);  // slot 1
  EXPECT_EQ(st.ffn_shift() - st.attn_shift(), 8);
  EXPECT_EQ(st.wkv() - st.attn_shift(), 16);
}

}  // namespace
}  // namespace attnzoo
