#include "models/llama_layout.h"

#include "models/decoder.h"
#include "models/output_head.h"

namespace attnzoo {

std::unique_ptr<Model> assemble_llama_layout(ModelFiles&& files, const Config& c, ModelInfo&& info,
                                             const LlamaLayoutParts& parts, DType store, WeightBytes& owned) {
  const int64_t H = info.hidden_size;
  auto norm = [&](const std::string& name) {
    return RmsNorm(weight(files, name + ".weight", {H}), parts.norm_eps, parts.norm_add_one, name);
  };
  const std::string embed_name = "model.embed_tokens.weight";
  Embedding embed = load_embedding(files, embed_name, info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    DecoderBlock block;
    block.mixer = parts.mixer(i, p);
    info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    block.input_norm = norm(p + ".input_layernorm");
    block.pre_ffn_norm.emplace(norm(p + ".post_attention_layernorm"));
    block.ffn = parts.ffn(i, p);
    blocks.push_back(std::move(block));
  }
  RmsNorm final_norm = norm("model.norm");
  info.tied_embeddings = parts.may_tie && ties_embeddings(files, c, parts.tie_fallback);
  Linear lm_head = load_output_head(files, embed, embed_name, info.tied_embeddings, store, &owned);
  owned.record(info);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head));
}

}  // namespace attnzoo
