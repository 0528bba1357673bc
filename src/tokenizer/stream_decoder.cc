#include "tokenizer/stream_decoder.h"

#include "core/utf8.h"

namespace attnzoo::tok {

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  window_.push_back(id);
  const std::string text = tokenizer_->decode_bytes(window_, skip_special_);
  if (text.size() < emitted_) {
    // The window decodes shorter than what was already emitted (a decoder that strips by position);
    // nothing new to say, and the next steps measure from here.
    emitted_ = text.size();
    return {};
  }
  const size_t complete = text.size() - utf8::incomplete_tail(text);
  if (complete <= emitted_) return {};
  std::string out = utf8::lossy(std::string_view(text).substr(emitted_, complete - emitted_));
  emitted_ = complete;
  if (complete == text.size()) {
    // Everything is out: keep the last id as context so position-dependent decoders see a non-first token.
    window_.erase(window_.begin(), window_.end() - 1);
    emitted_ = tokenizer_->decode_bytes(window_, skip_special_).size();
  }
  return out;
}

std::string StreamDecoder::finish() {
  const std::string text = tokenizer_->decode_bytes(window_, skip_special_);
  std::string out = text.size() > emitted_ ? utf8::lossy(std::string_view(text).substr(emitted_)) : std::string();
  window_.clear();
  emitted_ = 0;
  return out;
}

}  // namespace attnzoo::tok
