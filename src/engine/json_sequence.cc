#include "engine/json_sequence.h"

#include "core/error.h"

namespace attnzoo {

// Copied per vocabulary trie edge, as the document's recognizer is: its 168 bytes and the sequence's few.
static_assert(sizeof(JsonSequenceRecognizer) <= 192);

void validate_sequence(const JsonSequence& s) {
  if (s.separator.empty()) throw ArgumentError("json sequence: the separator is empty");
  if (s.max_documents < 0) throw ArgumentError("json sequence: max_documents < 0");
  // A separator that is a prefix of `end` would leave its last byte meaning two things.
  if (s.end.starts_with(s.separator)) throw ArgumentError("json sequence: `end` begins with the separator");
}

JsonSequenceRecognizer::JsonSequenceRecognizer(const JsonSchema& schema, const JsonSequence* sequence)
    : document_(schema), sequence_(sequence) {
  if (sequence_) validate_sequence(*sequence_);
}

bool JsonSequenceRecognizer::last_allowed() const {
  return !sequence_ || (sequence_->max_documents > 0 && documents_ >= sequence_->max_documents);
}

bool JsonSequenceRecognizer::separator_alive() const {
  return separator_ok_ && !last_allowed() && matched_ < sequence_->separator.size();
}

bool JsonSequenceRecognizer::end_alive() const { return end_ok_ && matched_ < sequence_->end.size(); }

bool JsonSequenceRecognizer::push(uint8_t byte) {
  if (matched_ == kInDocument) {
    if (document_.push(byte)) return true;
    // The document is whole (and the byte is not its own): the separator or `end` may begin.
    if (!sequence_ || !document_.can_end()) return false;
    JsonSequenceRecognizer next = *this;
    next.matched_ = 0;
    next.separator_ok_ = next.end_ok_ = true;
    if (!next.push(byte)) return false;
    *this = next;
    return true;
  }
  const bool sep = separator_alive() && uint8_t(sequence_->separator[matched_]) == byte;
  const bool end = end_alive() && uint8_t(sequence_->end[matched_]) == byte;
  if (!sep && !end) return false;
  separator_ok_ = sep;
  end_ok_ = end;
  ++matched_;
  if (separator_ok_ && matched_ == sequence_->separator.size()) {
    document_.restart();
    matched_ = kInDocument;
    ++documents_;
  }
  return true;
}

bool JsonSequenceRecognizer::can_end() const {
  if (matched_ == kInDocument) return document_.can_end();
  return end_ok_ && matched_ == sequence_->end.size();  // all of `end` written (or none of it)
}

bool JsonSequenceRecognizer::complete() const {
  if (matched_ == kInDocument) {
    // Whole, and neither the separator nor `end` may follow.
    if (!document_.complete()) return false;
    return !sequence_ || (last_allowed() && sequence_->end.empty());
  }
  return can_end() && !separator_alive();
}

}  // namespace attnzoo
