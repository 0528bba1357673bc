#include "tokenizer/post_processor.h"

#include <map>

namespace attnzoo::tok {
namespace {

constexpr int64_t kMaxId = (int64_t(1) << 31) - 1;

// A fixed wrapper: `before` + sequence + `after`.
class Wrap final : public PostProcessor {
 public:
  Wrap(std::vector<int32_t> before, std::vector<int32_t> after) : before_(std::move(before)), after_(std::move(after)) {}
  void apply(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void apply(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->apply(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> read_template(const json::Value& v, const std::string& path, const JsonFields& f) {
  // special_tokens: {name: {"id": name, "ids": [..], "tokens": [..]}}
  std::map<std::string, std::vector<int32_t>> specials;
  const std::string sp_path = JsonFields::join(path, "special_tokens");
  if (const json::Value* sp = f.optional(v, "special_tokens")) {
    for (const auto& [name, entry] : f.object(*sp, sp_path).as_object()) {
      const std::string epath = JsonFields::join(sp_path, name);
      const std::string ipath = JsonFields::join(epath, "ids");
      std::vector<int32_t> ids;
      const json::Array& arr = f.array(f.member(entry, "ids", epath), ipath).as_array();
      for (size_t i = 0; i < arr.size(); ++i) ids.push_back(int32_t(f.integer(arr[i], JsonFields::index(ipath, i), 0, kMaxId)));
      specials[name] = std::move(ids);
    }
  }
  const std::string spath = JsonFields::join(path, "single");
  const json::Array& items = f.array(f.member(v, "single", path), spath).as_array();
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string ipath = JsonFields::index(spath, i);
    const json::Value& item = f.object(items[i], ipath);
    if (const json::Value* s = item.find("SpecialToken")) {
      const std::string tpath = ipath + ".SpecialToken";
      const std::string& name = f.string(f.member(*s, "id", tpath), tpath + ".id");
      const auto it = specials.find(name);
      if (it == specials.end()) f.fail(tpath + ".id", "'" + name + "' is not listed in " + sp_path);
      auto& dst = seen_sequence ? after : before;
      dst.insert(dst.end(), it->second.begin(), it->second.end());
    } else if (const json::Value* s = item.find("Sequence")) {
      const std::string& which = f.string(f.member(*s, "id", ipath + ".Sequence"), ipath + ".Sequence.id");
      if (which != "A") f.fail(ipath + ".Sequence.id", "a single-sequence template can only hold sequence A");
      if (seen_sequence) f.fail(ipath, "sequence A appears twice");
      seen_sequence = true;
    } else {
      f.fail(ipath, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  if (!seen_sequence) f.fail(spath, "the template never places sequence A");
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

// ["token", id] pairs of RobertaProcessing / BertProcessing.
int32_t read_token_pair(const json::Value& v, std::string_view key, const std::string& path, const JsonFields& f) {
  const std::string p = JsonFields::join(path, key);
  const json::Array& arr = f.array(f.member(v, key, path), p).as_array();
  if (arr.size() != 2) f.fail(p, "expected [token, id]");
  f.string(arr[0], JsonFields::index(p, 0));
  return int32_t(f.integer(arr[1], JsonFields::index(p, 1), 0, kMaxId));
}

}  // namespace

std::unique_ptr<PostProcessor> read_post_processor(const json::Value& v, const std::string& path, const JsonFields& f) {
  if (v.is_null()) return nullptr;
  const std::string& type = f.type_of(v, path);
  if (type == "TemplateProcessing") return read_template(v, path, f);
  if (type == "RobertaProcessing" || type == "BertProcessing")
    return std::make_unique<Wrap>(std::vector<int32_t>{read_token_pair(v, "cls", path, f)},
                                  std::vector<int32_t>{read_token_pair(v, "sep", path, f)});
  if (type == "ByteLevel") return std::make_unique<Wrap>(std::vector<int32_t>{}, std::vector<int32_t>{});
  if (type == "Sequence") {
    const std::string list_path = JsonFields::join(path, "processors");
    const json::Array& items = f.array(f.member(v, "processors", path), list_path).as_array();
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < items.size(); ++i) {
      auto p = read_post_processor(items[i], JsonFields::index(list_path, i), f);
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  f.fail(JsonFields::join(path, "type"), "unsupported post-processor '" + type + "' (supported: TemplateProcessing, "
                                          "RobertaProcessing, BertProcessing, ByteLevel, Sequence)");
}

}  // namespace attnzoo::tok
