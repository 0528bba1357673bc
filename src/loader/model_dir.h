#pragma once
// A Hugging Face model directory: config.json plus weights in either one model.safetensors or shards
// listed by model.safetensors.index.json ({"weight_map": {tensor name: shard file}}). Everything is validated
// when the directory is opened, so a missing shard or a tensor absent from its shard fails early, by name.
// Multimodal wrappers (Qwen3.5, Gemma 3 ... "ForConditionalGeneration") store the language model under
// "model.language_model." (or "language_model.model." in older saves); their tensors are exposed under the
// text model's own names ("model.layers.0...", "lm_head.weight") so one builder serves both, and the other
// towers' tensors (vision, audio, projectors) are set aside.
// A llama.cpp GGUF file (given itself, or as the one .gguf in a directory without safetensors weights) opens the
// same way: its config is synthesized and its tensors exposed under Hugging Face names (loader/gguf_checkpoint.h).
// Quantized GGUF weights cannot be TensorViews; stored() hands out any tensor as bytes + format + shape.
// Block-scaled fp8 weights (F8_E4M3 with W_scale_inv: the DeepSeek-V3 / Qwen3-FP8 form, fp8_blocks.h) are
// dequantized into config.json's dtype when first read (their scales checked when the directory is opened, and
// not exposed).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/quant_type.h"
#include "core/tensor.h"
#include "loader/config.h"
#include "loader/fp8_blocks.h"
#include "loader/gguf.h"
#include "loader/safetensors.h"

namespace attnzoo {

// A tensor as the checkpoint stores it, for any source: torch-order shape, storage format and bytes. Rows are
// shape.back() elements long, each quant_row_bytes(type, shape.back()) bytes, back to back.
struct StoredTensor {
  std::vector<int64_t> shape;
  QuantType type = QuantType::F32;  // F32 / F16 / BF16 for plain floats, a block format (Q4_K ...) when quantized
  const uint8_t* data = nullptr;    // read-only; valid while the ModelFiles (or a copy) lives
  int64_t bytes = 0;
  int64_t numel() const;
  bool quantized() const;  // a block format: no TensorView can express it
};

// The GGUF file a model path names: the path itself (a .gguf file), or the one .gguf of a directory with no
// safetensors weights; nullopt for a safetensors (or empty) directory. LoadError when the path is neither a
// directory nor a .gguf file, or when a directory holds several .gguf files.
std::optional<std::string> find_model_gguf(const std::string& path);

class ModelFiles {
 public:
  // `path`: a model directory (safetensors, or exactly one .gguf and no safetensors weights) or a .gguf file.
  // Throws LoadError naming the directory, file or tensor at fault. The single-file layout wins when both exist
  // (as in transformers).
  static ModelFiles open(const std::string& path);

  // The config alone (config.json, or a GGUF's synthesized one) without mapping the weights; and as text, checked
  // as read_config checks it (LoadError naming the file: not JSON, too deep, not an object).
  static Config read_config(const std::string& path);
  static std::string read_config_json(const std::string& path);

  const std::string& dir() const { return dir_; }  // the directory (a GGUF file's own directory)
  const Config& config() const { return config_; }
  // The safetensors files in use (one, or every shard named by the index), as opened; empty for a GGUF.
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The GGUF file, or nullptr for a safetensors checkpoint.
  const GgufFile* gguf() const { return gguf_.get(); }
  // config.json text synthesized from a GGUF's metadata (empty for a safetensors checkpoint).
  const std::string& gguf_config_json() const { return gguf_config_; }

  bool has(std::string_view name) const;
  // Read-only view (zero-copy, except GGUF tensors the converter edited: see gguf_checkpoint.h). Throws LoadError
  // naming the tensor and directory; DTypeError for a quantized tensor or a dtype TensorView lacks.
  TensorView tensor(std::string_view name) const;
  // Any tensor as stored (quantized or not). Throws DTypeError for a safetensors dtype with no QuantType (U8, F8...).
  StoredTensor stored(std::string_view name) const;
  bool is_quantized(std::string_view name) const;
  int64_t numel(std::string_view name) const;
  uint64_t nbytes(std::string_view name) const;  // as stored (a quantized tensor's packed bytes)
  // The path of the file holding a tensor (for error messages).
  const std::string& source(std::string_view name) const;
  // Safetensors checkpoints only (LoadError for a GGUF): the header entry and the file holding a tensor.
  const TensorInfo& info(std::string_view name) const;
  const SafetensorsFile& file(std::string_view name) const;
  const std::string& stored_name(std::string_view name) const;  // its name inside that file (GGUF: "blk.0.attn_q.weight")
  std::vector<std::string> names() const;  // sorted
  uint64_t total_bytes() const;            // bytes of all tensors named by the layout
  // A wrapper's tensors outside its language model, as stored (sorted); empty for a text-only checkpoint.
  const std::vector<std::string>& set_aside() const { return set_aside_; }

 private:
  struct Fp8Source {
    size_t scale_file;
    std::string scale;  // the scale tensor's stored name
    DType scale_dtype;
    Fp8Blocks blocks;
    DType to;  // config.json's dtype
  };
  struct Entry {
    size_t file;         // index into files_ (safetensors)
    std::string stored;  // the name inside that file (differs from the key for a wrapper's language model)
    // Held in memory or read differently from the stored bytes: a GGUF tensor (after the converter's edits are
    // undone) or an fp8 weight once dequantized (on its first read: held())
    mutable std::optional<StoredTensor> held;
    std::optional<Fp8Source> fp8;  // a block-scaled fp8 weight: where its scales are, what it is read as
  };
  const Entry& locate(std::string_view name) const;
  void expose_language_model();
  void find_fp8();  // records every fp8 weight's scales (checked) and drops the scales from the names
  const StoredTensor* held(const Entry& e) const;  // e.held, an fp8 weight dequantized first; nullptr: none
  static ModelFiles open_gguf(const std::string& path);

  std::string dir_;
  std::shared_ptr<const GgufFile> gguf_;
  std::string gguf_config_;
  // bytes of edited GGUF tensors and dequantized fp8 weights
  mutable std::vector<std::shared_ptr<const MappedFile>> owned_;
  std::shared_ptr<std::mutex> fp8_mutex_ = std::make_shared<std::mutex>();
  Config config_ = Config::parse("{}", "");
  std::vector<SafetensorsFile> files_;
  std::map<std::string, Entry, std::less<>> where_;  // exposed tensor name -> where it is stored
  std::vector<std::string> set_aside_;
};

}  // namespace attnzoo
