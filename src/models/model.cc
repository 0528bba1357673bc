#include "models/model.h"

#include <set>

#include "core/error.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"
#include "models/registry.h"

namespace attnzoo {

LoadOptions parse_load_dtype(const std::string& dtype, const Config& config) {
  LoadOptions o;
  if (dtype == "float32" || dtype == "f32") {
    o.weights = DType::f32;
  } else if (dtype == "bfloat16" || dtype == "bf16") {
    o.weights = DType::bf16;
  } else if (dtype == "auto") {
    o.weights = config.dtype_or(DType::f32) == DType::f32 ? DType::f32 : DType::bf16;
  } else {
    throw ArgumentError("dtype: expected 'float32', 'bfloat16' or 'auto', got '" + dtype + "'");
  }
  return o;
}

int64_t ModelInfo::cache_bytes_for(int64_t tokens) const {
  int64_t b = 0;
  for (const auto& l : layers) b += l.cache.bytes_for(tokens);
  return b;
}

int64_t ModelInfo::cache_bytes_per_token() const {
  int64_t b = 0;
  for (const auto& l : layers) b += l.cache.bytes_per_token;
  return b;
}

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  require(options.kv_block_tokens > 0, "kv_block_tokens", "must be positive");
  ModelFiles files = ModelFiles::open(dir);
  const Config& config = files.config();
  const std::vector<std::string> archs = config.get_string_list("architectures");
  if (archs.empty()) throw LoadError(config.source() + ": key 'architectures': empty list");
  ModelBuilder builder = find_model_builder(archs[0]);
  if (!builder) {
    std::string known;
    for (const auto& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
    throw LoadError(config.source() + ": unsupported architecture '" + archs[0] + "' (supported: " + known + ")");
  }
  return builder(std::move(files), options);
}

std::vector<float> Model::forward(const Batch& batch, bool last_only) const {
  const int64_t S = batch.num_sequences(), T = batch.num_tokens();
  const ModelInfo& mi = info();
  require(S > 0, "batch", "has no sequences");
  require(int64_t(batch.cu_seqlens.size()) == S + 1 && batch.cu_seqlens[0] == 0 && batch.cu_seqlens[size_t(S)] == T,
          "cu_seqlens", "must have num_sequences + 1 entries from 0 to num_tokens");
  require(int64_t(batch.positions.size()) == T, "positions", "must have one entry per token");
  std::set<const SequenceState*> seen;
  for (int64_t s = 0; s < S; ++s) {
    const SequenceState* st = batch.sequences[size_t(s)];
    require(st != nullptr, "sequences", "null sequence state");
    require(st->owner == this, "sequences", "state was made by a different model");
    require(seen.insert(st).second, "sequences", "the same sequence appears twice in one batch");
    require(batch.seq_len(s) >= 1, "cu_seqlens", "every sequence needs at least one new token");
  }
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.tokens[size_t(t)];
    require(id >= 0 && id < mi.vocab_size, "tokens",
            "id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(mi.vocab_size) + ")");
    require(batch.positions[size_t(t)] >= 0, "positions", "must be non-negative");
  }
  std::vector<float> logits(size_t((last_only ? S : T) * mi.vocab_size));
  run(batch, last_only, logits.data());
  for (int64_t s = 0; s < S; ++s) batch.sequences[size_t(s)]->length += batch.seq_len(s);
  return logits;
}

std::vector<LayerTrace> Model::trace(std::span<const int32_t> ids) const {
  require(!ids.empty(), "ids", "must hold at least one token");
  const std::unique_ptr<SequenceState> seq = new_sequence();
  Batch batch;
  batch.add(*seq, ids);
  for (int32_t id : ids)
    require(id >= 0 && id < info().vocab_size, "ids",
            "id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(info().vocab_size) + ")");
  return run_trace(batch);
}

std::vector<LayerTrace> Model::run_trace(const Batch&) const {
  throw ArgumentError("trace: this model (" + info().architecture + ") has no trace hook");
}

}  // namespace attnzoo
