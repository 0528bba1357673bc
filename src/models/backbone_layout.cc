#include "models/backbone_layout.h"

#include "models/decoder.h"
#include "models/output_head.h"

namespace attnzoo {

std::unique_ptr<Model> assemble_backbone_layout(ModelFiles&& files, ModelInfo&& info, const BackboneLayoutParts& parts,
                                                DType store, WeightBytes& owned) {
  const int64_t H = info.hidden_size;
  auto norm = [&](const std::string& name) {
    return RmsNorm(weight(files, name + ".weight", {H}), parts.norm_eps, /*add_one=*/false, name);
  };
  // Older conversions name the table backbone.embedding (transformers renames it on load).
  const std::string embed_name =
      files.has("backbone.embeddings.weight") ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  Embedding embed = load_embedding(files, embed_name, info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "backbone.layers." + std::to_string(i);
    std::unique_ptr<SequenceMixer> mixer = parts.mixer(p + ".mixer");
    info.layers.push_back({mixer->kind(), 0, mixer->cache_spec()});  // recurrent: no window
    DecoderBlock block;
    block.input_norm = norm(p + ".norm");
    block.mixer = std::move(mixer);
    blocks.push_back(std::move(block));
  }
  RmsNorm final_norm = norm("backbone.norm_f");
  info.tied_embeddings = ties_embeddings(files, files.config(), parts.tie_fallback);
  Linear lm_head = load_output_head(files, embed, embed_name, info.tied_embeddings, store, &owned);
  owned.record(info);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head));
}

}  // namespace attnzoo
