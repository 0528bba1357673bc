#include "models/cuda/device_delta_scan.h"

#include "layers/cuda/row_copy_cuda.h"
#include "layers/linear_prefill_mode.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
void run_delta_scan(const DeviceStep& step, const DeviceConvStates& states, DeltaArgs a, DeltaEntry recurrent,
                    DeltaEntry chunk) {
  const Batch& batch = *step.batch;
  const StreamGuard on(step.stream);  // the entries launch on the current stream: a step graph's while capturing
  const int64_t S = batch.num_sequences(), HV = a.v.shape[2], K = a.k.shape[3], V = a.v.shape[3];
  a.use_qk_l2norm_in_kernel = true;
  a.check_values = false;  // as the CPU mixers: the layer's own projections and state, not a caller's input
  TensorView pool = step.view(states.state().data, DType::f32, {states.state().shape[0], HV, K, V});
  pool.strides[0] = states.state().strides[0];
  a.initial_state = a.final_state = pool;
  a.ssm_state_indices = states.slots();
  if (states.decode()) {
    // A padded batch of S one-token sequences (no offsets to upload).
    auto per_sequence = [&](TensorView t) {
      if (t.empty()) return t;
      t.shape[0] = S, t.shape[1] = 1;
      t.strides[0] = t.strides[1];
      return t;
    };
    a.q = per_sequence(a.q), a.k = per_sequence(a.k), a.v = per_sequence(a.v), a.g = per_sequence(a.g);
    a.beta = per_sequence(a.beta), a.o = per_sequence(a.o);
    recurrent(a);
    return;
  }
  a.cu_seqlens = batch.cu_seqlens.data();
  a.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
  // As the CPU mixers: single tokens (decode) and the forced recurrent mode take the recurrence.
  if (longest_sequence(batch) == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
    recurrent(a);
  else
    chunk(a);
}

TensorView run_conv_delta_scan(const DeviceStep& step, const DeviceConvStates& states, const TensorView& conv,
                               const TensorView& g, const TensorView& beta, const DeltaHeads& heads,
                               size_t first_slot, DeltaEntry recurrent, DeltaEntry chunk) {
  const int64_t T = step.num_tokens, H = heads.H, K = heads.K, HV = heads.HV, V = heads.V;
  auto rows = [&](size_t i, int64_t cols) { return workspace_f32(step, first_slot + i, T, cols); };
  const TensorView q = rows(0, H * K), k = rows(1, H * K), v = rows(2, HV * V), o = rows(3, HV * V);
  copy_rows_cuda({column_slice(conv, 0, H * K), q, nullptr, nullptr, T}, step.stream);
  copy_rows_cuda({column_slice(conv, H * K, H * K), k, nullptr, nullptr, T}, step.stream);
  copy_rows_cuda({column_slice(conv, 2 * H * K, HV * V), v, nullptr, nullptr, T}, step.stream);

  DeltaArgs a;
  a.q = step.view(q.data, DType::f32, {1, T, H, K});
  a.k = step.view(k.data, DType::f32, {1, T, H, K});
  a.v = step.view(v.data, DType::f32, {1, T, HV, V});
  a.g = heads.channel_gate ? step.view(g.data, DType::f32, {1, T, HV, K}) : step.view(g.data, DType::f32, {1, T, HV});
  a.beta = step.view(beta.data, DType::f32, {1, T, HV});
  a.o = step.view(o.data, DType::f32, {1, T, HV, V});
  run_delta_scan(step, states, a, recurrent, chunk);
  return o;
}
#endif

}  // namespace attnzoo
