#pragma once
// LFM2 (lfm2), LFM2-MoE (lfm2moe) and Jamba (jamba) written the way llama.cpp's convert_hf_to_gguf.py (LFM2Model,
// LFM2MoeModel, JambaModel) writes them, the inverse of what loader/gguf_hybrids.h undoes:
//   all      attention.head_count_kv one count per layer, 0 for a layer without attention (short-conv / Mamba);
//            each MoE layer's experts stacked into ffn_{gate,up,down}_exps; conv kernels squeezed to
//            [channels, kernel]; conv kernels, A and the routers in F32
//   lfm2*    shortconv.l_cache; LFM2's feed_forward_length the adjusted width its w1 holds; LFM2-MoE's
//            expert_bias as exp_probs_b.bias, leading_dense_block_count, expert_gating_func sigmoid (2)
//   jamba    ssm.* sizes, A_log as A = -exp(A_log), no RoPE keys (Jamba has no positions)
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// general.architecture for a Hugging Face class of these families ("lfm2", "lfm2moe", "jamba"), else nullopt.
std::optional<std::string> conv_hybrid_arch_for_hf(const std::string& hf_class);

// Every <arch>.* hyperparameter of the file (these architectures write their own attention keys too).
void add_conv_hybrid_hparams(GgufWriter& w, const ModelFiles& files, const Config& c, const std::string& arch);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart, or an expert missing.
std::vector<TensorPlan> plan_conv_hybrid(const ModelFiles& files, const Config& c, const std::string& arch, bool tied);

// "model.layers.N.rest" -> {"blk.N.", "rest"}; {"", ""} for a tensor outside the blocks.
std::pair<std::string, std::string> split_block_name(const std::string& name);

// The converter's state-space edits: A_log as A = -exp(A_log), a [channels, 1, kernel] conv kernel squeezed to
// [channels, kernel], both F32. False when `name` is neither (LoadError for a conv kernel of another shape).
bool plan_ssm_edit(const ModelFiles& files, const std::string& name, TensorPlan& p);

}  // namespace attnzoo
