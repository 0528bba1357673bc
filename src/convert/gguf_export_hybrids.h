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

// For `name` = `stem`E.`proj`.weight (proj one of `projs`' Hugging Face names, mapped to GGUF base names): at
// E == 0 the plan of the stack of all `experts` (blk + base + "_exps.weight"); `skip` for the other experts,
// already in that stack; `none` when `name` is not such a tensor. LoadError naming an expert that is missing.
enum class ExpertStack { none, planned, skip };
struct ExpertProj {
  const char* hf;    // "w1", "gate_proj"
  const char* gguf;  // "ffn_gate"
};
ExpertStack plan_expert_stack(const ModelFiles& files, const std::string& name, const std::string& stem,
                              const std::string& blk, const std::vector<ExpertProj>& projs, int64_t experts,
                              TensorPlan& plan);

}  // namespace attnzoo
