#pragma once
// llama.cpp's rwkv7 GGUF seen as flash-linear-attention's RWKV7ForCausalLM checkpoint (the one models/rwkv7.cc
// reads), the edits of convert_hf_to_gguf.py's Rwkv7Model undone:
//   the six token-shift mixes x_r, x_w, x_k, x_v, x_a, x_g ([1, 1, C] each) are stacked into
//   time_mix_lerp_fused [6, 1, 1, C]: exposed again as six slices
//   fla's LoRAs (lora.0.weight, lora.2.weight, lora.2.bias) are stored untransposed as time_mix_{w,a,v,g}{1,2,0}
//   r_k [heads, head_dim] is flattened and ffn.x_k squeezed (reshaped back)
//   layer 0, which has no value LoRA in fla, gets a copy of its a-LoRA as time_mix_v{0,1,2}: dropped
#include <optional>
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"

namespace attnzoo {

// config.json text of an rwkv7 file. Throws LoadError naming the file and the key.
std::string gguf_rwkv7_config_json(const GgufFile& f);

// The file's tensors under fla's names (unsorted); LoadError naming the file and tensor for one with no
// counterpart.
std::vector<GgufHfTensor> gguf_rwkv7_tensors(const GgufFile& f);

// The other direction, names only (for the writer): the GGUF name of fla tensor `fla` ("blk.N.time_mix_w1.weight"
// for "model.layers.N.attn.w_lora.lora.0.weight"); nullopt for the six token-shift mixes (stacked) and any tensor
// without a counterpart. The edits listed above are the writer's to apply.
std::optional<std::string> gguf_rwkv7_tensor_name(const std::string& fla);

}  // namespace attnzoo
