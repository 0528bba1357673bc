#include "models/output_head.h"

#include "models/decoder.h"

namespace attnzoo {

Linear load_output_head(const ModelFiles& files, const Embedding& embed, const std::string& embed_name, bool tied,
                        DType store, uint64_t* owned) {
  const TensorView& table = embed.table();
  if (!tied) return load_linear(files, "lm_head", table.size(0), table.size(1), store, owned);
  Linear head = Linear::from_weights(table, {}, embed_name, store);
  if (head.owns_weight()) *owned += head.weight_bytes();
  return head;
}

}  // namespace attnzoo
