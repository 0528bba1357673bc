#include "models/model.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "core/error.h"
#include "loader/load_error.h"
#include "loader/model_dir.h"
#include "models/model_device.h"
#include "models/registry.h"

namespace attnzoo {

LoadOptions load_options(const FormatChoice& formats) {
  LoadOptions o;
  o.weights = formats.weights;
  o.pool.kv_dtype = formats.kv_cache;
  o.formats = formats;
  return o;
}

int64_t ModelInfo::cache_bytes_for(int64_t tokens, int64_t block_tokens) const {
  std::vector<CacheSpec> specs;
  for (const auto& l : layers) specs.push_back(l.cache);
  int64_t b = 0;
  for (int64_t held : bytes_held(specs, tokens, block_tokens)) b = checked_add(b, held, "cache bytes");
  return b;
}

int64_t ModelInfo::cache_bytes_per_token() const {
  int64_t b = 0;
  for (const auto& l : layers) b = checked_add(b, l.cache.bytes_per_token(), "cache bytes per token");
  return b;
}

int64_t ModelInfo::cache_fixed_bytes() const {
  int64_t b = 0;
  for (const auto& l : layers) b = checked_add(b, l.cache.fixed_bytes(), "cache state bytes");
  return b;
}

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& options) {
  ModelFiles files = ModelFiles::open(dir);
  const Config& config = files.config();
  const std::vector<std::string> archs = config.get_string_list("architectures");
  if (archs.empty()) throw LoadError(config.source() + ": key 'architectures': empty list");
  // Before the weights load: a device the runner cannot compute on is refused without the wait.
  require_model_device(options.pool.device, "device");
  ModelBuilder builder = find_model_builder(archs[0]);
  if (!builder) {
    std::string known;
    for (const auto& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
    throw LoadError(config.source() + ": unsupported architecture '" + archs[0] + "' (supported: " + known + ")");
  }
  const std::string source = config.source();  // `files` moves into the builder
  std::unique_ptr<Model> model;
  try {
    model = builder(std::move(files), options);
  } catch (const LoadError&) {
    throw;
  } catch (const ArgumentError& e) {
    // The layers check the values they are built with under the config's key names (head_dim, rope_theta),
    // not knowing which file those came from.
    throw LoadError(source + ": " + e.what());
  }
  PoolOptions pool = options.pool;
  std::string kv_reason;
  if (pool.device.is_cuda()) {
    // The CUDA attention kernels read 16-bit or 8-bit caches: an f32 one is held as bf16 there.
    const bool widened_kv = pool.kv_dtype == DType::f32;
    if (widened_kv) pool.kv_dtype = DType::bf16;
    // Refusals by name first; then the weights go up before the pool is sized from the free device memory, so
    // they are counted out of it.
    model->runner_ = model->make_device_runner(pool.device, pool.kv_dtype);
    if (widened_kv) {
      kv_reason = "f32 chosen, held as bf16 on " + pool.device.str() + " (the CUDA attention reads 16- or 8-bit caches)";
      std::fprintf(stderr, "attnzoo: KV cache held as bf16 on %s, not f32 (the GPU's attention reads 16- or 8-bit "
                   "caches; half the bytes, 8 significant bits)\n", pool.device.str().c_str());
    }
  }
  std::vector<CacheSpec> specs;
  for (auto& l : model->info().layers) specs.push_back(l.cache);
  const CacheGeometry geometry = plan_cache(specs, pool);
  model->cache_ = std::make_shared<CacheManager>(geometry);
  model->storage_ = std::make_unique<CacheStorage>(geometry);
  // What inspect reports is what the pool holds: the layer specs in the pool's KV dtype.
  auto& layers = const_cast<ModelInfo&>(model->info()).layers;
  for (size_t l = 0; l < layers.size(); ++l) layers[l].cache = geometry.specs[l];
  // The formats reported are the ones held: options set by hand (tests, a draft given its target's options
  // changed afterwards) say so instead of another checkpoint's reasons.
  FormatChoice& f = const_cast<ModelInfo&>(model->info()).formats;
  f = options.formats;
  if (f.weights != options.weights || f.weights_reason.empty()) f.weights_reason = "set by the caller (LoadOptions)";
  if (f.kv_cache != options.pool.kv_dtype || f.kv_cache_reason.empty())
    f.kv_cache_reason = "set by the caller (LoadOptions)";
  if (!kv_reason.empty()) f.kv_cache_reason = kv_reason;
  f.weights = options.weights;
  f.kv_cache = pool.kv_dtype;
  return model;
}

namespace {

void validate_batch(const Batch& batch, const ModelInfo& mi, const CacheManager& cache) {
  const int64_t S = batch.num_sequences(), T = batch.num_tokens();
  require(S > 0 && int64_t(batch.sequences.size()) == S, "batch", "needs one sequence per cu_seqlens range");
  require(batch.cu_seqlens[0] == 0 && batch.cu_seqlens[size_t(S)] == T, "cu_seqlens",
          "must have num_sequences + 1 entries from 0 to num_tokens");
  require(int64_t(batch.positions.size()) == T, "positions", "must have one entry per token");
  thread_local std::vector<const Sequence*> seen;  // kept between calls: a decode step allocates nothing
  seen.assign(batch.sequences.begin(), batch.sequences.end());
  for (int64_t s = 0; s < S; ++s) {
    const Sequence* st = batch.sequences[size_t(s)];
    require(st != nullptr, "sequences", "null sequence");
    require(st->manager() == &cache, "sequences", "sequence was made by a different model");
    require(batch.seq_len(s) >= 1, "cu_seqlens", "every sequence needs at least one new token");
  }
  std::sort(seen.begin(), seen.end());
  require(std::adjacent_find(seen.begin(), seen.end()) == seen.end(), "sequences",
          "the same sequence appears twice in one batch");
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.tokens[size_t(t)];
    if (id < 0 || id >= mi.vocab_size)
      throw ArgumentError("tokens: id " + std::to_string(id) + " outside the vocabulary [0, " +
                          std::to_string(mi.vocab_size) + ")");
    require(batch.positions[size_t(t)] >= 0, "positions", "must be non-negative");
  }
}

// The next piece of a batch: each sequence's tokens from its cursor up to its next state-snapshot boundary.
struct Piece {
  Batch batch;
  std::vector<int64_t> source;  // packed row in the caller's batch of each row here
};

// forward_rows' working lists, one set per thread, cleared by each call and never shrunk: a decode step reuses
// them and allocates nothing.
struct ForwardScratch {
  std::vector<int64_t> cursor, end, wanted_per_seq, add, out_row, rows, dest, all_rows;
  std::vector<uint8_t> attached;
  Piece piece;
  std::vector<float> piece_logits;
};

ForwardScratch& forward_scratch() {
  thread_local ForwardScratch s;
  return s;
}

// The rows a forward call asks for: every token's when logits_indices is empty.
std::span<const int64_t> wanted_rows(const Batch& in, std::span<const int64_t> logits_indices) {
  if (!logits_indices.empty()) return logits_indices;
  std::vector<int64_t>& all = forward_scratch().all_rows;
  all.resize(size_t(in.num_tokens()));
  for (size_t t = 0; t < all.size(); ++t) all[t] = int64_t(t);
  return all;
}

}  // namespace

void Model::prepare(Batch& batch) const {
  fill_batch_memory(*cache_, batch);
  cache_->flush(*storage_);
}

std::vector<float> Model::forward(const Batch& batch, bool last_only) const {
  std::vector<int64_t> rows;
  if (last_only)
    for (int64_t s = 0; s < batch.num_sequences(); ++s) rows.push_back(batch.seq_begin(s + 1) - 1);
  else
    for (int64_t t = 0; t < batch.num_tokens(); ++t) rows.push_back(t);
  std::vector<float> logits(rows.size() * size_t(info().vocab_size));
  forward_rows(batch, rows, logits.data(), /*leave_on_device=*/false);
  return logits;
}

std::vector<float> Model::forward(const Batch& in, std::span<const int64_t> logits_indices) const {
  const size_t n = logits_indices.empty() ? size_t(in.num_tokens()) : logits_indices.size();
  std::vector<float> logits(n * size_t(info().vocab_size));
  forward(in, logits_indices, logits);
  return logits;
}

void Model::forward(const Batch& in, std::span<const int64_t> logits_indices, std::span<float> logits) const {
  const std::span<const int64_t> wanted = wanted_rows(in, logits_indices);
  const size_t need = wanted.size() * size_t(info().vocab_size);
  if (logits.size() != need)
    throw ArgumentError("logits: expected " + std::to_string(need) + " floats ([" + std::to_string(wanted.size()) +
                        ", " + std::to_string(info().vocab_size) + "]), got " + std::to_string(logits.size()));
  forward_rows(in, wanted, logits.data(), /*leave_on_device=*/false);
}

TensorView Model::forward_logits(const Batch& in, std::span<const int64_t> logits_indices,
                                 std::vector<float>& host) const {
  const std::span<const int64_t> wanted = wanted_rows(in, logits_indices);
  const size_t need = wanted.size() * size_t(info().vocab_size);
  if (host.size() < need) host.resize(need);
  return forward_rows(in, wanted, host.data(), /*leave_on_device=*/true);
}

void Model::rollback(Sequence& seq, int64_t length) const {
  require(seq.manager() == cache_.get(), "sequence", "was made by a different model");
  require(length >= 0 && length <= seq.length(), "length",
          "must be in [0, " + std::to_string(seq.length()) + "], got " + std::to_string(length));
  const std::vector<int32_t> tokens(seq.tokens().begin(), seq.tokens().begin() + length);
  int64_t at;
  {
    SequenceLease lease(seq);
    at = cache_->rollback(seq, length);
  }
  if (at == length) return;
  Batch batch;
  batch.add(seq, std::span(tokens).subspan(size_t(at)));
  forward_rows(batch, {}, nullptr, /*leave_on_device=*/false);
}

TensorView Model::forward_rows(const Batch& in, std::span<const int64_t> wanted, float* host,
                               bool leave_on_device) const {
  const ModelInfo& mi = info();
  validate_batch(in, mi, *cache_);
  const int64_t S = in.num_sequences(), V = mi.vocab_size;
  for (int64_t r : wanted)
    if (r < 0 || r >= in.num_tokens())
      throw ArgumentError("logits_indices: entry " + std::to_string(r) + " is outside the batch's " +
                          std::to_string(in.num_tokens()) + " tokens");
  const SequencesLease lease(in.sequences);
  // The batch took its positions from each sequence's length before the lease: another thread's call that ended
  // in between would leave them stale (wrong RoPE positions, silently), so they are checked under the lease.
  for (int64_t s = 0; s < S; ++s)
    if (in.positions[size_t(in.seq_begin(s))] != in.sequences[size_t(s)]->length())
      throw ArgumentError("sequences: sequence " + std::to_string(s) + " changed after the batch was built (used by "
                          "another thread?): its first new position is " +
                          std::to_string(in.positions[size_t(in.seq_begin(s))]) + ", its length " +
                          std::to_string(in.sequences[size_t(s)]->length()));

  // Each sequence's first token still to compute (after a cached prefix) and the rows whose logits it wants.
  ForwardScratch& w = forward_scratch();
  std::vector<int64_t>& cursor = w.cursor;
  std::vector<int64_t>& end = w.end;
  std::vector<uint8_t>& attached = w.attached;
  std::vector<int64_t>& wanted_per_seq = w.wanted_per_seq;
  cursor.assign(size_t(S), 0);
  end.assign(size_t(S), 0);
  attached.assign(size_t(S), 0);
  wanted_per_seq.assign(size_t(S), 0);
  for (int64_t r : wanted) {
    const int64_t s = std::upper_bound(in.cu_seqlens.begin(), in.cu_seqlens.end(), int32_t(r)) - in.cu_seqlens.begin() - 1;
    wanted_per_seq[size_t(s)] = std::max<int64_t>(wanted_per_seq[size_t(s)], r == in.seq_begin(s + 1) - 1 ? 1 : 2);
  }
  for (int64_t s = 0; s < S; ++s) {
    cursor[size_t(s)] = in.seq_begin(s);
    end[size_t(s)] = in.seq_begin(s + 1);
    Sequence& seq = *in.sequences[size_t(s)];
    // Only the last token's logits are asked for: a cached prefix of the prompt can stand in for computing it.
    if (seq.length() == 0 && wanted_per_seq[size_t(s)] < 2 && in.reuse_cached_prefix &&
        cache_->options().prefix_caching) {
      const int64_t hit = cache_->attach_cached_prefix(
          seq, std::span(in.tokens).subspan(size_t(in.seq_begin(s)), size_t(in.seq_len(s))));
      cursor[size_t(s)] += hit;
      attached[size_t(s)] = hit > 0;
    }
  }
  {
    std::vector<int64_t>& add = w.add;
    add.resize(size_t(S));
    for (int64_t s = 0; s < S; ++s) add[size_t(s)] = end[size_t(s)] - cursor[size_t(s)];
    try {
      cache_->reserve(in.sequences, add);
    } catch (const PoolExhausted&) {
      for (int64_t s = 0; s < S; ++s)
        if (attached[size_t(s)]) cache_->reset(*in.sequences[size_t(s)]);
      throw;
    }
  }

  std::vector<int64_t>& out_row = w.out_row;
  out_row.assign(size_t(in.num_tokens()), -1);
  for (size_t i = 0; i < wanted.size(); ++i) out_row[size_t(wanted[i])] = int64_t(i);
  // Recurrent state can only be snapshotted between forward passes: with prefix caching on a model with state
  // layers, the tokens run in pieces that end on the snapshot boundaries.
  const int64_t interval = cache_->has_state() && cache_->options().prefix_caching ? cache_->snapshot_interval_tokens() : 0;
  const bool per_token_checkpoints = in.checkpoint_each_token && cache_->has_state();
  // A GPU model's rows can stay where its head wrote them only when one run computes them all, in the caller's
  // order; otherwise each piece's rows come down to their places in `host`.
  leave_on_device = leave_on_device && runner_ && interval == 0 && !per_token_checkpoints &&
                    std::adjacent_find(wanted.begin(), wanted.end(), std::greater_equal<int64_t>()) == wanted.end();
  TensorView result;
  if (!wanted.empty()) result = TensorView::contiguous(host, DType::f32, {int64_t(wanted.size()), V});
  Piece& p = w.piece;
  while (true) {
    p.batch.clear();
    p.source.clear();
    for (int64_t s = 0; s < S; ++s) {
      if (cursor[size_t(s)] == end[size_t(s)]) continue;
      Sequence& seq = *in.sequences[size_t(s)];
      int64_t stop = end[size_t(s)];
      if (interval > 0) stop = std::min(stop, cursor[size_t(s)] + (interval - seq.length() % interval));
      if (per_token_checkpoints) stop = cursor[size_t(s)] + 1;
      p.batch.sequences.push_back(&seq);
      for (int64_t t = cursor[size_t(s)]; t < stop; ++t) {
        p.batch.tokens.push_back(in.tokens[size_t(t)]);
        p.batch.positions.push_back(in.positions[size_t(t)]);
        p.source.push_back(t);
      }
      p.batch.cu_seqlens.push_back(int32_t(p.batch.tokens.size()));
      cursor[size_t(s)] = stop;
    }
    if (p.batch.sequences.empty()) break;
    prepare(p.batch);
    std::vector<int64_t>& rows = w.rows;
    std::vector<int64_t>& dest = w.dest;
    rows.clear();
    dest.clear();
    bool in_place = true;  // the piece's logits rows are the caller's rows 0, 1, ...: written there directly
    for (size_t i = 0; i < p.source.size(); ++i)
      if (out_row[size_t(p.source[i])] >= 0) {
        in_place = in_place && out_row[size_t(p.source[i])] == int64_t(rows.size());
        rows.push_back(int64_t(i));
        dest.push_back(out_row[size_t(p.source[i])]);
      }
    if (runner_) {
      const TensorView got = runner_->run(p.batch, rows, *storage_);
      if (leave_on_device && in_place && rows.size() == wanted.size()) {
        result = got;
      } else if (!rows.empty()) {
        // Runs of consecutive destinations come down in one copy each (the whole piece when in place), on the
        // runner's device's stream, after its step.
        const DeviceGuard on_device(got.device);
        const size_t row_bytes = size_t(V) * sizeof(float);
        for (size_t i = 0; i < rows.size();) {
          size_t n = 1;
          while (i + n < rows.size() && dest[i + n] == dest[i] + int64_t(n)) ++n;
          copy_bytes(host + size_t(dest[i]) * size_t(V), Device::cpu(), got.ptr<const float>() + i * size_t(V),
                     got.device, n * row_bytes, current_stream());
          i += n;
        }
      }
    } else if (in_place) {
      run(p.batch, rows, host);
    } else {
      w.piece_logits.resize(rows.size() * size_t(V));
      run(p.batch, rows, w.piece_logits.data());
      for (size_t i = 0; i < rows.size(); ++i)
        std::copy_n(w.piece_logits.data() + i * size_t(V), V, host + size_t(dest[i]) * size_t(V));
    }
    for (int64_t s = 0; s < p.batch.num_sequences(); ++s) {
      cache_->advance(*p.batch.sequences[size_t(s)],
                     std::span(p.batch.tokens).subspan(size_t(p.batch.seq_begin(s)), size_t(p.batch.seq_len(s))));
      if (per_token_checkpoints) cache_->checkpoint(*p.batch.sequences[size_t(s)]);
    }
  }
  return result;
}

std::vector<LayerTrace> Model::trace(std::span<const int32_t> ids) const {
  require(!ids.empty(), "ids", "must hold at least one token");
  for (int32_t id : ids)
    require(id >= 0 && id < info().vocab_size, "ids",
            "id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(info().vocab_size) + ")");
  require(!runner_, "trace", [&] { return "runs on the CPU only so far (the model is on " + storage_->device().str() + ")"; });
  const std::unique_ptr<Sequence> seq = new_sequence();
  Batch batch;
  batch.add(*seq, ids);
  const int64_t n = int64_t(ids.size());
  cache_->reserve(batch.sequences, std::span(&n, 1));
  prepare(batch);
  return run_trace(batch);
}

std::unique_ptr<DeviceRunner> Model::make_device_runner(Device device, DType) const {
  throw ArgumentError("device: " + info().architecture + " runs on the CPU only so far (" + device.str() + " asked)");
}

std::vector<LayerTrace> Model::run_trace(const Batch&) const {
  throw ArgumentError("trace: this model (" + info().architecture + ") has no trace hook");
}

}  // namespace attnzoo
