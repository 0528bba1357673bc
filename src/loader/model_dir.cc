#include "loader/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/convert.h"
#include "core/dtype.h"
#include "loader/fp8_blocks.h"
#include "loader/gguf_checkpoint.h"

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

bool is_gguf_name(const fs::path& p) { return p.extension() == ".gguf"; }

std::string gguf_config_source(const std::string& path) { return path + " (config synthesized from the GGUF metadata)"; }

}  // namespace

int64_t StoredTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool StoredTensor::quantized() const { return quant_is_blocked(type); }

ModelFiles ModelFiles::open_gguf(const std::string& path) {
  ModelFiles m;
  m.dir_ = fs::path(path).parent_path().string();
  if (m.dir_.empty()) m.dir_ = ".";
  m.gguf_ = GgufFile::open_shared(path);
  m.gguf_config_ = gguf_hf_config_json(*m.gguf_);
  m.config_ = Config::parse(m.gguf_config_, gguf_config_source(path));
  for (const GgufHfTensor& t : gguf_hf_tensors(*m.gguf_)) {
    StoredTensor st{t.shape, t.type, t.data, t.bytes};
    if (t.fix != GgufFix::none) {
      GgufHfBytes fixed = undo_gguf_fix(t, path);
      st.type = fixed.type;
      st.bytes = int64_t(fixed.bytes.size());
      m.owned_.push_back(MappedFile::from_bytes(std::move(fixed.bytes), path + ":" + t.gguf_name));
      st.data = m.owned_.back()->data();
    }
    m.where_.emplace(t.hf_name, Entry{0, t.gguf_name, std::move(st), std::nullopt});
  }
  return m;
}

std::optional<std::string> find_model_gguf(const std::string& path) {
  std::error_code ec;
  if (is_gguf_name(path) && fs::is_regular_file(path, ec)) return path;
  // The one wording every command and the Python API give for a path that is not there.
  if (!fs::exists(path, ec)) throw LoadError("model path not found: " + path);
  if (!fs::is_directory(path, ec)) throw LoadError(path + ": not a directory (nor a .gguf file)");
  if (fs::exists(fs::path(path) / "model.safetensors", ec) || fs::exists(fs::path(path) / "model.safetensors.index.json", ec))
    return std::nullopt;
  std::vector<std::string> ggufs;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (is_gguf_name(e.path()) && e.is_regular_file()) ggufs.push_back(e.path().string());
  std::sort(ggufs.begin(), ggufs.end());
  if (ggufs.size() > 1) {
    std::string list;
    for (const auto& g : ggufs) list += (list.empty() ? "" : ", ") + fs::path(g).filename().string();
    throw LoadError(path + ": several .gguf files (" + list + "); name the one to load");
  }
  if (ggufs.size() == 1) return ggufs[0];
  return std::nullopt;
}

std::string ModelFiles::read_config_json(const std::string& path) {
  if (auto g = find_model_gguf(path)) return gguf_hf_config_json(*GgufFile::open_shared(*g));
  const std::string file = (fs::path(path) / "config.json").string();
  std::string text = read_text(file);
  Config::parse(text, file);  // the text goes to Python's json, which neither names the file nor bounds the depth
  return text;
}

Config ModelFiles::read_config(const std::string& path) {
  if (auto g = find_model_gguf(path))
    return Config::parse(gguf_hf_config_json(*GgufFile::open_shared(*g)), gguf_config_source(*g));
  return Config::load((fs::path(path) / "config.json").string());
}

ModelFiles ModelFiles::open(const std::string& dir) {
  if (auto g = find_model_gguf(dir)) return open_gguf(*g);
  std::error_code ec;
  ModelFiles m;
  m.dir_ = dir;
  m.config_ = Config::load((fs::path(dir) / "config.json").string());

  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    m.files_.push_back(SafetensorsFile::open(single.string()));
    for (const TensorInfo& t : m.files_[0].tensors()) m.where_.emplace(t.name, Entry{0, t.name, std::nullopt, std::nullopt});
    m.find_fp8();
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
    m.where_.emplace(tensor, Entry{it->second, tensor, std::nullopt, std::nullopt});
  }
  m.find_fp8();
  m.expose_language_model();
  return m;
}

void ModelFiles::find_fp8() {
  std::optional<Fp8Blocks> blocks;  // read once, when the first F8_E4M3 tensor asks for it
  std::vector<std::string> scales;
  for (auto& [name, e] : where_) {
    const SafetensorsFile& f = files_[e.file];
    const TensorInfo& w = f.info(e.stored);
    if (w.dtype != FileDType::F8_E4M3) continue;
    auto fail = [&](const std::string& tensor, const std::string& m) {
      throw LoadError(f.path() + ": tensor '" + tensor + "': " + m);
    };
    if (!blocks) blocks = read_fp8_blocks(config_);
    if (w.shape.size() != 2) fail(w.name, "an F8_E4M3 tensor must be a [rows, cols] matrix to take block scales");
    // An empty weight takes no bytes, so the file would not bound its other dimension, nor the dequantization's
    // tasks (one per row of blocks).
    if (w.shape[0] <= 0 || w.shape[1] <= 0)
      fail(w.name, "an F8_E4M3 weight must have rows and columns, got [" + std::to_string(w.shape[0]) + ", " +
                       std::to_string(w.shape[1]) + "]");
    const std::string scale = name + "_scale_inv";  // X.weight -> X.weight_scale_inv
    const auto it = where_.find(scale);
    if (it == where_.end()) fail(w.name, "F8_E4M3 without its block scales '" + scale + "'");
    const SafetensorsFile& sf = files_[it->second.file];
    const TensorInfo& s = sf.info(it->second.stored);
    const std::vector<int64_t> want = fp8_scale_shape(w.shape[0], w.shape[1], *blocks);
    DType sdt;
    if (s.shape != want || !to_dtype(s.dtype, &sdt) || (sdt != DType::f32 && sdt != DType::bf16 && sdt != DType::f16)) {
      std::string got;
      for (int64_t d : s.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      throw LoadError(sf.path() + ": tensor '" + it->second.stored + "': expected float scales [" +
                      std::to_string(want[0]) + ", " + std::to_string(want[1]) + "] for the [" +
                      std::to_string(w.shape[0]) + ", " + std::to_string(w.shape[1]) + "] weight '" + w.name +
                      "' in " + std::to_string(blocks->rows) + " x " + std::to_string(blocks->cols) + " blocks, got " +
                      file_dtype_name(s.dtype) + " [" + got + "]");
    }
    e.fp8 = Fp8Source{it->second.file, it->second.stored, sdt, *blocks, config_.text_config().dtype_or(DType::bf16)};
    scales.push_back(scale);
  }
  for (const std::string& s : scales) where_.erase(s);  // consumed: not weights of the model
}

const StoredTensor* ModelFiles::held(const Entry& e) const {
  if (!e.fp8) return e.held ? &*e.held : nullptr;  // set when opened, never written again
  // Dequantized on first read, so tensors no builder asks for (DeepSeek-V3's multi-token-prediction layer) cost
  // nothing; the lock keeps two readers from converting one tensor twice or reading it half set.
  const std::lock_guard<std::mutex> lock(*fp8_mutex_);
  if (e.held) return &*e.held;
  const Fp8Source& src = *e.fp8;
  const SafetensorsFile& f = files_[e.file];
  const TensorInfo& w = f.info(e.stored);
  const std::vector<int64_t> scale_shape = fp8_scale_shape(w.shape[0], w.shape[1], src.blocks);
  std::vector<float> scale(size_t(scale_shape[0] * scale_shape[1]));
  convert_to_f32(files_[src.scale_file].data(src.scale), src.scale_dtype, scale.data(), scale.size());
  std::vector<uint8_t> out(size_t(w.numel()) * dtype_size(src.to));
  dequantize_fp8_blocks(f.data(e.stored), scale.data(), w.shape[0], w.shape[1], src.blocks, src.to, out.data());
  const QuantType qt = src.to == DType::f32 ? QuantType::F32 : src.to == DType::bf16 ? QuantType::BF16 : QuantType::F16;
  owned_.push_back(MappedFile::from_bytes(std::move(out), f.path() + ":" + w.name));
  e.held = StoredTensor{w.shape, qt, owned_.back()->data(), int64_t(owned_.back()->size())};
  return &*e.held;
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
  const StoredTensor* h = held(e);
  if (!h) return files_[e.file].view(e.stored);
  const StoredTensor& t = *h;
  TensorView v;
  const std::optional<DType> dt = dtype_of(t.type);
  if (!dt)
    throw DTypeError(source(name) + ": tensor '" + e.stored + "' ('" + std::string(name) + "') is stored as " +
                     quant_type_name(t.type) + ", which no plain tensor view holds (read it with stored())");
  v.dtype = *dt;
  if (t.shape.size() > size_t(TensorView::kMaxDims)) {
    throw LoadError(source(name) + ": tensor '" + e.stored + "': " + std::to_string(t.shape.size()) +
                    " dimensions, more than a view holds");
  }
  if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(v.dtype) != 0) {
    throw LoadError(source(name) + ": tensor '" + e.stored + "': data is not aligned to its elements");
  }
  v.data = const_cast<uint8_t*>(t.data);  // TensorView has no const flavour; the pages are mapped read-only
  v.ndim = int(t.shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = t.shape[size_t(d)];
    v.strides[d] = stride;
    stride *= t.shape[size_t(d)];
  }
  return v;
}

StoredTensor ModelFiles::stored(std::string_view name) const {
  const Entry& e = locate(name);
  if (const StoredTensor* h = held(e)) return *h;
  const SafetensorsFile& f = files_[e.file];
  const TensorInfo& ti = f.info(e.stored);
  QuantType type;
  switch (ti.dtype) {
    case FileDType::F32: type = QuantType::F32; break;
    case FileDType::F16: type = QuantType::F16; break;
    case FileDType::BF16: type = QuantType::BF16; break;
    case FileDType::F64: type = QuantType::F64; break;
    case FileDType::I8: type = QuantType::I8; break;
    case FileDType::I16: type = QuantType::I16; break;
    case FileDType::I32: type = QuantType::I32; break;
    case FileDType::I64: type = QuantType::I64; break;
    default:
      throw DTypeError(f.path() + ": tensor '" + e.stored + "': dtype " + file_dtype_name(ti.dtype) +
                       " has no storage format here (read it with file(name).data())");
  }
  return StoredTensor{ti.shape, type, f.data(e.stored), int64_t(ti.nbytes())};
}

bool ModelFiles::is_quantized(std::string_view name) const {
  const Entry& e = locate(name);
  return !e.fp8 && e.held && e.held->quantized();  // a dequantized fp8 weight is plain
}

int64_t ModelFiles::numel(std::string_view name) const {
  const Entry& e = locate(name);
  return e.held && !e.fp8 ? e.held->numel() : files_[e.file].info(e.stored).numel();  // fp8: its shape as stored
}

uint64_t ModelFiles::nbytes(std::string_view name) const {
  const Entry& e = locate(name);
  if (e.fp8) return uint64_t(numel(name)) * dtype_size(e.fp8->to);  // as it is read, without reading it
  return e.held ? uint64_t(e.held->bytes) : files_[e.file].info(e.stored).nbytes();
}

const std::string& ModelFiles::source(std::string_view name) const {
  const Entry& e = locate(name);
  return gguf_ ? gguf_->path() : files_[e.file].path();
}

const TensorInfo& ModelFiles::info(std::string_view name) const {
  const Entry& e = locate(name);
  if (gguf_) throw LoadError(gguf_->path() + ": tensor '" + std::string(name) + "': a GGUF tensor has no safetensors header entry (use stored())");
  return files_[e.file].info(e.stored);
}
const SafetensorsFile& ModelFiles::file(std::string_view name) const {
  const Entry& e = locate(name);
  if (gguf_) throw LoadError(gguf_->path() + ": tensor '" + std::string(name) + "' is in a GGUF file, not a safetensors one");
  return files_[e.file];
}
const std::string& ModelFiles::stored_name(std::string_view name) const { return locate(name).stored; }

std::vector<std::string> ModelFiles::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

uint64_t ModelFiles::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, e] : where_) n += nbytes(name);
  return n;
}

}  // namespace attnzoo
