#include "models/output_head.h"

#include "models/decoder.h"

namespace attnzoo {

Linear load_output_head(const ModelFiles& files, const Embedding& embed, const std::string& embed_name, bool tied,
                        DType store, uint64_t* owned) {
  if (!tied) return load_linear(files, "lm_head", embed.vocab_size(), embed.dim(), store, owned);
  Linear head = Linear::from_matrix(embed.matrix(), {}, embed_name, store);
  if (head.owns_weight()) *owned += head.weight_bytes();
  return head;
}

}  // namespace attnzoo
