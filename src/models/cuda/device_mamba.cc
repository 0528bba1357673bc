#include "models/cuda/device_mamba.h"

#include <vector>

#include "kernels/linear/mamba/mamba.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/row_copy_cuda.h"
#include "layers/cuda/transpose_cuda.h"
#include "models/cuda/device_conv_state.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots past the attention's and the MLPs' (device_attention.cc, device_mlp.cc). A decode step uses
// kB / kC / kZ for token-major rows, any other step for the channel-major [N, T] / [inner, T] blocks; kX holds the
// conv's input, then (the conv done) the scan's channel-major u.
enum Slot : size_t { kProj = 16, kX, kConv, kXdbl, kDtLow, kDt, kY, kB, kC, kZ, kDelta, kOut };
static_assert(kOut < kDecodePlanSlots, "the step's decode plans own the slots from kDecodePlanSlots on");

class DeviceMamba final : public DeviceMixer {
 public:
  DeviceMamba(const MambaMixer& m, const DeviceLoad& load)
      : c_(m.config()),
        in_(m.weights().in_proj, load),
        x_proj_(m.weights().x_proj, load),
        dt_proj_(m.weights().dt_proj, load),
        out_(m.weights().out_proj, load),
        conv_(m.conv_weight(), m.weights().conv_bias, c_.conv_kernel, ConvActivation::silu, load) {
    A_ = upload_f32(m.A(), load);
    D_ = upload_f32(m.D(), load);
    dt_bias_ = upload_f32(m.dt_bias(), load);
    if (c_.bcdt_rms_norm) {
      dt_norm_ = upload_f32(m.dt_norm(), load);
      b_norm_ = upload_f32(m.b_norm(), load);
      c_norm_ = upload_f32(m.c_norm(), load);
    }
  }

  // A decode step runs in place in the pool's slots with nothing uploaded of its own (device_conv_state.h).
  bool replayable() const override { return true; }

  void forward(const DeviceStep& step, int64_t layer, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens;
    const int64_t E = c_.inner, N = c_.state_size, R = c_.dt_rank, XP = c_.x_proj_dim(), W1 = c_.conv_state_len();
    const Stream s = step.stream;
    auto scratch = [&](Slot slot, int64_t rows, int64_t cols) { return workspace_f32(step, slot, rows, cols); };

    // in_proj to [x | z]; x into a block of its own for the conv, z stays in the projection's rows.
    const TensorView proj = scratch(kProj, T, 2 * E);
    in_.apply(h, proj, {}, s);
    const TensorView xin = scratch(kX, T, E);
    copy_rows_cuda({column_slice(proj, 0, E), xin, nullptr, nullptr, T}, s);
    const TensorView z = column_slice(proj, E, E);

    const DeviceConvStates states(step, layer, E * W1, E * N);

    // The causal conv (SiLU) over the packed batch, each sequence from its tail, the tails advanced in place.
    const TensorView conv = scratch(kConv, T, E);
    conv_.apply(step, states, xin, conv);

    // [dt_low | B | C] per token, each of the three RMS-normalised in place for Falcon-Mamba and Jamba.
    const TensorView xdbl = scratch(kXdbl, T, XP);
    x_proj_.apply(conv, xdbl, {}, s);
    if (c_.bcdt_rms_norm) {
      RmsNormCudaOptions opts;
      opts.eps = c_.mixer_rms_eps;
      auto norm = [&](int64_t from, int64_t cols, const DeviceBuffer& w) {
        const TensorView part = column_slice(xdbl, from, cols);
        rms_norm_cuda(part, step.view(w.data(), DType::f32, {cols}), part, opts, s);
      };
      norm(0, R, dt_norm_);
      norm(R, N, b_norm_);
      norm(R + N, N, c_norm_);
    }
    const TensorView dt_low = scratch(kDtLow, T, R), dt = scratch(kDt, T, E);
    copy_rows_cuda({column_slice(xdbl, 0, R), dt_low, nullptr, nullptr, T}, s);
    dt_proj_.apply(dt_low, dt, {}, s);  // dt_bias and softplus are the scan's

    const TensorView y = scratch(kY, T, E);
    if (states.decode())
      decode(step, states, conv, dt, column_slice(xdbl, R, N), column_slice(xdbl, R + N, N), z, y);
    else
      scan(step, states, conv, dt, column_slice(xdbl, R, N), column_slice(xdbl, R + N, N), z, y);
    out_.apply_add(y, x, s);
  }

 private:
  // Every sequence one token: the decode step on token-major rows ([S, inner] and [S, N], contiguous copies of
  // the strided slices), each sequence's state updated in place in its pool slot.
  void decode(const DeviceStep& step, const DeviceConvStates& states, const TensorView& u, const TensorView& dt,
              const TensorView& Bs, const TensorView& Cs, const TensorView& zs, const TensorView& y) const {
    const StreamGuard on(step.stream);  // the entry launches on the current stream: a step graph's while capturing
    const TensorView& state = states.state();
    const int64_t S = step.num_tokens, E = c_.inner, N = c_.state_size;
    const TensorView Bm = workspace_f32(step, kB, S, N), Cm = workspace_f32(step, kC, S, N),
                     z = workspace_f32(step, kZ, S, E);
    copy_rows_cuda({Bs, Bm, nullptr, nullptr, S}, step.stream);
    copy_rows_cuda({Cs, Cm, nullptr, nullptr, S}, step.stream);
    copy_rows_cuda({zs, z, nullptr, nullptr, S}, step.stream);
    SelectiveStateUpdateArgs a;
    a.state = step.view(state.data, DType::f32, {state.shape[0], E, N});
    a.state.strides[0] = state.strides[0];
    a.state_batch_indices = states.slots();
    a.x = u, a.dt = dt, a.z = z, a.y = y;
    a.A = step.view(A_.data(), DType::f32, {E, N});
    a.D = step.view(D_.data(), DType::f32, {E});
    a.dt_bias = step.view(dt_bias_.data(), DType::f32, {E});
    a.B = Bm, a.C = Cm;
    a.dt_softplus = true;
    selective_state_update(a);
  }

  // Any other batch: one packed selective scan over the channel-major transposes, every sequence from its pool
  // slot (those continuing from a cached state with several tokens included) and back into it, its output
  // transposed back into y.
  void scan(const DeviceStep& step, const DeviceConvStates& states, const TensorView& u, const TensorView& dt,
            const TensorView& Bs, const TensorView& Cs, const TensorView& zs, const TensorView& y) const {
    const Batch& batch = *step.batch;
    const int64_t T = step.num_tokens, E = c_.inner, N = c_.state_size;
    const Stream s = step.stream;
    auto channels = [&](Slot slot, const TensorView& rows) {
      const TensorView t = workspace_f32(step, slot, rows.shape[1], T);
      transpose_cuda({rows, t}, s);
      return step.view(t.data, DType::f32, {1, rows.shape[1], T});
    };
    SelectiveScanArgs a;
    a.u = channels(kX, u);  // the conv's input is spent: its slot takes u
    a.delta = channels(kDelta, dt);
    a.B = channels(kB, Bs);
    a.C = channels(kC, Cs);
    a.z = channels(kZ, zs);
    a.A = step.view(A_.data(), DType::f32, {E, N});
    a.D = step.view(D_.data(), DType::f32, {E});
    a.delta_bias = step.view(dt_bias_.data(), DType::f32, {E});
    a.delta_softplus = true;
    a.cu_seqlens = batch.cu_seqlens.data();
    a.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
    const TensorView& state = states.state();
    a.initial_state = a.final_state = step.view(state.data, DType::f32, {state.shape[0], E, N});
    a.initial_state.strides[0] = a.final_state.strides[0] = state.strides[0];
    a.state_batch_indices = states.slots();
    const TensorView out = workspace_f32(step, kOut, E, T);
    a.out = step.view(out.data, DType::f32, {1, E, T});
    selective_scan(a);
    transpose_cuda({out, y}, s);
  }

  MambaMixerConfig c_;
  DeviceLinear in_, x_proj_, dt_proj_, out_;
  DeviceCausalConv conv_;
  DeviceBuffer A_, D_, dt_bias_, dt_norm_, b_norm_, c_norm_;
};

}  // namespace

std::unique_ptr<DeviceMixer> make_device_mamba(const MambaMixer& mixer, const DeviceLoad& load) {
  return std::make_unique<DeviceMamba>(mixer, load);
}
#endif

}  // namespace attnzoo
