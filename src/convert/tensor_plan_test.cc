// Which Hugging Face tensors the expert stacker takes as one expert's projection (the rest go through each writer's
// name table, which names a tensor it does not know).
#include "convert/tensor_plan.h"

#include <gtest/gtest.h>

namespace attnzoo {
namespace {

TEST(TensorPlan, ExpertTensorLayerReadsOnlyWholeExpertNames) {
  const ExpertTensors mixtral{"block_sparse_moe", {{"w1", "ffn_gate_exps"}, {"w2", "ffn_down_exps"}}};
  EXPECT_EQ(expert_tensor_layer("model.layers.12.block_sparse_moe.experts.7.w1.weight", mixtral), 12);
  EXPECT_EQ(expert_tensor_layer("model.layers.0.block_sparse_moe.experts.0.w2.weight", mixtral), 0);
  for (const char* other : {"model.layers.0.block_sparse_moe.experts.0.w3.weight",  // not a projection of its
                            "model.layers.0.block_sparse_moe.experts.x.w1.weight",  // expert not a number
                            "model.layers.x.block_sparse_moe.experts.0.w1.weight",  // layer not a number
                            "model.layers.0.block_sparse_moe.experts.0.w1.bias",
                            "model.layers.0.block_sparse_moe.gate.weight",
                            "model.layers.0.mlp.experts.0.w1.weight",  // another block
                            "model.layers.0.block_sparse_moe.experts.0.weight",
                            "model.layers.0.block_sparse_moe.experts..w1.weight",
                            "backbone.layers.0.block_sparse_moe.experts.0.w1.weight", "model.layers.0"})
    EXPECT_FALSE(expert_tensor_layer(other, mixtral)) << other;
  const ExpertTensors nemotron{"mixer", {{"up_proj", "ffn_up_exps"}}, "backbone.layers."};
  EXPECT_EQ(expert_tensor_layer("backbone.layers.3.mixer.experts.1.up_proj.weight", nemotron), 3);
  EXPECT_FALSE(expert_tensor_layer("backbone.layers.3.mixer.shared_experts.up_proj.weight", nemotron));
}

}  // namespace
}  // namespace attnzoo
