// Bindings for models: _core.Model (load, new_sequence, forward over one sequence or a ragged batch, inspect) and
// _core.Sequence (a sequence's caches). Python wraps them in attnzoo/model.py.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <span>

#include "bindings.h"
#include "core/error.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "layers/prompt_int8_route.h"
#include "models/model.h"
#include "models/model_device.h"
#include "models/registry.h"

namespace attnzoo::py {
namespace {

using Logits = nb::ndarray<nb::numpy, float, nb::ndim<2>>;

Logits to_numpy(std::vector<float>&& values, int64_t rows, int64_t vocab) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return Logits(owned->data(), {size_t(rows), size_t(vocab)}, owner);
}

std::span<const int32_t> ids_span(const AnyArray& ids, const char* name) {
  const TensorView v = as_view(ids, name);
  require(v.ndim == 1, name, "must be 1-D, got " + v.shape_str());
  require(v.shape[0] > 0, name, "must hold at least one token");
  return {as_int32(ids, name), size_t(v.shape[0])};
}

nb::dict cache_spec_dict(const CacheSpec& s, int64_t block_tokens) {
  nb::dict d;
  d["kind"] = std::string(cache_kind_name(s.kind));
  d["dtype"] = std::string(dtype_name(s.dtype));
  d["bytes_per_token"] = s.bytes_per_token();
  d["fixed_bytes"] = s.fixed_bytes();
  d["block_tokens"] = block_tokens;
  d["paged_tensors"] = s.paged_tensors;
  d["heads"] = s.heads;
  d["head_dim"] = s.head_dim;
  d["window"] = s.window;
  d["state_floats"] = s.state_floats;
  return d;
}

nb::dict pool_dict(const CacheManager& pool) {
  const PoolStats p = pool.stats();
  const int64_t block_tokens = pool.block_tokens();
  nb::dict d;
  d["bytes"] = p.bytes;
  d["block_tokens"] = block_tokens;
  d["num_blocks"] = p.num_blocks;
  d["free_blocks"] = p.free_blocks;
  d["cached_blocks"] = p.cached_blocks;
  d["block_bytes"] = p.block_bytes;
  d["state_slots"] = p.state_slots;
  d["free_state_slots"] = p.free_state_slots;
  d["snapshot_slots"] = p.snapshot_slots;
  d["snapshots"] = p.snapshots;
  d["state_slot_bytes"] = p.state_slot_bytes;
  d["prefix_cache_queries"] = p.prefix_queries;
  d["prefix_cache_hits"] = p.prefix_hits;
  // The block groups (one block table each per sequence): their window (0: every block kept), their layers, and
  // the blocks sequences hold in each now.
  nb::list groups;
  const std::vector<int64_t> in_use = pool.blocks_in_use();
  for (size_t g = 0; g < in_use.size(); ++g) {
    nb::dict gd;
    gd["window"] = pool.layout().groups[g].window;
    gd["layers"] = pool.layout().groups[g].layers;
    gd["blocks_in_use"] = in_use[g];
    groups.append(gd);
  }
  d["block_groups"] = groups;
  return d;
}

nb::dict formats_dict(const FormatChoice& f) {
  nb::dict d;
  d["checkpoint"] = f.checkpoint;
  d["weights_dtype"] = std::string(dtype_name(f.weights));
  d["weights_reason"] = f.weights_reason;
  d["kv_cache_dtype"] = std::string(dtype_name(f.kv_cache));
  d["kv_cache_reason"] = f.kv_cache_reason;
  d["prefill_products"] = f.prefill_products;
  d["decode_activations"] = f.decode_activations;
  // None: every prompt length; 0: none.
  if (f.int8_prompt_max_tokens == kPromptInt8EveryLength)
    d["int8_prompt_max_tokens"] = nb::none();
  else
    d["int8_prompt_max_tokens"] = f.int8_prompt_max_tokens;
  d["int8_rows"] = f.int8_rows;
  d["products_reason"] = f.products_reason;
  return d;
}

nb::dict info_dict(const ModelInfo& i, const CacheManager& pool) {
  const int64_t B = pool.block_tokens();
  nb::dict d;
  d["architecture"] = i.architecture;
  d["model_type"] = i.model_type;
  d["vocab_size"] = i.vocab_size;
  d["hidden_size"] = i.hidden_size;
  d["intermediate_size"] = i.intermediate_size;
  d["num_layers"] = i.num_layers;
  d["num_attention_heads"] = i.num_heads;
  d["num_key_value_heads"] = i.num_kv_heads;
  d["head_dim"] = i.head_dim;
  d["max_position_embeddings"] = i.max_position_embeddings;
  d["tied_embeddings"] = i.tied_embeddings;
  d["checkpoint_dtype"] = i.checkpoint_dtype;
  d["weights_dtype"] = std::string(dtype_name(i.weights));
  d["parameter_count"] = i.parameter_count;
  d["checkpoint_bytes"] = i.checkpoint_bytes;
  d["owned_weight_bytes"] = i.owned_weight_bytes;
  d["released_weight_bytes"] = i.released_weight_bytes;
  d["decode_weight_bytes"] = i.decode_weight_bytes;
  d["formats"] = formats_dict(i.formats);
  nb::list layers;
  for (const auto& l : i.layers) {
    nb::dict ld;
    ld["kind"] = l.kind;
    ld["window"] = l.window;
    ld["cache"] = cache_spec_dict(l.cache, B);
    layers.append(ld);
  }
  d["layers"] = layers;
  d["cache_bytes_per_token"] = i.cache_bytes_per_token();
  nb::dict at;
  for (int64_t t : {int64_t(4096), int64_t(131072), int64_t(1048576)}) at[nb::int_(t)] = i.cache_bytes_for(t, B);
  d["cache_bytes_at"] = at;
  d["cache_fixed_bytes"] = i.cache_fixed_bytes();
  d["pool"] = pool_dict(pool);
  return d;
}

nb::ndarray<nb::numpy, float> float_array(std::vector<float>&& values, std::vector<size_t> shape) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::ndarray<nb::numpy, float>(owned->data(), shape.size(), shape.data(), owner);
}

// One layer's trace: q/k [T, heads, head_dim] for softmax attention, state_norms for recurrent layers.
nb::dict trace_dict(LayerTrace&& t, int64_t T) {
  nb::dict d;
  d["kind"] = t.kind;
  if (!t.q.empty()) {
    d["q"] = float_array(std::move(t.q), {size_t(T), size_t(t.num_heads), size_t(t.head_dim)});
    d["k"] = float_array(std::move(t.k), {size_t(T), size_t(t.num_kv_heads), size_t(t.head_dim)});
    d["scale"] = t.scale;
    d["window"] = t.window;
    d["softcap"] = t.softcap;
    if (t.sinks.empty())
      d["sinks"] = nb::none();
    else
      d["sinks"] = float_array(std::move(t.sinks), {size_t(t.num_heads)});
  }
  if (!t.state_norms.empty()) {
    const size_t n = t.state_norms.size();
    d["state_norms"] = float_array(std::move(t.state_norms), {n});
  }
  return d;
}

}  // namespace

void bind_model(nb::module_& m) {
  static nb::object pool_error = nb::steal(PyErr_NewExceptionWithDoc(
      "attnzoo._core.PoolExhaustedError",
      "The model's memory pool cannot hold what was asked; nothing was written (free sequences, or load the "
      "model with a larger kv_cache_bytes).",
      PyExc_MemoryError, nullptr));
  m.attr("PoolExhaustedError") = pool_error;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PoolExhausted& e) {
      PyErr_SetString(pool_error.ptr(), e.what());
    }
  });

  nb::class_<Sequence>(m, "Sequence", "One sequence's place in its model's memory pool: blocks, state slot, length.")
      .def_prop_ro("length", [](const Sequence& s) { return s.length(); })
      .def_prop_ro("cache_bytes", [](const Sequence& s) { return s.bytes(); })
      .def_prop_ro("cached_tokens", [](const Sequence& s) { return s.cached_tokens(); },
                   "Tokens of the prompt taken from the prefix cache instead of computed.")
      .def_prop_ro("block_table", [](const Sequence& s) { return s.block_table(); },
                   "Block group 0's table (-1: a block a sliding window gave back).")
      .def_prop_ro("block_tables", [](const Sequence& s) { return s.block_tables(); }, "One table per block group.");

  m.def("supported_architectures", &supported_architectures,
        "config.json \"architectures\" names Model.load has a builder for (the registry's keys).");

  m.def(
      "resolve_formats",
      [](const std::string& path, const std::string& dtype, const std::string& kv_cache_dtype) {
        return formats_dict(resolve_formats(path, {dtype, kv_cache_dtype}));
      },
      nb::arg("path"), nb::arg("dtype") = "auto", nb::arg("kv_cache_dtype") = "auto",
      "What Model.load (and every CLI command) chooses for a checkpoint under the current matmul precision and "
      "this CPU, without loading it: the same dict as Model.formats.");

  nb::class_<Model>(m, "Model")
      .def_static(
          "load",
          [](const std::string& dir, const std::string& dtype, int64_t block_size, const std::string& kv_cache_dtype,
             int64_t kv_cache_bytes, int64_t max_num_seqs, bool enable_prefix_caching,
             int64_t snapshot_interval_blocks, uint64_t shuffle_blocks_seed, int64_t max_rollback_tokens,
             bool free_outside_window, const std::string& device, double gpu_memory_utilization) {
            LoadOptions opts = load_options(resolve_formats(dir, {dtype, kv_cache_dtype}));
            opts.pool.block_tokens = block_size;
            require(kv_cache_bytes >= 0, "kv_cache_bytes", "must be non-negative (0: the default)");
            opts.pool.bytes = kv_cache_bytes;
            opts.pool.max_sequences = max_num_seqs;
            opts.pool.prefix_caching = enable_prefix_caching;
            opts.pool.snapshot_interval_blocks = snapshot_interval_blocks;
            opts.pool.shuffle_seed = shuffle_blocks_seed;
            opts.pool.max_rollback_tokens = max_rollback_tokens;
            opts.pool.free_outside_window = free_outside_window;
            opts.pool.device = resolve_model_device(device, "device");
            require(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1, "gpu_memory_utilization",
                    "must be a fraction in (0, 1], got " + std::to_string(gpu_memory_utilization));
            opts.pool.gpu_memory_utilization = gpu_memory_utilization;
            KernelScope scope(false);  // loading converts weights on the pool: hold it, but do not cancel mid-way
            return Model::load(dir, opts);
          },
          nb::arg("dir"), nb::arg("dtype") = "auto", nb::arg("block_size") = int64_t(16),
          nb::arg("kv_cache_dtype") = "auto", nb::arg("kv_cache_bytes") = int64_t(0),
          nb::arg("max_num_seqs") = int64_t(64), nb::arg("enable_prefix_caching") = true,
          nb::arg("snapshot_interval_blocks") = int64_t(0), nb::arg("shuffle_blocks_seed") = uint64_t(0),
          nb::arg("max_rollback_tokens") = int64_t(0), nb::arg("free_outside_window") = true,
          nb::arg("device") = "auto", nb::arg("gpu_memory_utilization") = 0.9)
      .def("new_sequence", [](const Model& model) { return model.new_sequence(); }, nb::keep_alive<0, 1>())
      .def("fork", [](const Model& model, const Sequence& seq) { return model.fork(seq); }, nb::arg("seq"),
           nb::keep_alive<0, 1>(), "A sequence continuing from seq: its blocks shared copy-on-write, its state copied.")
      .def("pool_stats", [](const Model& model) { return pool_dict(model.cache()); })
      .def_prop_ro("device", [](const Model& model) { return model.cache().options().device.str(); },
                   "Where the model computes and its memory pool lives: \"cpu\" or \"cuda:N\".")
      .def("clear_prefix_cache", [](const Model& model) { model.cache().clear_prefix_cache(); })
      .def(
          "forward",
          [](const Model& model, const AnyArray& ids, Sequence& seq, bool last_only) {
            Batch batch;
            batch.add(seq, ids_span(ids, "ids"));
            std::vector<float> logits;
            {
              KernelScope scope(false);  // a half-run step would leave the sequence inconsistent
              logits = model.forward(batch, last_only);
            }
            return to_numpy(std::move(logits), last_only ? 1 : batch.num_tokens(), model.info().vocab_size);
          },
          nb::arg("ids"), nb::arg("seq"), nb::arg("last_only") = false)
      .def(
          "forward_batch",
          [](const Model& model, const std::vector<Sequence*>& seqs, const std::vector<AnyArray>& ids,
             bool last_only) {
            require(seqs.size() == ids.size(), "ids", "needs one id array per sequence");
            Batch batch;
            for (size_t i = 0; i < seqs.size(); ++i) {
              require(seqs[i] != nullptr, "seqs", "contains None");
              batch.add(*seqs[i], ids_span(ids[i], "ids"));
            }
            std::vector<float> logits;
            {
              KernelScope scope(false);  // a half-run step would leave the sequence inconsistent
              logits = model.forward(batch, last_only);
            }
            return to_numpy(std::move(logits), last_only ? batch.num_sequences() : batch.num_tokens(),
                            model.info().vocab_size);
          },
          nb::arg("seqs"), nb::arg("ids"), nb::arg("last_only") = false,
          "Ragged batch: sequence i gets ids[i]; logits rows follow the packed token order.")
      .def(
          "trace",
          [](const Model& model, const AnyArray& ids) {
            const std::span<const int32_t> span = ids_span(ids, "ids");
            std::vector<LayerTrace> layers;
            {
              KernelScope scope(false);  // a half-run step would leave the sequence inconsistent
              layers = model.trace(span);
            }
            nb::list out;
            for (LayerTrace& t : layers) out.append(trace_dict(std::move(t), int64_t(span.size())));
            return out;
          },
          nb::arg("ids"),
          "Runs ids as a fresh sequence; one dict per layer: kind, and q/k [T, heads, head_dim] after RoPE with "
          "scale, window, softcap, sinks (softmax attention) or state_norms (recurrent layers).")
      .def("inspect", [](const Model& model) { return info_dict(model.info(), model.cache()); })
      .def_prop_ro("formats", [](const Model& model) { return formats_dict(model.info().formats); })
      .def_prop_ro("vocab_size", [](const Model& model) { return model.info().vocab_size; });
}

}  // namespace attnzoo::py
