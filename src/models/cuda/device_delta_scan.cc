#include "models/cuda/device_delta_scan.h"

#include "layers/linear_prefill_mode.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
void run_delta_scan(const DeviceStep& step, const DeviceConvStates& states, DeltaArgs a, DeltaEntry recurrent,
                    DeltaEntry chunk) {
  const Batch& batch = *step.batch;
  const int64_t S = batch.num_sequences(), HV = a.v.shape[2], K = a.k.shape[3], V = a.v.shape[3];
  a.initial_state = a.final_state = step.view(states.state().data, DType::f32, {S, HV, K, V});
  a.cu_seqlens = batch.cu_seqlens.data();
  a.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
  a.use_qk_l2norm_in_kernel = true;
  a.check_values = false;  // as the CPU mixers: the layer's own projections and state, not a caller's input
  // As the CPU mixers: single tokens (decode) and the forced recurrent mode take the recurrence.
  if (longest_sequence(batch) == 1 || linear_prefill_mode() == LinearPrefillMode::recurrent)
    recurrent(a);
  else
    chunk(a);
}
#endif

}  // namespace attnzoo
