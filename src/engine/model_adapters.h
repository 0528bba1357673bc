#pragma once
// The generation loop's two seams (engine/generate.h) filled by the real model runtime and tokenizer.
#include <memory>

#include "engine/generate.h"
#include "models/model.h"
#include "tokenizer/stream_decoder.h"

namespace attnzoo {

// One sequence of a Model: each append runs a batch of one and keeps only the last token's logits. They come to
// the host (a GPU model copies its row down each step): the generation loop samples, verifies and streams there;
// the serving scheduler is the path that samples on the device (Model::forward_logits + sample_rows).
class ModelSequence : public LogitsSource {
 public:
  explicit ModelSequence(const Model& model) : model_(model), state_(model.new_sequence()) {}
  int64_t vocab_size() const override { return model_.info().vocab_size; }
  void append(std::span<const int32_t> tokens, std::span<float> logits) override;
  int64_t max_positions() const override { return model_.info().max_position_embeddings; }
  bool can_speculate() const override { return true; }
  void append_all(std::span<const int32_t> tokens, std::span<float> logits) override;
  void checkpoint() override;
  void rollback(int64_t length) override { model_.rollback(*state_, length); }
  void keep_rollback_room(int64_t tokens) override { model_.cache().keep_rollback_tokens(tokens); }
  // Measurement switch: checkpoint the recurrent state after every verified token instead of recomputing the
  // kept ones on a rollback (Batch::checkpoint_each_token).
  void set_checkpoint_each_token(bool on) { checkpoint_each_token_ = on; }

 private:
  const Model& model_;
  std::unique_ptr<Sequence> state_;
  Batch batch_;
  bool checkpoint_each_token_ = false;
};

// The tokenizer's streaming decoder (whole characters only), special tokens left out of the text unless a reader
// needs them (gpt-oss's harmony markers).
class TokenizerTextStream : public TextStream {
 public:
  explicit TokenizerTextStream(std::shared_ptr<const tok::Tokenizer> tokenizer, bool skip_special_tokens = true)
      : decoder_(std::move(tokenizer), skip_special_tokens) {}
  std::string push(int32_t token) override { return decoder_.push(token); }
  std::string flush() override { return decoder_.finish(); }

 private:
  tok::StreamDecoder decoder_;
};

}  // namespace attnzoo
