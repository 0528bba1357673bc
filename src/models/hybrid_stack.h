#pragma once
// The one builder behind the hybrids whose layers follow a per-layer pattern from their own config field:
//   Nemotron-H      hybrid_override_pattern "M-M*-" / layers_block_type: each layer a Mamba-2, attention, MLP or
//                   MoE sublayer alone
//   Granite 4.0-H   layer_types / Bamba attn_layer_indices: a Mamba-2 or attention mixer, then a feed-forward
//   Jamba           attention every attn_layer_period-th layer, the others Mamba-1; a MoE every
//                   expert_layer_period-th layer, the others a dense MLP
//   LFM2, LFM2-MoE  layer_types / full_attn_idxs: a short convolution or attention; a dense MLP, or (LFM2-MoE,
//                   from num_dense_layers on) a MoE
//   MiniMax-01      layer_types / attn_type_list: lightning or softmax attention, a MoE in every layer, "postnorm"
//                   residuals (x = alpha * h + beta * sublayer(h), h the sublayer's normed input)
// Every layer is
//   x += residual_scale * mixer(input_norm(x))   (when it has a mixer)
//   x += residual_scale * ffn(ffn_norm(x))       (when it has a feed-forward)
// The families supply the pattern, the tensor names around the layers and factories for each part (the mixers and
// feed-forwards of each kind are the family's own: a layer kind says what a layer is, not how its tensors read).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/checked.h"
#include "layers/attention_layer.h"
#include "layers/mamba2_mixer.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/decoder.h"
#include "models/model.h"

namespace attnzoo {

enum class HybridMixer : uint8_t { none, mamba2, attention, mamba, short_conv, lightning };
enum class HybridFfn : uint8_t { none, dense, moe };

struct HybridLayer {
  HybridMixer mixer = HybridMixer::none;
  HybridFfn ffn = HybridFfn::none;
};

// Nemotron-H's layers: "hybrid_override_pattern" (one character per layer: M Mamba-2, * attention, - MLP,
// E MoE) or transformers 5's "layers_block_type" list (mamba / linear_attention, attention / full_attention, mlp,
// moe). LoadError naming the key for an unknown entry or an empty pattern.
std::vector<HybridLayer> nemotron_h_layers(const Config& c);
// Granite 4.0-H's "layer_types" (mamba / linear_attention, attention / full_attention) or Bamba's
// "attn_layer_indices" (the other layers Mamba-2), num_hidden_layers long; every layer has the feed-forward `ffn`.
std::vector<HybridLayer> granite_hybrid_layers(const Config& c, int64_t num_layers, HybridFfn ffn);

// Jamba's: softmax attention where layer % attn_layer_period == attn_layer_offset (Mamba-1 elsewhere); a MoE where
// layer % expert_layer_period == expert_layer_offset when there is more than one of `experts` (transformers'
// JambaSparseMoeBlock), a dense MLP elsewhere. LoadError naming the keys for an offset outside its period.
std::vector<HybridLayer> jamba_layers(const Config& c, int64_t num_layers, int64_t experts);
// LFM2's "layer_types" (conv, full_attention) or the older "full_attn_idxs" (the layers not named there short
// convolutions; neither key: every layer attends); a MoE from layer `first_sparse` on (-1: dense everywhere).
std::vector<HybridLayer> lfm2_layers(const Config& c, int64_t num_layers, int64_t first_sparse);
// MiniMax-01's "layer_types" (linear_attention, full_attention) or the original "attn_type_list" (0 lightning,
// 1 softmax; neither: softmax on even layers, as transformers defaults); a MoE in every layer.
std::vector<HybridLayer> minimax_layers(const Config& c, int64_t num_layers);

// The Mamba-2 mixer config under a family's key names; mamba_d_head "auto" (Granite / Bamba) or absent means
// inner / heads. The gated norm gates first over n_groups groups (Nemotron-H, Granite, Bamba alike).
struct Mamba2Keys {
  const char *heads, *head_dim, *groups, *state, *conv, *expand, *act;
};
Mamba2MixerConfig read_hybrid_mamba2(const Config& c, int64_t hidden, float eps, const Mamba2Keys& keys);

// Softmax attention of q/k/v/o_proj under `prefix` (biases when the checkpoint has them).
std::unique_ptr<AttentionLayer> load_hybrid_attention(const ModelFiles& files, const AttentionConfig& ac,
                                                      const std::string& prefix, const Rope& rope, DType store,
                                                      WeightBytes* owned);

// The layer a feed-forward-only layer records: kind "mlp" or "moe", no cache.
LayerInfo ffn_only_layer_info(HybridFfn ffn);
// What each layer of `layers` (Mamba-2, attention or feed-forward only) records, for the describers (the built
// mixers report the same).
std::vector<LayerInfo> hybrid_layer_infos(const std::vector<HybridLayer>& layers, const AttentionConfig& ac,
                                          const Mamba2MixerConfig& mc);

// Parameters of a Mamba-2 mixer (in_proj, conv1d, dt_bias, A_log, D, the gated norm, out_proj) and of a q/k/v/o
// attention, as the describers estimate them.
Checked mamba2_parameter_count(const Mamba2MixerConfig& mc, bool proj_bias, bool conv_bias);
Checked attention_parameter_count(const AttentionConfig& ac, bool bias);

struct ResidualScales {
  float alpha = 1.f, beta = 1.f;
};

struct HybridStackParts {
  std::string embed = "model.embed_tokens.weight";
  std::string layer_prefix = "model.layers.";       // + layer index
  std::string input_norm = ".input_layernorm";      // after the layer prefix, before ".weight"
  std::string ffn_norm = ".post_attention_layernorm";
  std::string final_norm = "model.norm";
  float norm_eps = 1e-5f;
  bool tie_fallback = false;
  // false: the output head is tied only when the checkpoint has no lm_head.weight, whatever tie_word_embeddings
  // says (transformers' NemotronHForCausalLM ties nothing)
  bool tie_by_config = true;
  DecoderOptions options;
  // MiniMax's "postnorm" blocks (DecoderBlock::residual_is_normed): alpha / beta by the mixer's kind (absent: 1, 1)
  // and for the feed-forward
  bool residual_is_normed = false;
  std::map<HybridMixer, ResidualScales> mixer_residual;
  ResidualScales ffn_residual;
  // Called in layer order with the layer's prefix (layer_prefix + index).
  std::function<std::unique_ptr<SequenceMixer>(HybridMixer, int64_t layer, const std::string& prefix)> mixer;
  std::function<std::unique_ptr<FeedForward>(HybridFfn, int64_t layer, const std::string& prefix)> ffn;
};

// Loads the embedding, one block per entry of `layers`, the final norm and the output head (tied when the
// checkpoint has no lm_head.weight or the config says so); records info.layers, tied_embeddings and
// owned_weight_bytes (Linears held as `store`). info.num_layers must equal layers.size().
std::unique_ptr<Model> assemble_hybrid_stack(ModelFiles&& files, ModelInfo&& info, const std::vector<HybridLayer>& layers,
                                             const HybridStackParts& parts, DType store, WeightBytes& owned);

}  // namespace attnzoo
