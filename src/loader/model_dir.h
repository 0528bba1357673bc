#pragma once
// A Hugging Face model directory: config.json plus weights in either one model.safetensors or shards
// listed by model.safetensors.index.json ({"weight_map": {tensor name: shard file}}). Everything is validated
// when the directory is opened, so a missing shard or a tensor absent from its shard fails early, by name.
// Multimodal wrappers (Qwen3.5, Gemma 3 ... "ForConditionalGeneration") store the language model under
// "model.language_model." (or "language_model.model." in older saves); their tensors are exposed under the
// text model's own names ("model.layers.0...", "lm_head.weight") so one builder serves both, and the other
// towers' tensors (vision, audio, projectors) are set aside.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "loader/config.h"
#include "loader/safetensors.h"

namespace attnzoo {

class ModelFiles {
 public:
  // Throws LoadError naming the directory, file or tensor at fault. The single-file layout wins when both exist
  // (as in transformers).
  static ModelFiles open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Config& config() const { return config_; }
  // The weight files in use (one, or every shard named by the index), as opened.
  const std::vector<SafetensorsFile>& files() const { return files_; }

  bool has(std::string_view name) const;
  // Zero-copy read-only view (see SafetensorsFile::view); throws LoadError naming the tensor and directory.
  TensorView tensor(std::string_view name) const;
  const TensorInfo& info(std::string_view name) const;
  // The file holding a tensor (for dtypes TensorView cannot express: file(name).data(stored_name(name))).
  const SafetensorsFile& file(std::string_view name) const;
  const std::string& stored_name(std::string_view name) const;  // its name inside that file
  std::vector<std::string> names() const;  // sorted
  uint64_t total_bytes() const;            // bytes of all tensors named by the layout
  // A wrapper's tensors outside its language model, as stored (sorted); empty for a text-only checkpoint.
  const std::vector<std::string>& set_aside() const { return set_aside_; }

 private:
  struct Entry {
    size_t file;         // index into files_
    std::string stored;  // the name inside that file (differs from the key for a wrapper's language model)
  };
  const Entry& locate(std::string_view name) const;
  void expose_language_model();

  std::string dir_;
  Config config_ = Config::parse("{}", "");
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Entry, std::less<>> where_;  // exposed tensor name -> where it is stored
  std::vector<std::string> set_aside_;
};

}  // namespace attnzoo
