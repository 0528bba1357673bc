#include "engine/model_adapters.h"

#include <algorithm>

#include "core/error.h"

namespace attnzoo {

void ModelSequence::append(std::span<const int32_t> tokens, std::span<float> logits) {
  Batch batch;
  batch.add(*state_, tokens);
  const std::vector<float> last = model_.forward(batch, /*last_only=*/true);
  require(last.size() == logits.size(), "logits", "model returned " + std::to_string(last.size()) +
                                                      " logits for a vocabulary of " + std::to_string(logits.size()));
  std::copy(last.begin(), last.end(), logits.begin());
}

void ModelSequence::append_all(std::span<const int32_t> tokens, std::span<float> logits) {
  Batch batch;
  batch.add(*state_, tokens);
  batch.checkpoint_each_token = checkpoint_each_token_;
  const std::vector<float> all = model_.forward(batch, /*last_only=*/false);
  require(all.size() == logits.size(), "logits", "model returned " + std::to_string(all.size()) +
                                                     " logits, the caller expects " + std::to_string(logits.size()));
  std::copy(all.begin(), all.end(), logits.begin());
}

void ModelSequence::checkpoint() {
  model_.pool().clear_checkpoints(*state_);
  model_.pool().checkpoint(*state_);
}

}  // namespace attnzoo
