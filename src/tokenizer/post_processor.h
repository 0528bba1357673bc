#pragma once
// Post-processors from tokenizer.json: TemplateProcessing (the single-sequence template), RobertaProcessing,
// BertProcessing, ByteLevel (offsets only, so nothing to do on ids) and Sequence. They run only when the caller
// asks for special tokens.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/json.h"
#include "tokenizer/json_fields.h"

namespace attnzoo::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void apply(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> read_post_processor(const json::Value& v, const std::string& path, const JsonFields& f);

}  // namespace attnzoo::tok
