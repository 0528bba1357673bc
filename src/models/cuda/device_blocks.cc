#include "models/cuda/device_blocks.h"

#include "core/error.h"
#include "models/cuda/device_attention.h"
#include "models/cuda/device_mla.h"
#include "models/cuda/device_gated_deltanet.h"
#include "models/cuda/device_kda.h"
#include "models/cuda/device_lightning.h"
#include "models/cuda/device_mamba.h"
#include "models/cuda/device_mamba2.h"
#include "models/cuda/device_parallel_mixer.h"
#include "models/cuda/device_short_conv.h"
#include "models/cuda/device_mlp.h"
#include "models/cuda/device_moe.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
// check_decoder_runs_on_cuda refused every other kind on the host, by name; reaching the throws is a bug.
std::unique_ptr<DeviceMixer> make_device_mixer(const SequenceMixer& mixer, const DeviceLoad& load) {
  if (const auto* attn = dynamic_cast<const AttentionLayer*>(&mixer)) return make_device_attention(*attn, load);
  if (const auto* mla = dynamic_cast<const MlaMixer*>(&mixer)) return make_device_mla(*mla, load);
  if (const auto* mamba2 = dynamic_cast<const Mamba2Mixer*>(&mixer)) return make_device_mamba2(*mamba2, load);
  if (const auto* mamba = dynamic_cast<const MambaMixer*>(&mixer)) return make_device_mamba(*mamba, load);
  if (const auto* gdn = dynamic_cast<const GatedDeltaNetMixer*>(&mixer)) return make_device_gated_deltanet(*gdn, load);
  if (const auto* conv = dynamic_cast<const ShortConvMixer*>(&mixer)) return make_device_short_conv(*conv, load);
  if (const auto* kda = dynamic_cast<const KdaMixer*>(&mixer)) return make_device_kda(*kda, load);
  if (const auto* la = dynamic_cast<const LightningAttentionMixer*>(&mixer)) return make_device_lightning(*la, load);
  if (const auto* par = dynamic_cast<const ParallelMixer*>(&mixer)) return make_device_parallel_mixer(*par, load);
  throw ArgumentError("device: a " + mixer.kind() + " mixer has no CUDA block");
}

std::unique_ptr<DeviceFfn> make_device_ffn(const FeedForward& ffn, const DeviceLoad& load) {
  if (const auto* mlp = dynamic_cast<const GatedMlp*>(&ffn)) return make_device_gated_mlp(*mlp, load);
  if (const auto* mlp = dynamic_cast<const ScaledGatedMlp*>(&ffn)) return make_device_scaled_gated_mlp(*mlp, load);
  if (const auto* mlp = dynamic_cast<const PlainMlp*>(&ffn)) return make_device_plain_mlp(*mlp, load);
  if (const auto* moe = dynamic_cast<const SparseMoe*>(&ffn)) return make_device_sparse_moe(*moe, load);
  if (const auto* moe = dynamic_cast<const DeepseekMoe*>(&ffn)) return make_device_deepseek_moe(*moe, load);
  if (const auto* moe = dynamic_cast<const NemotronHMoe*>(&ffn)) return make_device_deepseek_moe(*moe, load);
  if (const auto* moe = dynamic_cast<const GptOssMoe*>(&ffn)) return make_device_gpt_oss_moe(*moe, load);
  throw ArgumentError("device: this feed-forward has no CUDA block");
}
#endif

}  // namespace attnzoo
