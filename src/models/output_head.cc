#include "models/output_head.h"

#include "models/decoder.h"

namespace attnzoo {

Linear load_output_head(const ModelFiles& files, Embedding& embed, const std::string& embed_name, bool tied,
                        DType store, WeightBytes* owned) {
  if (!tied) return load_linear(files, "lm_head", embed.vocab_size(), embed.dim(), store, owned);
  Linear head = Linear::from_matrix(embed.matrix(), {}, embed_name, store, owned->copied());
  owned->add(head);
  // A bf16 table held as bf16 is copied only to move its rows onto cache lines: the same bytes. Looked up in the
  // mapping beside it, the table was resident twice over the rows the ids touch (a bench model run of random ids
  // on Qwen3-0.6B: ~125 MiB of the mapping's pages beside the 297 MiB copy).
  if (head.owns_weight() && head.matrix().type == QuantType::BF16 && embed.matrix().type == QuantType::BF16)
    embed = Embedding(head.weight(), embed_name);
  return head;
}

}  // namespace attnzoo
