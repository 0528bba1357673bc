#include "engine/stop.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "loader/config.h"
#include "loader/gguf.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {

namespace {

std::vector<int32_t> eos_from(const Config& c) {
  const json::Value* v = c.find("eos_token_id");
  if (!v) return {};
  std::vector<int64_t> ids;
  if (v->is_array()) {
    ids = c.get_int_list("eos_token_id");
  } else {
    ids.push_back(c.get_int("eos_token_id"));
  }
  return {ids.begin(), ids.end()};
}

// llama.cpp stops at the end-of-generation tokens a GGUF names: EOS and, for chat models, EOT.
std::vector<int32_t> gguf_eos_ids(const GgufFile& f) {
  std::vector<int32_t> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    if (!f.has(key)) continue;
    const int64_t id = f.get_int(key);
    if (id < 0 || id > INT32_MAX) throw LoadError(f.path() + ": key '" + key + "': token id " + std::to_string(id) + " is out of range");
    if (std::find(ids.begin(), ids.end(), int32_t(id)) == ids.end()) ids.push_back(int32_t(id));
  }
  return ids;
}

}  // namespace

std::vector<int32_t> load_eos_token_ids(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(model_dir, ec) ||
      (fs::is_directory(model_dir, ec) && !fs::exists(fs::path(model_dir) / "generation_config.json", ec) &&
       !fs::exists(fs::path(model_dir) / "config.json", ec))) {
    if (auto gguf = find_model_gguf(model_dir)) return gguf_eos_ids(*GgufFile::open_shared(*gguf));
  }
  const fs::path gen = fs::path(model_dir) / "generation_config.json";
  if (fs::exists(gen)) {
    auto ids = eos_from(Config::load(gen.string()));
    if (!ids.empty()) return ids;
  }
  const fs::path cfg = fs::path(model_dir) / "config.json";
  if (!fs::exists(cfg)) return {};
  const Config c = Config::load(cfg.string());
  auto ids = eos_from(c);
  if (ids.empty() && c.has_text_config()) ids = eos_from(c.text_config());
  return ids;
}

std::vector<int32_t> default_eos_ids(const std::string& model_path, const tok::Tokenizer* tokenizer,
                                     std::span<const int32_t> end_of_turn) {
  std::vector<int32_t> ids = load_eos_token_ids(model_path);
  if (tokenizer) ids.insert(ids.end(), tokenizer->eos_token_ids().begin(), tokenizer->eos_token_ids().end());
  ids.insert(ids.end(), end_of_turn.begin(), end_of_turn.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) require(!s.empty(), "stop", "stop strings must not be empty");
}

size_t tag_overlap(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  return 0;
}

StopStringMatcher::Step StopStringMatcher::push(std::string_view piece, bool can_end) {
  Step step;
  if (stopped_) return step;
  pending_.append(piece);
  if (stops_.empty()) {
    step.text.swap(pending_);
    return step;
  }
  if (!can_end) cannot_end_ = pending_.size();
  // The earliest complete match wins (the text before it is what a reader saw first); a match must end past
  // cannot_end_.
  size_t first = std::string::npos;
  if (can_end)
    for (const auto& s : stops_)
      first = std::min(first, pending_.find(s, cannot_end_ >= s.size() ? cannot_end_ - s.size() + 1 : 0));
  if (first != std::string::npos) {
    step.text = pending_.substr(0, first);
    step.stopped = stopped_ = true;
    pending_.clear();
    return step;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) hold = std::max(hold, tag_overlap(pending_, s));
  const size_t emitted = pending_.size() - hold;
  step.text = pending_.substr(0, emitted);
  pending_.erase(0, emitted);
  cannot_end_ = cannot_end_ > emitted ? cannot_end_ - emitted : 0;
  return step;
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(pending_);
  cannot_end_ = 0;
  return out;
}

void suppress_tokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids)
    if (id >= 0 && size_t(id) < logits.size()) logits[size_t(id)] = -std::numeric_limits<float>::infinity();
}

}  // namespace attnzoo
