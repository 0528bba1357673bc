#pragma once
// MambaForCausalLM / FalconMambaForCausalLM (mamba) and Mamba2ForCausalLM (mamba2) written the way llama.cpp's
// convert_hf_to_gguf.py (MambaModel, Mamba2Model) writes them, the inverse of what loader/gguf_hybrids.h undoes:
//   both     context_length 2^20, feed_forward_length and head_count 0, the ssm.* sizes; A_log as A = -exp(A_log),
//            conv kernels squeezed to [channels, kernel]; A, D and the conv kernels in F32; a tied lm_head left out
//   mamba    ssm.dt_b_c_rms true for FalconMamba (llama.cpp normalizes dt, B and C with the layer epsilon, as
//            the converter does whatever mixer_rms_eps says)
//   mamba2   ssm.group_count, ssm.time_step_rank the head count; dt_bias as ssm_dt.bias, A and D as [heads, 1],
//            the gated norm as [groups, inner / groups] (F32)
#include <optional>
#include <string>
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// general.architecture for a Hugging Face class of these families ("mamba", "mamba2"), else nullopt.
std::optional<std::string> ssm_arch_for_hf(const std::string& hf_class);

// Every <arch>.* hyperparameter of the file. LoadError naming a key whose sizes disagree.
void add_ssm_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart or a shape the config contradicts.
std::vector<TensorPlan> plan_ssm(const ModelFiles& files, const Config& c, const std::string& arch, bool tied);

}  // namespace attnzoo
