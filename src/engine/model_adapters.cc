#include "engine/model_adapters.h"

namespace attnzoo {

void ModelSequence::append(std::span<const int32_t> tokens, std::span<float> logits) {
  batch_.clear();  // reused: a decode step allocates nothing
  batch_.add(*state_, tokens);
  const int64_t last = batch_.num_tokens() - 1;
  model_.forward(batch_, std::span(&last, 1), logits);
}

void ModelSequence::append_all(std::span<const int32_t> tokens, std::span<float> logits) {
  batch_.clear();
  batch_.add(*state_, tokens);
  batch_.checkpoint_each_token = checkpoint_each_token_;
  model_.forward(batch_, {}, logits);
}

void ModelSequence::checkpoint() {
  model_.cache().clear_checkpoints(*state_);
  model_.cache().checkpoint(*state_);
}

}  // namespace attnzoo
