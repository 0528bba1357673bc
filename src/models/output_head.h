#pragma once
// The output head every decoder builder ends with: tied to the embedding or the checkpoint's own lm_head.
#include <cstdint>
#include <string>

#include "layers/embedding.h"
#include "layers/linear.h"
#include "loader/model_dir.h"

namespace attnzoo {

// `tied`: a Linear over the embedding table `embed_name` (borrowed when `store` is its dtype; a converted copy's
// bytes are added to *owned, since they are memory the model holds on top of the mapping); else lm_head.weight
// (and lm_head.bias if present) [vocab, hidden], the table's own shape, held as `store`.
Linear load_output_head(const ModelFiles& files, const Embedding& embed, const std::string& embed_name, bool tied,
                        DType store, uint64_t* owned);

}  // namespace attnzoo
