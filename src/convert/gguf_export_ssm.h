#pragma once
// MambaForCausalLM / FalconMambaForCausalLM (mamba), Mamba2ForCausalLM (mamba2) and FalconH1ForCausalLM
// (falcon-h1) written the way llama.cpp's convert_hf_to_gguf.py (MambaModel, Mamba2Model, FalconH1Model) writes
// them, the inverse of what loader/gguf_hybrids.h undoes:
//   all      the ssm.* sizes; A_log as A = -exp(A_log), conv kernels squeezed to [channels, kernel]; A, D and the
//            conv kernels in F32; a tied lm_head left out
//   mamba*   context_length 2^20, feed_forward_length and head_count 0
//   mamba    ssm.dt_b_c_rms true for FalconMamba (llama.cpp normalizes dt, B and C with the layer epsilon; the
//            converter writes no mixer_rms_eps either)
//   mamba2   ssm.group_count, ssm.time_step_rank the head count; dt_bias as ssm_dt.bias, A and D as [heads, 1],
//            the gated norm as [groups, inner / groups] (F32)
//   falcon-h1  mamba2's tensor edits; pre_ff_layernorm as ffn_norm, with no extension (gguf-py maps the whole
//            name); the attention keys, vocab_size, rope.freq_base; the muP multipliers folded
//            into the weights (and biases) they follow, in f32 (the converter multiplies in the checkpoint's
//            dtype); refused: a gated norm normalizing before the gate, a tied head whose multiplier differs
//            from the embedding's
#include <optional>
#include <string>
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// general.architecture for a Hugging Face class of these families ("mamba", "mamba2", "falcon-h1"), else nullopt.
std::optional<std::string> ssm_arch_for_hf(const std::string& hf_class);

// Every <arch>.* hyperparameter of the file. LoadError naming a key whose sizes disagree.
void add_ssm_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart or a shape the config contradicts.
std::vector<TensorPlan> plan_ssm(const ModelFiles& files, const Config& c, const std::string& arch, bool tied);

}  // namespace attnzoo
