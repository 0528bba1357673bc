#pragma once
// Several documents of one compiled schema in a row, with fixed text between them: what a "required" tool_choice
// asks of a model that may make more than one call, in its own format's syntax (Hermes: further <tool_call>
// blocks; Mistral: the JSON array's next element; Llama 3.x: "; " and the next object).
//
//   document (separator document)* [end]
//
// After each whole document the text may stop (EOS / a stop id), go on with `separator` and the next document, or
// write `end` and stop. `separator` may begin with `end` (Hermes closes a block with "\n</tool_call>" and opens the
// next after it): after `end` the text may still stop. With max_documents 1 and no `end` this is exactly one
// document, as JsonSchemaRecognizer alone reads it.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/json_schema_recognizer.h"

namespace attnzoo {

struct JsonSequence {
  std::string separator;      // between two documents
  std::string end;            // optional text after the last one
  int32_t max_documents = 0;  // 0: no limit
};

// JsonSchemaRecognizer's interface (push / complete / can_end / in_string_text / string_room) over a sequence:
// the scheduler and TokenTrie walk it as they walk one document. `sequence` null: one document.
class JsonSequenceRecognizer {
 public:
  // `schema` and `sequence` must outlive the recognizer (the request keeps both). ArgumentError when the separator
  // is empty or `end` is not shorter than a separator that begins with it (the two would be ambiguous).
  JsonSequenceRecognizer(const JsonSchema& schema, const JsonSequence* sequence);

  bool push(uint8_t byte);
  bool push(std::string_view bytes) {
    JsonSequenceRecognizer next = *this;
    for (char c : bytes)
      if (!next.push(uint8_t(c))) return false;
    *this = next;
    return true;
  }
  bool complete() const;
  bool can_end() const;
  bool in_string_text() const { return matched_ == kInDocument && document_.in_string_text(); }
  size_t string_room() const { return document_.string_room(); }
  JsonSchemaRecognizer::PatternText pattern_text() const {
    return matched_ == kInDocument ? document_.pattern_text() : JsonSchemaRecognizer::PatternText{};
  }
  int32_t documents() const { return documents_; }  // begun so far

 private:
  static constexpr uint32_t kInDocument = UINT32_MAX;
  bool last_allowed() const;  // no further document may begin
  bool separator_alive() const;
  bool end_alive() const;

  JsonSchemaRecognizer document_;
  const JsonSequence* sequence_;
  uint32_t matched_ = kInDocument;  // between documents: bytes of the separator / end matched so far
  int32_t documents_ = 1;
  bool separator_ok_ = true, end_ok_ = true;  // which of the two literals the matched bytes still follow
};

void validate_sequence(const JsonSequence& sequence);  // the constructor's check, for request parsing

}  // namespace attnzoo
