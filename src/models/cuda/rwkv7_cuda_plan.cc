#include "models/cuda/rwkv7_cuda_plan.h"

#include <string>

#include "core/error.h"
#include "kernels/quant/quant.h"

namespace attnzoo {
namespace {

[[noreturn]] void refuse(const Rwkv7Model& m, const std::string& feature, const std::string& where) {
  throw ArgumentError("device: " + feature + " (" + m.info().architecture + ", " + where +
                      ") runs on the CPU only so far");
}

void check_projection(const Rwkv7Model& m, const Linear& l) {
  const QuantType t = l.matrix().type;
  if (!quant_supported(t)) refuse(m, std::string("GGUF ") + quant_type_name(t) + " weights", l.name());
}

}  // namespace

void check_rwkv7_runs_on_cuda(const Rwkv7Model& model) {
  for (size_t i = 0; i < model.blocks().size(); ++i) {
    const Rwkv7Block& b = model.blocks()[i];
    const Rwkv7TimeMixConfig& c = b.time_mix.config();
    const std::string where = "layer " + std::to_string(i);
    if (c.head_dim > 256)
      refuse(model, "RWKV-7 head_dim " + std::to_string(c.head_dim) + " (the CUDA recurrence takes up to 256)", where);
    const Rwkv7TimeMixWeights& w = b.time_mix.weights();
    for (const Linear* l : {&w.r_proj, &w.k_proj, &w.v_proj, &w.o_proj, &w.w_lora.down, &w.w_lora.up, &w.a_lora.down,
                            &w.a_lora.up, &w.g_lora.down, &w.g_lora.up})
      check_projection(model, *l);
    if (w.v_lora) {
      check_projection(model, w.v_lora->down);
      check_projection(model, w.v_lora->up);
    }
    check_projection(model, b.channel_mix.weights().key);
    check_projection(model, b.channel_mix.weights().value);
  }
  check_projection(model, model.lm_head());
}

}  // namespace attnzoo
