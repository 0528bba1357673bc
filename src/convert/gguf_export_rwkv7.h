#pragma once
// flash-linear-attention's RWKV7ForCausalLM written as llama.cpp's rwkv7, the way convert_hf_to_gguf.py's
// Rwkv7Model writes it (the inverse of loader/gguf_rwkv7.h):
//   keys     context_length 2^20 (RWKV has no context limit), wkv.head_size, the four LoRA ranks (read off the
//            tensors, as the builder reads them), head_count 0, attention.layer_norm_epsilon
//   tensors  the six token-shift mixes x_r .. x_g stacked into time_mix_lerp_fused [6, 1, 1, C]; every tensor
//            squeezed (k_k, k_a, ffn.x_k to [C]) and r_k flattened; fla's LoRAs kept untransposed; layer 0's
//            a-LoRA also written as its stand-in value LoRA time_mix_v0 / v1 / v2 (llama.cpp wants one in every
//            layer); a tied lm_head left out
//   types    the fused mixes and every LoRA matrix stay F32, as llama-quantize leaves them (1-D tensors are F32
//            by the policy); refused: fuse_norm false (GGUF has no key for it: the file would be read with fla's
//            fused l2norm)
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// Every rwkv7.* hyperparameter. LoadError naming the key or tensor at fault.
void add_rwkv7_hparams(GgufWriter& w, const ModelFiles& files, const Config& c);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart or a token-shift mix missing.
std::vector<TensorPlan> plan_rwkv7(const ModelFiles& files, bool tied);

}  // namespace attnzoo
