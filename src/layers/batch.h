#pragma once
// The ragged batch every forward call takes (DESIGN-SKETCH seam 1): several sequences, each contributing some new
// tokens (a prompt chunk, one decode token, or k+1 tokens to verify), packed back to back. Layers read the token
// ranges from cu_seqlens and find each sequence's memory through its SequenceState. Single-prompt generation is a
// batch of one.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "layers/kv_cache.h"

namespace attnzoo {

// Everything one sequence remembers: one LayerState per layer (in layer order) plus how many tokens it has seen.
// Made by Model::new_sequence(); `owner` ties it to that model so a state is never fed to another one.
struct SequenceState {
  SequenceState() = default;
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  const void* owner = nullptr;
  int64_t length = 0;  // tokens already processed (the next token's default position)
  std::vector<std::unique_ptr<LayerState>> layers;

  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& l : layers) b += l ? l->bytes() : 0;
    return b;
  }
};

struct Batch {
  std::vector<int32_t> tokens;         // all new tokens, sequence after sequence
  std::vector<int32_t> positions;      // one per token (RoPE position)
  std::vector<int32_t> cu_seqlens{0};  // [num_sequences + 1] offsets into tokens
  std::vector<SequenceState*> sequences;

  // Appends a sequence's new tokens at positions state.length, state.length + 1, ...
  void add(SequenceState& state, std::span<const int32_t> ids) {
    sequences.push_back(&state);
    for (size_t i = 0; i < ids.size(); ++i) {
      tokens.push_back(ids[i]);
      positions.push_back(int32_t(state.length + int64_t(i)));
    }
    cu_seqlens.push_back(int32_t(tokens.size()));
  }
  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_sequences() const { return int64_t(sequences.size()); }
  int64_t seq_begin(int64_t s) const { return cu_seqlens[size_t(s)]; }
  int64_t seq_len(int64_t s) const { return cu_seqlens[size_t(s) + 1] - cu_seqlens[size_t(s)]; }
};

}  // namespace attnzoo
