// attnzoo inspect: what a model is made of and what it costs to run: architecture, layer kinds, parameters,
// weight bytes, and per-sequence memory from each layer's CacheSpec (the one formula the engine also uses),
// grouped by layer type at 4k / 128k / 1M tokens. With a full checkpoint the layers are the built model's; with
// config.json alone (--config FILE, or a directory holding no weights) they come from the architecture's
// describer, which asks the same mixer spec() functions. Hybrids are compared with the same stack made all
// softmax attention (and, for MLA models, all MLA).
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/usage.h"
#include "core/checked.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "layers/matmul_precision.h"
#include "layers/prompt_int8_route.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/describe.h"
#include "models/format_choice.h"
#include "models/model.h"

namespace attnzoo::cli {
namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

// Parameter counts as model cards write them: 120.8K, 135M, 1.2B (one decimal, a trailing .0 dropped).
std::string human_count(int64_t n) {
  const char* units[] = {"", "K", "M", "B", "T"};
  double v = double(n);
  int u = 0;
  while (v >= 999.95 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f" : "%.1f", v);
  std::string out = buf;
  if (out.size() > 2 && out.compare(out.size() - 2, 2, ".0") == 0) out.resize(out.size() - 2);
  return out + units[u];
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

constexpr int64_t kContexts[] = {4096, 131072, 1048576};
const char* const kContextNames[] = {"4k", "128k", "1M"};

// Layers of one kind (and cache kind, and window): how many, and their summed specs' bytes.
// Sums are checked: absurd configs make sizes that do not fit, and those must be an error, not a negative size.
struct KindRow {
  std::string label;
  int layers = 0;
  int64_t per_token = 0, fixed = 0;
  int64_t at[3] = {0, 0, 0};
};

std::vector<KindRow> per_kind(const std::vector<LayerInfo>& layers, int64_t B) {
  std::map<std::string, KindRow> rows;
  std::vector<CacheSpec> specs;
  for (const auto& l : layers) specs.push_back(l.cache);
  // Sliding-window layers hold what their block group keeps (the pool's accounting): their window, not the context.
  std::vector<int64_t> held[3];
  for (int c = 0; c < 3; ++c) held[c] = bytes_held(specs, kContexts[c], B);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo& l = layers[i];
    const std::string label =
        l.kind + (l.window ? " (window " + std::to_string(l.window) + ")" : "") + " [" + cache_kind_name(l.cache.kind) + "]";
    KindRow& r = rows[label];
    r.label = label;
    r.layers += 1;
    r.per_token = checked_add(r.per_token, l.cache.bytes_per_token(), "cache bytes per token");
    r.fixed = checked_add(r.fixed, l.cache.fixed_bytes(), "state bytes");
    for (int c = 0; c < 3; ++c) r.at[c] = checked_add(r.at[c], held[c][i], "cache bytes");
  }
  std::vector<KindRow> out;
  for (auto& [k, r] : rows) out.push_back(r);
  return out;
}

KindRow total_of(const std::vector<LayerInfo>& layers, const std::string& label, int64_t B) {
  KindRow t;
  t.label = label;
  for (const auto& r : per_kind(layers, B)) {
    t.layers += r.layers;
    t.per_token = checked_add(t.per_token, r.per_token, "cache bytes per token");
    t.fixed = checked_add(t.fixed, r.fixed, "state bytes");
    for (int c = 0; c < 3; ++c) t.at[c] = checked_add(t.at[c], r.at[c], "cache bytes");
  }
  return t;
}

// 100 * (1 - ours / theirs): how much less this model holds; nullopt when the other holds nothing.
std::optional<double> saving(int64_t ours, int64_t theirs) {
  if (theirs <= 0) return std::nullopt;
  return 100.0 * (1.0 - double(ours) / double(theirs));
}

std::string percent(std::optional<double> p) {
  if (!p) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *p);
  return buf;
}

struct Comparison {
  std::string name, heads;  // "all_attention" / "all_mla"; what one layer of it is
  std::vector<LayerInfo> layers;
};

// The comparisons worth printing: all-attention when some layer is not plain full softmax attention, all-MLA
// for MLA models with some non-MLA layer.
std::vector<Comparison> comparisons(const ModelInfo& info, const std::optional<ModelDescription>& d) {
  std::vector<Comparison> out;
  if (!d) return out;
  bool all_attention = true, all_mla = true;
  for (const auto& l : info.layers) {
    all_attention = all_attention && l.kind == "attention";
    all_mla = all_mla && l.kind == MlaMixer::kKind;
  }
  if (!all_attention) {
    std::vector<LayerInfo> layers = all_attention_stack(*d);
    if (!layers.empty()) {
      char heads[160];
      if (d->mla) {
        std::snprintf(heads, sizeof heads, "%lld heads, K %lld + V %lld per head (MLA uncompressed)",
                      (long long)d->mla->num_heads, (long long)d->mla->qk_head_dim(), (long long)d->mla->v_head_dim);
      } else {
        std::snprintf(heads, sizeof heads, "%lld q / %lld kv heads x %lld", (long long)d->attention->num_heads,
                      (long long)d->attention->num_kv_heads, (long long)d->attention->head_dim);
      }
      out.push_back({"all_attention", heads, std::move(layers)});
    }
  }
  if (d->mla && !all_mla) {
    char heads[96];
    std::snprintf(heads, sizeof heads, "latent %lld + rope %lld per token", (long long)d->mla->kv_lora_rank,
                  (long long)d->mla->qk_rope_head_dim);
    out.push_back({"all_mla", heads, all_mla_stack(*d)});
  }
  return out;
}

void print_row(const KindRow& r) {
  std::printf("  %-40s %6d %12s %12s %12s %12s %12s\n", r.label.c_str(), r.layers, human_bytes(double(r.per_token)).c_str(),
              human_bytes(double(r.fixed)).c_str(), human_bytes(double(r.at[0])).c_str(),
              human_bytes(double(r.at[1])).c_str(), human_bytes(double(r.at[2])).c_str());
}

// pool, blocks_4k: a built model's pool and the blocks a 4k-token sequence holds in it (every block group's).
void print_text(const ModelInfo& i, const std::string& source, const std::optional<ModelDescription>& d,
                bool config_only, int64_t B, const PoolStats* pool, int64_t blocks_4k) {
  std::printf("model        %s%s\n", source.c_str(), config_only ? " (config only: no weights read)" : "");
  std::printf("architecture %s (%s)\n", i.architecture.c_str(), i.model_type.c_str());
  std::printf("shape        %lld layers, hidden %lld, intermediate %lld, heads %lld (kv %lld) x %lld, vocab %lld\n",
              (long long)i.num_layers, (long long)i.hidden_size, (long long)i.intermediate_size,
              (long long)i.num_heads, (long long)i.num_kv_heads, (long long)i.head_dim, (long long)i.vocab_size);
  std::map<std::string, int> kinds;
  for (const auto& l : i.layers) kinds[l.kind + (l.window ? " (window " + std::to_string(l.window) + ")" : "")]++;
  std::printf("layers      ");
  for (const auto& [k, n] : kinds) std::printf(" %d x %s", n, k.c_str());
  std::printf("\n");
  if (!config_only) {
    std::printf("parameters   %s (%lld)%s\n", human_count(i.parameter_count).c_str(), (long long)i.parameter_count,
                i.tied_embeddings ? ", embeddings tied" : "");
    // Copies made at load (converted, regrouped, moved onto cache lines) stand in for the mapped pages they came
    // from, which are released: the figure held is what the process keeps, not checkpoint plus copies.
    const std::string copies =
        i.owned_weight_bytes == 0
            ? std::string("all borrowed from the mapping")
            : human_bytes(double(i.owned_weight_bytes)) + " copied at load in place of " +
                  human_bytes(double(i.released_weight_bytes)) + " of its mapped pages (" +
                  human_bytes(double(i.checkpoint_bytes - i.released_weight_bytes + i.owned_weight_bytes)) + " held)";
    std::printf("weights      %s in the checkpoint (%s), %s; projections in %s\n",
                human_bytes(double(i.checkpoint_bytes)).c_str(),
                i.checkpoint_dtype.empty() ? "dtype unset" : i.checkpoint_dtype.c_str(), copies.c_str(),
                dtype_name(i.weights));
  } else if (d && d->parameters_estimated) {
    std::printf("parameters   %s (%lld), estimated from the config (the tensors the builder would load)%s\n",
                human_count(i.parameter_count).c_str(), (long long)i.parameter_count,
                i.tied_embeddings ? ", embeddings tied" : "");
  } else {
    std::printf("parameters   not computed from the config for this architecture (inspect the checkpoint)\n");
  }
  std::printf("formats (what \"auto\" chose, and why):\n%s", describe_formats(i.formats, "  ").c_str());
  std::printf("memory per sequence (%s KV cache in blocks of %lld tokens, f32 states, as the pool holds them), by layer type:\n",
              i.layers.empty() ? "f32" : dtype_name(i.layers[0].cache.dtype), (long long)B);
  std::printf("  %-40s %6s %12s %12s %12s %12s %12s\n", "layer type [cache]", "layers", "per token", "fixed",
              "at 4k", "at 128k", "at 1M");
  for (const auto& r : per_kind(i.layers, B)) print_row(r);
  const KindRow total = total_of(i.layers, "total", B);
  print_row(total);
  if (pool)
    std::printf("pool         %s reserved (--kv-cache-memory): %lld KV blocks of %lld tokens, %s each (%lld blocks per "
                "4k-token sequence); %lld state slots of %s, %lld prefix-state snapshots\n",
                human_bytes(double(pool->bytes)).c_str(), (long long)pool->num_blocks, (long long)B,
                human_bytes(double(pool->block_bytes)).c_str(), (long long)blocks_4k,
                (long long)pool->state_slots, human_bytes(double(pool->state_slot_bytes)).c_str(),
                (long long)pool->snapshot_slots);
  for (const auto& c : comparisons(i, d)) {
    const KindRow other = total_of(c.layers, c.name == "all_mla" ? "same stack, all MLA" : "same stack, all attention", B);
    std::printf("compared with %s (%s):\n", other.label.c_str(), c.heads.c_str());
    print_row(other);
    std::printf("  this model holds %s less per token (KV / latent growth)", percent(saving(total.per_token, other.per_token)).c_str());
    for (int k = 0; k < 3; ++k)
      std::printf(", %s less at %s", percent(saving(total.at[k], other.at[k])).c_str(), kContextNames[k]);
    std::printf(" (fixed state included)\n");
  }
}

void print_kind_json(const KindRow& r) {
  std::printf("{\"label\": %s, \"layers\": %d, \"bytes_per_token\": %lld, \"fixed_bytes\": %lld, \"bytes_at\": {",
              json_string(r.label).c_str(), r.layers, (long long)r.per_token, (long long)r.fixed);
  for (int c = 0; c < 3; ++c) std::printf("%s\"%lld\": %lld", c ? ", " : "", (long long)kContexts[c], (long long)r.at[c]);
  std::printf("}}");
}

void print_json(const ModelInfo& i, const std::string& source, const std::optional<ModelDescription>& d,
                bool config_only, int64_t B, const PoolStats* pool) {
  std::printf("{\"model\": %s, \"config_only\": %s, \"architecture\": %s, \"model_type\": %s, ",
              json_string(source).c_str(), config_only ? "true" : "false", json_string(i.architecture).c_str(),
              json_string(i.model_type).c_str());
  std::printf("\"num_layers\": %lld, \"hidden_size\": %lld, \"intermediate_size\": %lld, ", (long long)i.num_layers,
              (long long)i.hidden_size, (long long)i.intermediate_size);
  std::printf("\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"head_dim\": %lld, \"vocab_size\": %lld, ",
              (long long)i.num_heads, (long long)i.num_kv_heads, (long long)i.head_dim, (long long)i.vocab_size);
  const bool have_params = !config_only || (d && d->parameters_estimated);
  if (have_params)
    std::printf("\"parameter_count\": %lld, ", (long long)i.parameter_count);
  else
    std::printf("\"parameter_count\": null, ");
  std::printf("\"parameters_estimated\": %s, ", config_only && have_params ? "true" : "false");
  if (!config_only)
    std::printf("\"checkpoint_bytes\": %llu, \"owned_weight_bytes\": %llu, \"released_weight_bytes\": %llu, "
                "\"checkpoint_dtype\": %s, \"weights_dtype\": %s, ",
                (unsigned long long)i.checkpoint_bytes, (unsigned long long)i.owned_weight_bytes,
                (unsigned long long)i.released_weight_bytes,
                json_string(i.checkpoint_dtype).c_str(), json_string(dtype_name(i.weights)).c_str());
  const FormatChoice& f = i.formats;
  // null: every prompt length (as Model.formats gives None); 0: none.
  const std::string int8_max =
      f.int8_prompt_max_tokens == kPromptInt8EveryLength ? "null" : std::to_string(f.int8_prompt_max_tokens);
  std::printf("\"formats\": {\"checkpoint\": %s, \"weights_dtype\": %s, \"weights_reason\": %s, "
              "\"kv_cache_dtype\": %s, \"kv_cache_reason\": %s, \"prefill_products\": %s, "
              "\"decode_activations\": %s, \"int8_prompt_max_tokens\": %s, \"int8_rows\": %s, "
              "\"products_reason\": %s}, ",
              json_string(f.checkpoint).c_str(), json_string(dtype_name(f.weights)).c_str(),
              json_string(f.weights_reason).c_str(), json_string(dtype_name(f.kv_cache)).c_str(),
              json_string(f.kv_cache_reason).c_str(), json_string(f.prefill_products).c_str(),
              json_string(f.decode_activations).c_str(), int8_max.c_str(), json_string(f.int8_rows).c_str(),
              json_string(f.products_reason).c_str());
  std::printf("\"tied_embeddings\": %s, \"layers\": [", i.tied_embeddings ? "true" : "false");
  for (size_t l = 0; l < i.layers.size(); ++l) {
    const auto& L = i.layers[l];
    std::printf("%s{\"kind\": %s, \"window\": %lld, \"cache\": {\"kind\": %s, \"dtype\": %s, \"bytes_per_token\": %lld, "
                "\"fixed_bytes\": %lld, \"block_tokens\": %lld}}",
                l ? ", " : "", json_string(L.kind).c_str(), (long long)L.window,
                json_string(cache_kind_name(L.cache.kind)).c_str(), json_string(dtype_name(L.cache.dtype)).c_str(),
                (long long)L.cache.bytes_per_token(), (long long)L.cache.fixed_bytes(), (long long)B);
  }
  std::printf("], \"block_tokens\": %lld, ", (long long)B);
  if (pool)
    std::printf("\"pool\": {\"bytes\": %lld, \"num_blocks\": %lld, \"block_bytes\": %lld, \"state_slots\": %lld, "
                "\"state_slot_bytes\": %lld, \"snapshot_slots\": %lld}, ",
                (long long)pool->bytes, (long long)pool->num_blocks, (long long)pool->block_bytes,
                (long long)pool->state_slots, (long long)pool->state_slot_bytes, (long long)pool->snapshot_slots);
  std::printf("\"cache_bytes_per_token\": %lld, \"cache_bytes_at\": {", (long long)i.cache_bytes_per_token());
  for (int c = 0; c < 3; ++c)
    std::printf("%s\"%lld\": %lld", c ? ", " : "", (long long)kContexts[c], (long long)i.cache_bytes_for(kContexts[c], B));
  std::printf("}, \"per_kind\": [");
  const auto rows = per_kind(i.layers, B);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (r) std::printf(", ");
    print_kind_json(rows[r]);
  }
  std::printf("], \"comparisons\": {");
  const KindRow total = total_of(i.layers, "total", B);
  const auto cs = comparisons(i, d);
  for (size_t k = 0; k < cs.size(); ++k) {
    const KindRow other = total_of(cs[k].layers, cs[k].name, B);
    std::printf("%s%s: {\"heads\": %s, \"stack\": ", k ? ", " : "", json_string(cs[k].name).c_str(),
                json_string(cs[k].heads).c_str());
    print_kind_json(other);
    std::printf(", \"saving_percent_per_token\": ");
    const auto p = saving(total.per_token, other.per_token);
    p ? std::printf("%.6f", *p) : std::printf("null");
    std::printf(", \"saving_percent_at\": {");
    for (int c = 0; c < 3; ++c) {
      const auto q = saving(total.at[c], other.at[c]);
      std::printf("%s\"%lld\": ", c ? ", " : "", (long long)kContexts[c]);
      q ? std::printf("%.6f", *q) : std::printf("null");
    }
    std::printf("}}");
  }
  std::printf("}}\n");
}

bool holds_weights(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "model.safetensors") ||
         std::filesystem::exists(dir / "model.safetensors.index.json") || find_model_gguf(dir.string());
}

}  // namespace

const char* kInspectUsage =
    "usage: attnzoo inspect DIR | -m DIR | --config FILE [--json] [--dtype auto|float32|bfloat16]\n"
    "                       [--kv-cache-dtype auto|float32|bfloat16|float16|int8|fp8] [--block-size N]\n"
    "                       [--matmul-precision auto|highest|medium]\n"
    "  layers, parameters and KV / state bytes per layer type (config.json alone is enough), beside the same\n"
    "  stack built all-attention / all-MLA; the formats generate / serve / Model.load would choose, and why\n";

int run_inspect(const std::vector<std::string>& args) {
  std::string dir, config_file;
  bool json = false;
  FormatRequest request;
  int64_t block_tokens = PoolOptions{}.block_tokens;
  std::optional<PoolStats> pool;
  int64_t blocks_4k = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-m" || args[i] == "--model" || args[i] == "--config") {
      if (i + 1 >= args.size()) throw ArgumentError(args[i] + ": needs a value");
      (args[i] == "--config" ? config_file : dir) = args[i + 1];
      ++i;
    } else if (args[i] == "--json") {
      json = true;
    } else if (args[i] == "--kv-cache-dtype" || args[i] == "--block-size" || args[i] == "--dtype" ||
               args[i] == "--matmul-precision") {
      if (i + 1 >= args.size()) throw ArgumentError(args[i] + ": needs a value");
      const std::string& value = args[i + 1];
      if (args[i] == "--kv-cache-dtype") request.kv_cache_dtype = value;
      else if (args[i] == "--dtype") request.dtype = value;
      else if (args[i] == "--matmul-precision") set_matmul_precision(parse_matmul_precision(value));
      else block_tokens = parse_number<int64_t>(args[i], value);
      ++i;
    } else if (!args[i].empty() && args[i][0] != '-' && dir.empty() && config_file.empty()) {
      dir = args[i];
    } else {
      if (is_help(args[i])) throw HelpRequested(kInspectUsage);
      throw_unknown_option("inspect", args[i], kInspectUsage);
    }
  }
  if (dir.empty() && config_file.empty())
    throw ArgumentError("inspect: give a model directory (DIR or -m DIR) or a config file (--config FILE)");
  if (!dir.empty() && !config_file.empty()) throw ArgumentError("inspect: give either a directory or --config, not both");
  // A directory without weights (config.json alone) is inspected from its config.
  if (!dir.empty() && std::filesystem::is_directory(dir) && !holds_weights(dir))
    config_file = (std::filesystem::path(dir) / "config.json").string();

  const bool config_only = !config_file.empty();
  const FormatChoice formats =
      config_only ? resolve_formats(checkpoint_formats(Config::load(config_file)), request)
                  : resolve_formats(dir, request);
  LoadOptions options = load_options(formats);
  require(block_tokens > 0, "--block-size", "must be positive, got " + std::to_string(block_tokens));
  options.pool.block_tokens = block_tokens;
  // inspect reserves no pool memory of note: a small budget still reports the per-token and per-block sizes.
  options.pool.bytes = int64_t(1) << 30;
  std::optional<ModelDescription> description;
  std::unique_ptr<Model> model;
  ModelInfo info;
  if (config_only) {
    description = describe_model(Config::load(config_file), options);
    info = description->info;
    info.formats = formats;
  } else {
    model = Model::load(dir, options);
    info = model->info();
    pool = model->cache().stats();
    blocks_4k = model->cache().blocks_at_most(0, 4096, 1, 1);
    // Only for the comparisons' head shapes; the layers printed are the built model's own.
    if (find_model_describer(info.architecture)) {
      try {
        description = describe_model(model->config(), options);
      } catch (const std::exception&) {
        description.reset();  // the checkpoint loaded; without a description there are just no comparisons
      }
    }
  }
  const std::string source = config_only ? config_file : dir;
  if (json)
    print_json(info, source, description, config_only, options.pool.block_tokens, pool ? &*pool : nullptr);
  else
    print_text(info, source, description, config_only, options.pool.block_tokens, pool ? &*pool : nullptr, blocks_4k);
  return 0;
}

}  // namespace attnzoo::cli
