#pragma once
// The output head every decoder builder ends with: tied to the embedding or the checkpoint's own lm_head.
#include <cstdint>
#include <string>

#include "layers/embedding.h"
#include "layers/linear.h"
#include "loader/model_dir.h"
#include "models/weight_bytes.h"

namespace attnzoo {

// `tied`: a Linear over the embedding table `embed_name` (borrowed when `store` is its dtype; a converted copy's
// bytes are added to *owned, since they are memory the model holds on top of the mapping); else lm_head.weight
// (and lm_head.bias if present) [vocab, hidden], the table's own shape, held as `store`. Where the tied head holds
// the table's own bf16 bytes moved onto cache lines (layers/linear.h), `embed` is pointed at that copy, so the
// table is resident once: the model keeps the head as long as the embedding.
Linear load_output_head(const ModelFiles& files, Embedding& embed, const std::string& embed_name, bool tied,
                        DType store, WeightBytes* owned);

}  // namespace attnzoo
