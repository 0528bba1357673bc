#include "loader/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace attnzoo {

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  const auto file = MappedFile::open(path, kMaxConfigJsonBytes);
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

// Shard names come from an untrusted index: only plain file names inside the directory are accepted.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

// The text model's name for a wrapper's tensor, or nullopt for another tower's. Both layouts transformers has
// written: "model.language_model.*" with "lm_head.*" (v4.52+), "language_model.model.*" / "language_model.lm_head.*".
std::optional<std::string> language_model_name(const std::string& stored) {
  static const std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"model.language_model.", "model."},
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"lm_head.", "lm_head."},
  };
  for (const auto& [from, to] : kPrefixes)
    if (stored.starts_with(from)) return std::string(to) + stored.substr(from.size());
  return std::nullopt;
}

bool is_wrapped_language_model(const std::string& stored) {
  return stored.starts_with("model.language_model.") || stored.starts_with("language_model.");
}

}  // namespace

ModelFiles ModelFiles::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw LoadError(dir + ": not a directory");
  ModelFiles m;
  m.dir_ = dir;
  m.config_ = Config::load((fs::path(dir) / "config.json").string());

  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    m.files_.push_back(SafetensorsFile::open(single.string()));
    for (const TensorInfo& t : m.files_[0].tensors()) m.where_.emplace(t.name, Entry{0, t.name});
    m.expose_language_model();
    return m;
  }
  if (!fs::exists(index_path, ec)) {
    throw LoadError(dir + ": no weights (neither model.safetensors nor model.safetensors.index.json)");
  }

  const std::string ipath = index_path.string();
  json::Value index;
  try {
    index = json::parse(read_text(ipath));
  } catch (const json::ParseError& e) {
    throw LoadError(ipath + ": " + e.what());
  }
  const json::Value* weight_map = index.find("weight_map");
  if (!weight_map || !weight_map->is_object()) throw LoadError(ipath + ": missing \"weight_map\" object");

  std::map<std::string, size_t> shard_index;  // shard file name -> index into files_
  for (const json::Member& entry : weight_map->as_object()) {
    const std::string& tensor = entry.first;
    if (!entry.second.is_string()) throw LoadError(ipath + ": weight_map entry '" + tensor + "' is not a file name");
    const std::string& shard = entry.second.as_string();
    if (!plain_file_name(shard)) {
      throw LoadError(ipath + ": weight_map entry '" + tensor + "' names '" + shard +
                      "', which is not a plain file name in the model directory");
    }
    auto it = shard_index.find(shard);
    if (it == shard_index.end()) {
      const fs::path shard_path = fs::path(dir) / shard;
      if (!fs::exists(shard_path, ec)) {
        throw LoadError(ipath + ": shard '" + shard + "' (holding tensor '" + tensor + "') does not exist in " + dir);
      }
      m.files_.push_back(SafetensorsFile::open(shard_path.string()));
      it = shard_index.emplace(shard, m.files_.size() - 1).first;
    }
    if (!m.files_[it->second].has(tensor)) {
      throw LoadError(ipath + ": tensor '" + tensor + "' is mapped to '" + shard + "', which does not contain it");
    }
    m.where_.emplace(tensor, Entry{it->second, tensor});
  }
  m.expose_language_model();
  return m;
}

void ModelFiles::expose_language_model() {
  if (!config_.has_text_config()) return;
  if (std::none_of(where_.begin(), where_.end(), [](const auto& e) { return is_wrapped_language_model(e.first); }))
    return;
  std::map<std::string, Entry, std::less<>> exposed;
  for (auto& [stored, entry] : where_) {
    std::optional<std::string> name = language_model_name(stored);
    if (!name) {
      set_aside_.push_back(stored);
      continue;
    }
    auto [it, fresh] = exposed.emplace(*name, entry);
    if (!fresh) {
      throw LoadError(dir_ + ": tensors '" + it->second.stored + "' and '" + stored + "' both map to the language " +
                      "model's '" + *name + "'");
    }
  }
  where_ = std::move(exposed);
}

bool ModelFiles::has(std::string_view name) const { return where_.find(name) != where_.end(); }

const ModelFiles::Entry& ModelFiles::locate(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw LoadError(dir_ + ": no tensor named '" + std::string(name) + "' in the model files");
  return it->second;
}

TensorView ModelFiles::tensor(std::string_view name) const {
  const Entry& e = locate(name);
  return files_[e.file].view(e.stored);
}
const TensorInfo& ModelFiles::info(std::string_view name) const {
  const Entry& e = locate(name);
  return files_[e.file].info(e.stored);
}
const SafetensorsFile& ModelFiles::file(std::string_view name) const { return files_[locate(name).file]; }
const std::string& ModelFiles::stored_name(std::string_view name) const { return locate(name).stored; }

std::vector<std::string> ModelFiles::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

uint64_t ModelFiles::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, e] : where_) n += files_[e.file].info(e.stored).nbytes();
  return n;
}

}  // namespace attnzoo
