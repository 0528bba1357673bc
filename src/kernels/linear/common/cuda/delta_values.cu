// The value scans make_delta_problem leaves to the device: the delta family's tensors, in the host scan's order,
// handed to the shared device scan (value_scan.cu).
#include <utility>
#include <vector>

#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/value_scan.h"

namespace attnzoo {

void check_delta_values_cuda(const DeltaProblem& p, Stream stream) {
  std::vector<DeviceValueScan> scans;
  for (auto [t, name] : {std::pair{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.g, "g"}, {&p.beta, "beta"}})
    if (!t->empty()) scans.push_back({t->data, t->dtype, t->numel(), t == &p.g, name});
  if (p.initial_state)
    scans.push_back({p.initial_state, DType::f32, p.seqs.count() * p.HV * p.K * p.V, false, "initial_state"});
  require_finite_on_device(scans, stream);
}

}  // namespace attnzoo
