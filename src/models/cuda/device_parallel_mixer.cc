#include "models/cuda/device_parallel_mixer.h"

#include <vector>

#include "layers/cuda/elementwise_cuda.h"
#include "models/cuda/device_attention.h"
#include "models/cuda/device_mamba2.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Past the recurrent mixers' slots (device_kda.cc, the last, ends at 29): a branch runs while these hold its input and
// output.
enum Slot : size_t { kScaledInput = 30, kBranchOutput };
static_assert(kBranchOutput < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceParallelMixer final : public DeviceMixer {
 public:
  DeviceParallelMixer(const ParallelMixer& m, const DeviceLoad& load) {
    for (const ParallelBranch& b : m.branches()) branches_.push_back(make_branch(b, load));
  }

  void prepare(const DeviceStep& step, int64_t layer) const override {
    for (const Branch& b : branches_) b.mixer->prepare(step, layer);
  }

  bool replayable() const override {
    for (const Branch& b : branches_)
      if (!b.mixer->replayable()) return false;
    return true;
  }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = h.shape[0], H = h.shape[1];
    const Stream s = step.stream;
    for (const Branch& b : branches_) {
      TensorView in = h;
      if (b.in_scale != 1.f) {
        in = step.view(step.workspace->get(kScaledInput, size_t(T * H) * dtype_size(h.dtype)), h.dtype, {T, H});
        scale_softcap_cuda(h, in, b.in_scale, 0.f, s);
      }
      if (b.out_scale == 1.f) {
        b.mixer->forward(step, layer, in, x);
        continue;
      }
      const size_t bytes = size_t(T * H) * sizeof(float);
      void* y = step.workspace->get(kBranchOutput, bytes);
      zero_bytes(y, x.device, bytes, s);
      const TensorView out = step.view(y, DType::f32, {T, H});
      b.mixer->forward(step, layer, in, out);
      add_scaled_cuda(x, out, b.out_scale, x, s);
    }
  }

 private:
  struct Branch {
    std::unique_ptr<DeviceMixer> mixer;
    float in_scale, out_scale;  // what its projections could not fold, applied at run time
  };

  // Falcon-H1's branches fold their multipliers into their projections at load (device_weight_fold.h): the input
  // one into every projection reading the rows, the output one into the projection adding into the stream. A side
  // whose weights stay GGUF blocks keeps its multiplier at run time, as does every other kind of branch.
  static Branch make_branch(const ParallelBranch& b, const DeviceLoad& load) {
    auto all_foldable = [](std::initializer_list<const Linear*> ls) {
      for (const Linear* l : ls)
        if (!foldable(l->matrix().type)) return false;
      return true;
    };
    bool fold_in = false, fold_out = false;
    std::unique_ptr<DeviceMixer> mixer;
    if (const auto* attn = dynamic_cast<const AttentionLayer*>(b.mixer.get())) {
      fold_in = all_foldable({&attn->q_proj(), &attn->k_proj(), &attn->v_proj()});
      fold_out = all_foldable({&attn->o_proj()});
      mixer = make_device_attention(*attn, load, {fold_in ? b.in_scale : 1.f, fold_out ? b.out_scale : 1.f});
    } else if (const auto* mamba2 = dynamic_cast<const Mamba2Mixer*>(b.mixer.get())) {
      fold_in = all_foldable({&mamba2->in_proj()});
      fold_out = all_foldable({&mamba2->out_proj()});
      mixer = make_device_mamba2(*mamba2, load, {fold_in ? b.in_scale : 1.f, fold_out ? b.out_scale : 1.f});
    } else {
      mixer = make_device_mixer(*b.mixer, load);
    }
    return {std::move(mixer), fold_in ? 1.f : b.in_scale, fold_out ? 1.f : b.out_scale};
  }
  std::vector<Branch> branches_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_parallel_mixer(const ParallelMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceParallelMixer>(mixer, load);
}
#endif

}  // namespace attnzoo
