#pragma once
// The pre-norm decoder stack shared by Llama-like architectures:
//   x = embed(tokens); per block: x += attn(norm1(x)); x += mlp(norm2(x)); logits = lm_head(norm(x)).
// Builders fill the parts; this class runs them and owns the checkpoint mapping the weights borrow from.
#include <vector>

#include "layers/attention_layer.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/mlp.h"
#include "layers/norm.h"
#include "loader/model_dir.h"
#include "models/model.h"

namespace attnzoo {

struct DecoderBlock {
  RmsNorm input_norm;
  AttentionLayer attention;
  RmsNorm post_attention_norm;
  GatedMlp mlp;
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelFiles files, ModelInfo info, Embedding embed, std::vector<DecoderBlock> blocks, RmsNorm norm,
               Linear lm_head);

  const ModelInfo& info() const override { return info_; }
  const Config& config() const override { return files_.config(); }
  std::unique_ptr<SequenceState> new_sequence() const override;

 protected:
  void run(const Batch& batch, bool last_only, float* logits) const override;

 private:
  ModelFiles files_;  // keeps the mapping alive: weights below are views into it
  ModelInfo info_;
  Embedding embed_;
  std::vector<DecoderBlock> blocks_;
  RmsNorm norm_;
  Linear lm_head_;
};

// Fetches a tensor and checks its shape; LoadError names the tensor and the file holding it.
TensorView weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape);
// As weight(), but an empty view when the checkpoint has no such tensor.
TensorView optional_weight(const ModelFiles& files, const std::string& name, std::initializer_list<int64_t> shape);

}  // namespace attnzoo
