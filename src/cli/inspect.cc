// attnzoo inspect: what a checkpoint is made of and what it costs to run: architecture, layer kinds, parameters,
// weight bytes, and per-sequence cache bytes from each layer's CacheSpec (the one formula the engine also uses).
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
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

void print_text(const ModelInfo& i, const std::string& dir) {
  std::printf("model        %s\n", dir.c_str());
  std::printf("architecture %s (%s)\n", i.architecture.c_str(), i.model_type.c_str());
  std::printf("shape        %lld layers, hidden %lld, intermediate %lld, heads %lld (kv %lld) x %lld, vocab %lld\n",
              (long long)i.num_layers, (long long)i.hidden_size, (long long)i.intermediate_size,
              (long long)i.num_heads, (long long)i.num_kv_heads, (long long)i.head_dim, (long long)i.vocab_size);
  std::map<std::string, int> kinds;
  for (const auto& l : i.layers) kinds[l.kind + (l.window ? " (window " + std::to_string(l.window) + ")" : "")]++;
  std::printf("layers      ");
  for (const auto& [k, n] : kinds) std::printf(" %d x %s", n, k.c_str());
  std::printf("\n");
  std::printf("parameters   %lld (%.6g B)%s\n", (long long)i.parameter_count, double(i.parameter_count) * 1e-9,
              i.tied_embeddings ? ", embeddings tied" : "");
  std::printf("weights      %s in the checkpoint (%s), %s converted at load, projections in %s\n",
              human_bytes(double(i.checkpoint_bytes)).c_str(),
              i.checkpoint_dtype.empty() ? "dtype unset" : i.checkpoint_dtype.c_str(),
              human_bytes(double(i.owned_weight_bytes)).c_str(), dtype_name(i.weights));
  std::printf("cache        %s per token per sequence\n", human_bytes(double(i.cache_bytes_per_token())).c_str());
  // Per layer kind: what grows with the context (KV, latent) and what does not (recurrent state, conv tail).
  std::map<std::string, std::pair<int64_t, int64_t>> per_kind;  // kind -> (bytes per token, fixed bytes)
  for (const auto& l : i.layers) {
    auto& [per_token, fixed] = per_kind[l.kind + " [" + l.cache.kind + "]"];
    per_token += l.cache.bytes_per_token;
    fixed += l.cache.fixed_bytes;
  }
  for (const auto& [k, v] : per_kind)
    std::printf("  %-32s %s per token, %s fixed state per sequence\n", k.c_str(), human_bytes(double(v.first)).c_str(),
                human_bytes(double(v.second)).c_str());
  for (int64_t t : kContexts)
    std::printf("  at %7lld tokens: %s\n", (long long)t, human_bytes(double(i.cache_bytes_for(t))).c_str());
}

void print_json(const ModelInfo& i, const std::string& dir) {
  std::printf("{\"model\": %s, \"architecture\": %s, \"model_type\": %s, ", json_string(dir).c_str(),
              json_string(i.architecture).c_str(), json_string(i.model_type).c_str());
  std::printf("\"num_layers\": %lld, \"hidden_size\": %lld, \"intermediate_size\": %lld, ", (long long)i.num_layers,
              (long long)i.hidden_size, (long long)i.intermediate_size);
  std::printf("\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"head_dim\": %lld, \"vocab_size\": %lld, ",
              (long long)i.num_heads, (long long)i.num_kv_heads, (long long)i.head_dim, (long long)i.vocab_size);
  std::printf("\"parameter_count\": %lld, \"checkpoint_bytes\": %llu, \"owned_weight_bytes\": %llu, ",
              (long long)i.parameter_count, (unsigned long long)i.checkpoint_bytes,
              (unsigned long long)i.owned_weight_bytes);
  std::printf("\"checkpoint_dtype\": %s, \"weights_dtype\": %s, \"tied_embeddings\": %s, ",
              json_string(i.checkpoint_dtype).c_str(), json_string(dtype_name(i.weights)).c_str(),
              i.tied_embeddings ? "true" : "false");
  std::printf("\"layers\": [");
  for (size_t l = 0; l < i.layers.size(); ++l) {
    const auto& L = i.layers[l];
    std::printf("%s{\"kind\": %s, \"window\": %lld, \"cache\": {\"kind\": %s, \"bytes_per_token\": %lld, "
                "\"fixed_bytes\": %lld, \"block_tokens\": %lld, \"max_tokens\": %lld}}",
                l ? ", " : "", json_string(L.kind).c_str(), (long long)L.window, json_string(L.cache.kind).c_str(),
                (long long)L.cache.bytes_per_token, (long long)L.cache.fixed_bytes, (long long)L.cache.block_tokens,
                (long long)L.cache.max_tokens);
  }
  std::printf("], \"cache_bytes_per_token\": %lld, \"cache_bytes_at\": {", (long long)i.cache_bytes_per_token());
  bool first = true;
  for (int64_t t : kContexts) {
    std::printf("%s\"%lld\": %lld", first ? "" : ", ", (long long)t, (long long)i.cache_bytes_for(t));
    first = false;
  }
  std::printf("}}\n");
}

}  // namespace

int run_inspect(const std::vector<std::string>& args) {
  std::string dir;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-m" || args[i] == "--model") {
      if (i + 1 >= args.size()) throw ArgumentError(args[i] + ": needs a value");
      dir = args[++i];
    } else if (args[i] == "--json") {
      json = true;
    } else {
      throw ArgumentError("inspect: unknown option '" + args[i] + "'");
    }
  }
  if (dir.empty()) throw ArgumentError("inspect: -m DIR (Hugging Face model directory) is required");
  const auto model = Model::load(dir);
  if (json)
    print_json(model->info(), dir);
  else
    print_text(model->info(), dir);
  return 0;
}

}  // namespace attnzoo::cli
