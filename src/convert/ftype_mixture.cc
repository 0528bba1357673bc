#include "convert/ftype_mixture.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace attnzoo {
namespace {

using Q = QuantType;

// Each row: name, file_type, main; attn_v (bump, raised, otherwise); ffn_down (bump, raised, otherwise);
// attn_output (a model without 8 experts), an 8-expert model's attn_output in Q5_K, needs an imatrix.
constexpr FileMixture kMixtures[] = {
    {"Q2_K_M", 10, Q::Q2_K, Bump::gqa_four, Q::Q4_K, Q::Q3_K, Bump::always, Q::Q3_K, Q::Q3_K, Q::Q3_K, true, false},
    {"Q2_K_S", 21, Q::Q2_K, Bump::gqa_four, Q::Q4_K, Q::Q2_K, Bump::first_eighth, Q::Q4_K, Q::Q2_K, Q::Q2_K, false,
     true},
    {"Q3_K_S", 11, Q::Q3_K, Bump::never, Q::Q3_K, Q::Q3_K, Bump::never, Q::Q3_K, Q::Q3_K, Q::Q3_K, true, false},
    {"Q3_K_M", 12, Q::Q3_K, Bump::first_two, Q::Q5_K, Q::Q4_K, Bump::first_sixteenth, Q::Q5_K, Q::Q4_K, Q::Q4_K, true,
     false},
    {"Q3_K_L", 13, Q::Q3_K, Bump::always, Q::Q5_K, Q::Q5_K, Bump::always, Q::Q5_K, Q::Q5_K, Q::Q5_K, false, false},
    {"Q4_K_S", 14, Q::Q4_K, Bump::first_four, Q::Q5_K, Q::Q4_K, Bump::first_eighth_not_falcon, Q::Q5_K, Q::Q4_K,
     Q::Q4_K, true, false},
    {"Q4_K_M", 15, Q::Q4_K, Bump::more_bits, Q::Q6_K, Q::Q4_K, Bump::more_bits, Q::Q6_K, Q::Q4_K, Q::Q4_K, true, false},
    {"Q5_K_S", 16, Q::Q5_K, Bump::never, Q::Q5_K, Q::Q5_K, Bump::never, Q::Q5_K, Q::Q5_K, Q::Q5_K, false, false},
    {"Q5_K_M", 17, Q::Q5_K, Bump::more_bits, Q::Q6_K, Q::Q5_K, Bump::more_bits, Q::Q6_K, Q::Q5_K, Q::Q5_K, false,
     false},
    {"IQ4_NL", 25, Q::IQ4_NL, Bump::gqa_four, Q::Q5_K, Q::IQ4_NL, Bump::first_eighth_no_importance, Q::Q5_K,
     Q::IQ4_NL, Q::IQ4_NL, true, false},
    {"IQ4_XS", 30, Q::IQ4_XS, Bump::gqa_four, Q::Q5_K, Q::IQ4_XS, Bump::first_eighth_no_importance, Q::Q5_K,
     Q::IQ4_XS, Q::IQ4_XS, true, false},
};

// llama-quantize's single types, read by the same rules: only the head, the embeddings, an 8-expert model's
// attn_k / attn_v and (with an imatrix) Q4_0 / Q5_0's first ffn_down layers leave the main type. Q2_K ... Q5_K are
// not here: their names are mixtures, and --pure (the only way to a single K-quant) reads no rules.
constexpr FileMixture kSingles[] = {
    {"Q4_0", 2, Q::Q4_0, Bump::never, Q::Q4_0, Q::Q4_0, Bump::first_eighth_importance, Q::Q4_1, Q::Q4_0, Q::Q4_0, false,
     false},
    {"Q4_1", 3, Q::Q4_1, Bump::never, Q::Q4_1, Q::Q4_1, Bump::never, Q::Q4_1, Q::Q4_1, Q::Q4_1, false, false},
    {"Q5_0", 8, Q::Q5_0, Bump::never, Q::Q5_0, Q::Q5_0, Bump::first_eighth_importance, Q::Q5_1, Q::Q5_0, Q::Q5_0, false,
     false},
    {"Q5_1", 9, Q::Q5_1, Bump::never, Q::Q5_1, Q::Q5_1, Bump::never, Q::Q5_1, Q::Q5_1, Q::Q5_1, false, false},
    {"Q8_0", 7, Q::Q8_0, Bump::never, Q::Q8_0, Q::Q8_0, Bump::never, Q::Q8_0, Q::Q8_0, Q::Q8_0, false, false},
    {"Q6_K", 18, Q::Q6_K, Bump::never, Q::Q6_K, Q::Q6_K, Bump::never, Q::Q6_K, Q::Q6_K, Q::Q6_K, false, false},
};

// The rules `p` reads: its mixture's, or its single type's; nullptr for the float types and the single K-quants.
const FileMixture* rules_of(const TensorPolicy& p) {
  if (p.mixture) return p.mixture;
  for (const FileMixture& f : kSingles)
    if (f.main == p.type) return &f;
  return nullptr;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return s;
}

// llama.cpp's broad tensor kinds, found by substring in the GGUF name as it finds them.
enum class Kind : uint8_t { output, token_embd, attn_v, attn_k, attn_output, ffn_down, other };

Kind kind_of(const std::string& name) {
  if (name == "output.weight") return Kind::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Kind::token_embd;
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  // attn_qkv and attn_kv_b count as attn_v (they hold V); a fused QKV is checked before attn_v as llama.cpp does
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Kind::attn_v;
  if (has("attn_k.weight")) return Kind::attn_k;
  if (has("attn_q.weight")) return Kind::other;
  if (has("attn_output.weight")) return Kind::attn_output;
  if (has("ffn_up") || has("ffn_gate")) return Kind::other;  // checked before ffn_down, as llama.cpp does
  if (has("ffn_down")) return Kind::ffn_down;
  return Kind::other;
}

// The N of "blk.N." (as sscanf reads it), -1 otherwise.
int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's LLM_TYPE_70B, the one model size its rules name.
bool llama_70b(const MixtureModel& m) {
  if (m.arch == "llama") return m.experts != 8 && m.layers == 80 && m.heads != m.kv_heads;
  if (m.arch == "qwen2" || m.arch == "olmo" || m.arch == "deci") return m.layers == 80;
  return m.arch == "jais2" && m.layers == 68;
}

struct Counters {
  int64_t attn_v = 0, attn_v_total = 0, ffn_down = 0;
  bool tied = true;
};

// One tensor's type under mixture `f` (llama_tensor_get_type_impl for the file types above).
Q mixture_type(const TensorPolicy& p, const FileMixture& f, const MixtureModel& m, const MixtureTensor& t, Kind kind,
               Counters& c) {
  const bool falcon = m.arch == "falcon", moe8 = m.experts == 8;
  // The layer of a per-layer tensor: read from the name in a MoE (llama.cpp: experts are not in layer order),
  // counted otherwise.
  auto layer = [&](int64_t counter) -> int64_t {
    if (m.experts <= 1) return counter;
    const int i = layer_of(t.name);
    if (i < 0 || i >= m.layers)
      throw ArgumentError("quantize --type " + std::string(f.name) + ": tensor '" + t.name + "': expected blk.<layer "
                          "below " + std::to_string(m.layers) + ">. in its name (the mixture's rules read the layer)");
    return i;
  };
  if (kind == Kind::output || (kind == Kind::token_embd && c.tied)) {
    if (p.output_type) return *p.output_type;  // a tied embedding follows --output-tensor-type
    const int64_t cols = t.shape.empty() ? 0 : t.shape.back();
    const int64_t block = int64_t(quant_type_info(uint32_t(f.main))->block_elems);
    return falcon || cols % block != 0 || f.main == Q::Q8_0 ? Q::Q8_0 : Q::Q6_K;
  }
  if (kind == Kind::token_embd) return f.main;
  if (kind == Kind::attn_v) {
    const int64_t i = c.attn_v++;
    const bool gqa4 = m.kv_heads > 0 && m.heads / m.kv_heads >= 4;
    bool raise = false;
    switch (f.attn_v) {
      case Bump::always: raise = true; break;
      case Bump::gqa_four: raise = gqa4; break;
      case Bump::more_bits: raise = more_bits(i, c.attn_v_total); break;
      case Bump::first_two: raise = i < 2; break;
      case Bump::first_four: raise = i < 4; break;
      default: break;
    }
    Q type = raise ? f.attn_v_type : f.attn_v_else;
    // 8 query heads share each V: cheap to widen
    if (llama_70b(m) && (type == Q::Q3_K || type == Q::Q4_K)) type = Q::Q5_K;
    return moe8 ? Q::Q8_0 : type;
  }
  if (kind == Kind::attn_k) return moe8 ? Q::Q8_0 : f.main;
  if (kind == Kind::ffn_down) {
    const int64_t i = layer(c.ffn_down++), n = m.layers;
    if (falcon) {  // llama.cpp's own falcon rows
      if (f.file_type == 15) return i < n / 16 ? Q::Q6_K : more_bits(i, n) ? Q::Q5_K : Q::Q4_K;  // Q4_K_M
      if (f.file_type == 12) return i < n / 16 ? Q::Q5_K : more_bits(i, n) ? Q::Q4_K : Q::Q3_K;  // Q3_K_M
      if (f.file_type == 13) return Q::Q4_K;                                                    // Q3_K_L
    }
    bool raise = false;
    switch (f.ffn_down) {
      case Bump::always: raise = true; break;
      case Bump::more_bits: raise = more_bits(i, n); break;
      case Bump::first_sixteenth: raise = i < n / 16; break;
      case Bump::first_eighth: raise = i < n / 8; break;
      case Bump::first_eighth_not_falcon: raise = i < n / 8 && !falcon; break;
      case Bump::first_eighth_no_importance: raise = i < n / 8 && !m.importance; break;
      case Bump::first_eighth_importance: raise = i < n / 8 && m.importance; break;
      default: break;
    }
    return raise ? f.ffn_down_type : f.ffn_down_else;
  }
  if (kind == Kind::attn_output) {
    if (falcon) return f.file_type == 13 ? Q::Q4_K : f.main;  // Q3_K_L
    if (moe8) return f.moe8_attn_output ? Q::Q5_K : f.main;
    return f.attn_output;
  }
  return f.main;
}

std::map<std::string, QuantType> resolve_rules(const TensorPolicy& p, const FileMixture& f, const MixtureModel& m,
                                               const std::vector<MixtureTensor>& tensors) {
  std::map<std::string, QuantType> out;
  Counters c;
  std::vector<Kind> kinds(tensors.size());
  std::vector<int> layers(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    kinds[i] = kind_of(tensors[i].name);
    layers[i] = layer_of(tensors[i].name);
    c.attn_v_total += kinds[i] == Kind::attn_v;
    c.tied = c.tied && tensors[i].name != "output.weight";
  }
  // llama.cpp's order (its loader's map): by layer (-1 outside blocks), then by name
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return layers[a] != layers[b] ? layers[a] < layers[b] : tensors[a].name < tensors[b].name;
  });
  for (size_t i : order) {
    const MixtureTensor& t = tensors[i];
    if (!t.chosen || (!t.shape.empty() && t.shape.size() < 2) || overridden(p, t.name)) continue;
    out[t.name] = mixture_type(p, f, m, t, kinds[i], c);
  }
  return out;
}

// llama-quantize writes a Q2_K_S file only with an imatrix: few of its matrices are raised, and plain rounding to
// 2 bits leaves them "garbage" (its words); it checks the final types (after overrides, --pure and the row
// fallback), the head and embeddings excepted.
void refuse_without_importance(const TensorPolicy& p, const std::map<std::string, QuantType>& types,
                               const std::vector<MixtureTensor>& tensors) {
  TensorPolicy resolved = p;
  resolved.mixture_types = types;
  for (const MixtureTensor& t : tensors) {
    if (!t.chosen || t.shape.size() < 2 || t.name == "output.weight" || t.name == "token_embd.weight" ||
        t.name == "per_layer_token_embd.weight")
      continue;
    if (choose_tensor_type(resolved, t.name, t.shape, QuantType::F32) == QuantType::Q2_K)
      throw ArgumentError("quantize --type " + std::string(p.mixture->name) + ": tensor '" + t.name + "' would be "
                          "Q2_K, which llama-quantize's " + std::string(p.mixture->name) + " writes only with an "
                          "importance matrix (2-bit rounding without one is too coarse): pass --calibration FILE, "
                          "or choose --type Q2_K (llama-quantize's Q2_K mixture, Q2_K_M here too)");
  }
}

}  // namespace

const FileMixture* find_file_mixture(const std::string& name) {
  std::string u = upper(name);
  // llama-quantize's names for mixtures (tools/quantize/quantize.cpp's QUANT_OPTIONS): Q3_K / Q4_K / Q5_K are its
  // aliases of the _M mixtures, and its Q2_K is a mixture itself (attnzoo also calls it Q2_K_M).
  for (const auto& [alias, mixture] : {std::pair{"Q2_K", "Q2_K_M"}, {"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"},
                                       {"Q5_K", "Q5_K_M"}})
    if (u == alias) u = mixture;
  for (const FileMixture& f : kMixtures)
    if (u == f.name) return &f;
  return nullptr;
}

void set_file_type(TensorPolicy& p, const std::string& name, const std::string& what) {
  p.mixture = find_file_mixture(name);
  if (p.mixture) {
    p.type = p.mixture->main;
    return;
  }
  try {
    p.type = parse_quant_type(name, what);
  } catch (const ArgumentError& e) {
    std::string mixtures;
    for (const FileMixture& f : kMixtures) mixtures += (mixtures.empty() ? "" : ", ") + std::string(f.name);
    std::string msg = e.what();
    if (!msg.empty() && msg.back() == ')') msg.pop_back();
    throw ArgumentError(msg + "; or a mixture: " + mixtures + ")");
  }
}

MixtureModel mixture_model(const std::string& arch, const MetadataInt& get, bool importance) {
  MixtureModel m;
  m.arch = arch;
  m.layers = get(arch + ".block_count").value_or(0);
  m.experts = get(arch + ".expert_count").value_or(0);
  m.heads = get(arch + ".attention.head_count").value_or(0);
  m.kv_heads = get(arch + ".attention.head_count_kv").value_or(m.heads);
  m.importance = importance;
  return m;
}

std::map<std::string, QuantType> resolve_mixture(const TensorPolicy& p, const MixtureModel& m,
                                                 const std::vector<MixtureTensor>& tensors) {
  std::map<std::string, QuantType> out;
  const FileMixture* f = rules_of(p);
  if (!f) return out;
  if (!p.pure) out = resolve_rules(p, *f, m, tensors);
  if (p.mixture && p.mixture->needs_importance && !m.importance) refuse_without_importance(p, out, tensors);
  return out;
}

}  // namespace attnzoo
