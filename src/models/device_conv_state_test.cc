// The GPU runner's choice of the recurrent mixers' in-place decode (models/cuda/device_conv_state.h's
// decodes_in_place), on every machine: which steps update the pool's state slots in place and what a bucket's pads
// bring there (their slot -1, which the in-place kernels skip).
#include "models/cuda/device_conv_state.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "models/cuda/decoder_cuda_plan.h"

namespace attnzoo {
namespace {

// Cached sequences with one new token each, on scattered, permuted state slots, one block group.
Batch decode_step(std::vector<int32_t> slots) {
  Batch b;
  const int32_t S = int32_t(slots.size());
  b.cu_seqlens = {0};
  for (int32_t i = 0; i < S; ++i) {
    b.tokens.push_back(10 + i);
    b.positions.push_back(3 + i);
    b.cu_seqlens.push_back(i + 1);
    b.context_lens.push_back(3 + i);
    b.cache_seqlens.push_back(4 + i);
    b.sequences.push_back(nullptr);
  }
  b.state_slots = std::move(slots);
  b.block_groups.resize(1);
  b.block_groups[0].max_blocks = 1;
  for (int32_t i = 0; i < S; ++i) {
    b.block_groups[0].block_tables.push_back(i);
    b.block_groups[0].slot_mapping.push_back(16 * i + 3 + i);
  }
  return b;
}

TEST(RecurrentDecodeInPlace, DecodeStepsAndTheirBucketsRunInPlace) {
  const Batch b = decode_step({5, 0, 3});
  EXPECT_TRUE(decodes_in_place(b));
  // Padded to its bucket: still one token per sequence, and the pad's slot is -1 in the step's one upload.
  Batch padded;
  pad_decode_batch(b, decode_bucket(3), padded);
  EXPECT_TRUE(decodes_in_place(padded));
  EXPECT_EQ(padded.state_slots, (std::vector<int32_t>{5, 0, 3, -1}));
  const StepLayout layout = plan_step_layout(4, 1, 4);
  std::vector<uint8_t> staging;
  pack_step(padded, layout, staging);
  std::vector<int32_t> uploaded(4);
  std::memcpy(uploaded.data(), staging.data() + layout.state_slots, 4 * sizeof(int32_t));
  EXPECT_EQ(uploaded, padded.state_slots);
}

TEST(RecurrentDecodeInPlace, OtherStepsGatherAndScatter) {
  EXPECT_FALSE(decodes_in_place(Batch{}));  // no sequences
  Batch two = decode_step({1, 2});
  two.tokens.push_back(99);  // the second sequence brings two tokens: a prefill chunk
  two.positions.push_back(5);
  two.cu_seqlens = {0, 1, 3};
  EXPECT_FALSE(decodes_in_place(two));
  Batch empty = decode_step({1, 2});
  empty.tokens.pop_back();  // a sequence with no token this step
  empty.positions.pop_back();
  empty.cu_seqlens = {0, 1, 1};
  EXPECT_FALSE(decodes_in_place(empty));
}

}  // namespace
}  // namespace attnzoo
