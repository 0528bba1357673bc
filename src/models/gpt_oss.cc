// GptOssForCausalLM: a Llama-shaped pre-norm decoder with
//   attention   q/k/v/o biases, one learned sink logit per head (joins the softmax denominator, then dropped),
//               sliding-window and full layers alternating by layer_types, YaRN RoPE (rope_theta 150000 when the
//               config leaves it out, as GptOssConfig's default)
//   feed-forward a GptOssMoe on every layer: biased router, softmax over the top-k logits, fused experts with
//               the clamped SwiGLU (swiglu_alpha, swiglu_limit)
// The experts load in three forms: dense fused tensors (f32 / bf16 / f16, re-laid out once); the MXFP4
// "_blocks" / "_scales" of the released checkpoints, repacked once into GGUF's MXFP4 blocks (kernels/quant/
// mxfp4_layout.h: the same values, nibbles moved) and computed on as MXFP4; or one projection per expert
// (experts.<e>.{gate,up,down}_proj, how a GGUF's stacked ffn_*_exps are exposed), borrowed as stored.
#include <algorithm>

#include "core/checked.h"
#include "core/threads.h"
#include "kernels/quant/mxfp4_layout.h"
#include "layers/gpt_oss_moe.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// Shared by the builder and describe_gpt_oss: the shape fields, validated.
ModelInfo read_info(const Config& root, const Config& c, const LoadOptions& options) {
  ModelInfo info = read_model_info(root, c, options, "", /*with_intermediate=*/true);
  if (info.hidden_size <= 0 || info.intermediate_size <= 0 || c.get_int("num_local_experts") <= 0 ||
      info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || info.head_dim <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_local_experts, num_*, head_dim, "
                    "vocab_size) must be positive");
  return info;
}

AttentionConfig attention_config(const ModelInfo& info, const Config& c, int64_t i, const LoadOptions& options) {
  return model_attention_config(info, layer_window(c, i, info.num_layers), options);
}

// transformers' MXFP4 experts `x`.{gate_up,down}_proj_{blocks,scales} (+ dense biases) as GGUF MXFP4 projections:
// each expert's gate rows (gate_up's even rows), up rows (odd rows) and down rows repacked into one owned buffer.
std::unique_ptr<GptOssMoe> mxfp4_experts(const ModelFiles& files, const std::string& x, const GptOssMoeConfig& mc,
                                         Linear router, int64_t E, int64_t H, int64_t I, DType store,
                                         const std::string& name) {
  for (const auto& [proj, cols] : {std::pair{"gate_up_proj", H}, {"down_proj", I}})
    if (cols % 32 != 0)
      throw LoadError(files.source(x + "." + proj + "_blocks") + ": tensor '" + x + "." + proj + "_blocks': " +
                      std::to_string(cols) + " input features are not a whole number of 32-value MXFP4 blocks");
  const int64_t gh = H / 32, gi = I / 32;
  const char* codes = "MXFP4 codes / E8M0 exponents";
  const TensorView gu_blocks = byte_weight(files, x + ".gate_up_proj_blocks", {E, 2 * I, gh, 16}, codes);
  const TensorView gu_scales = byte_weight(files, x + ".gate_up_proj_scales", {E, 2 * I, gh}, codes);
  const TensorView dn_blocks = byte_weight(files, x + ".down_proj_blocks", {E, H, gi, 16}, codes);
  const TensorView dn_scales = byte_weight(files, x + ".down_proj_scales", {E, H, gi}, codes);
  const TensorView gu_bias = weight(files, x + ".gate_up_proj_bias", {E, 2 * I});
  const TensorView dn_bias = weight(files, x + ".down_proj_bias", {E, H});

  const int64_t in_row = gh * 17, dn_row = gi * 17;  // GGUF MXFP4: 17 bytes per 32 values
  const int64_t per_expert = 2 * I * in_row + H * dn_row;
  auto owned = std::make_shared<std::vector<uint8_t>>(size_t(E * per_expert));
  uint8_t* base = owned->data();
  const auto* gub = static_cast<const uint8_t*>(gu_blocks.data);
  const auto* gus = static_cast<const uint8_t*>(gu_scales.data);
  const auto* dnb = static_cast<const uint8_t*>(dn_blocks.data);
  const auto* dns = static_cast<const uint8_t*>(dn_scales.data);
  ThreadPool::global().parallel_for(E, [&](int64_t e, int) {
    uint8_t* dst = base + e * per_expert;
    for (int64_t r = 0; r < 2 * I; ++r) {  // source row r: gate r / 2 when even, up r / 2 when odd
      const int64_t src = e * 2 * I + r, at = (r % 2) * I + r / 2;
      mxfp4_blocks_from_hf(gub + src * gh * 16, gus + src * gh, gh, dst + at * in_row);
    }
    mxfp4_blocks_from_hf(dnb + e * H * gi * 16, dns + e * H * gi, H * gi, dst + 2 * I * in_row);
  });
  std::vector<float> gb(static_cast<size_t>(I)), ub(static_cast<size_t>(I)), db(static_cast<size_t>(H));
  std::vector<GptOssExpert> experts;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t i = 0; i < I; ++i) {
      gb[size_t(i)] = load_as_f32(gu_bias.data, gu_bias.dtype, e * 2 * I + 2 * i);
      ub[size_t(i)] = load_as_f32(gu_bias.data, gu_bias.dtype, e * 2 * I + 2 * i + 1);
    }
    for (int64_t h = 0; h < H; ++h) db[size_t(h)] = load_as_f32(dn_bias.data, dn_bias.dtype, e * H + h);
    const uint8_t* p = base + e * per_expert;
    const std::string en = x + "." + std::to_string(e);
    auto proj = [&](const uint8_t* w, int64_t out, int64_t in, int64_t row, std::vector<float>& b, const char* n) {
      return Linear::from_quantized(w, uint64_t(out * row), QuantType::MXFP4, out, in,
                                    TensorView::contiguous(b.data(), DType::f32, {out}), en + n, store);
    };
    experts.push_back({proj(p, I, H, in_row, gb, ".gate_proj"), proj(p + I * in_row, I, H, in_row, ub, ".up_proj"),
                       proj(p + 2 * I * in_row, H, I, dn_row, db, ".down_proj")});
  }
  return std::make_unique<GptOssMoe>(mc, std::move(router), std::move(experts), std::move(owned), name);
}

}  // namespace

std::unique_ptr<Model> build_gpt_oss(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_info(files.config(), c, options);
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t E = c.get_int("num_local_experts");
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  RopeConfig rc = read_rope(c, D, rotary_share("gpt_oss"));
  const bool has_theta = c.has("rope_theta") || (c.has("rope_parameters") && c.sub("rope_parameters").has("rope_theta")) ||
                         (c.has("rope_scaling") && c.sub("rope_scaling").has("rope_theta"));
  if (!has_theta) rc.theta = 150000.0;
  const Rope rope(rc);
  GptOssMoeConfig mc;
  mc.top_k = c.get_int_or("num_experts_per_tok", 4);
  mc.alpha = float(c.get_float_or("swiglu_alpha", 1.702));
  mc.limit = float(c.get_float_or("swiglu_limit", 7.0));

  count_checkpoint(files, info);
  for (const std::string& t : files.names()) {  // MXFP4: two values per block byte, exponents are no parameters
    if (t.ends_with("_proj_blocks")) info.parameter_count += files.numel(t);
    if (t.ends_with("_proj_scales")) info.parameter_count -= files.numel(t);
  }

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };

  LlamaLayoutParts parts;
  parts.norm_eps = eps;
  parts.mixer = [&](int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    const AttentionConfig ac = attention_config(info, c, i, options);
    auto attn = std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
                                                 linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw),
                                                 std::nullopt, std::nullopt, rope, a);
    attn->set_sinks(weight(files, a + ".sinks", {info.num_heads}), a + ".sinks");
    return attn;
  };
  parts.ffn = [&](int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mlp";
    const std::string x = m + ".experts";
    std::unique_ptr<GptOssMoe> moe;
    if (files.has(x + ".gate_up_proj_blocks")) {
      moe = mxfp4_experts(files, x, mc, linear(m + ".router", E, H), E, H, I, options.weights, m);
    } else if (files.has(x + ".0.gate_proj.weight")) {
      std::vector<GptOssExpert> experts;
      auto projection = [&](const std::string& name, int64_t out, int64_t in) {
        (void)weight(files, name + ".bias", {out});  // every expert projection has one: a missing bias is an error
        return linear(name, out, in);
      };
      for (int64_t e = 0; e < E; ++e) {
        const std::string en = x + "." + std::to_string(e);
        experts.push_back({projection(en + ".gate_proj", I, H), projection(en + ".up_proj", I, H),
                           projection(en + ".down_proj", H, I)});
      }
      moe = std::make_unique<GptOssMoe>(mc, linear(m + ".router", E, H), std::move(experts), nullptr, m);
    } else {
      GptOssExpertTensors et;
      et.gate_up = weight(files, x + ".gate_up_proj", {E, H, 2 * I});
      et.gate_up_bias = weight(files, x + ".gate_up_proj_bias", {E, 2 * I});
      et.down = weight(files, x + ".down_proj", {E, I, H});
      et.down_bias = weight(files, x + ".down_proj_bias", {E, H});
      moe = std::make_unique<GptOssMoe>(mc, linear(m + ".router", E, H), et, options.weights, m);
    }
    owned.owned += moe->owned_weight_bytes();  // its experts repacked beside the mapping, which stays
    return moe;
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_gpt_oss(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_info(root, c, options);
  AttentionConfig full = attention_config(d.info, c, 0, options);
  full.window = 0;
  d.attention = full;
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  // As transformers' GptOss modules hold them (an MXFP4 checkpoint stores the same values as blocks): biased q / k /
  // v / o, a sink per head, two norms, the biased router, and per expert gate_up [H, 2I] and down [I, H] with biases.
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, E = c.get_int("num_local_experts");
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  Checked params = Checked(d.info.vocab_size) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(d.info, c, i, options);
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
    params += linear_params(qw, H, true) + 2 * linear_params(kw, H, true) + linear_params(H, qw, true) +
              Checked(d.info.num_heads) + Checked(2) * H + linear_params(E, H, true) +
              Checked(E) * (linear_params(2 * I, H, true) + linear_params(H, I, true));
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
