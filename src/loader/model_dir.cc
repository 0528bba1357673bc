#include "loader/model_dir.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnzoo {

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path + ": cannot open");
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Shard names come from an untrusted index: only plain file names inside the directory are accepted.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
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
    for (const TensorInfo& t : m.files_[0].tensors()) m.where_.emplace(t.name, 0);
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
    m.where_.emplace(tensor, it->second);
  }
  return m;
}

bool ModelFiles::has(std::string_view name) const { return where_.find(name) != where_.end(); }

const SafetensorsFile& ModelFiles::locate(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw LoadError(dir_ + ": no tensor named '" + std::string(name) + "' in the model files");
  return files_[it->second];
}

TensorView ModelFiles::tensor(std::string_view name) const { return locate(name).view(name); }
const TensorInfo& ModelFiles::info(std::string_view name) const { return locate(name).info(name); }
const SafetensorsFile& ModelFiles::file(std::string_view name) const { return locate(name); }

std::vector<std::string> ModelFiles::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

uint64_t ModelFiles::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, file] : where_) n += files_[file].info(name).nbytes();
  return n;
}

}  // namespace attnzoo
