#include "models/cuda/device_delta_scan.h"

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
#endif

}  // namespace attnzoo
