#include "kernels/linear/mamba2/cuda/mamba2_launch_checks.h"

#include <iterator>
#include <utility>

#include "kernels/linear/common/cuda/launch_checks.h"

namespace attnzoo::cuda_mamba2 {

using cuda_linear::require_aligned;

void require_mamba2_aligned(const Mamba2Problem& p) {
  const std::pair<const void*, DType> inputs[] = {
      {p.x, p.x_dtype}, {p.Bm, p.b_dtype}, {p.Cm, p.c_dtype}, {p.z, p.z_dtype}, {p.y, p.y_dtype}};
  const char* names[] = {"x", "B", "C", "z", "y"};
  for (size_t i = 0; i < std::size(inputs); ++i)
    if (inputs[i].first) require_aligned(inputs[i].first, dtype_size(inputs[i].second), names[i]);
  for (auto [t, name] : {std::pair{&p.dt_in, "dt"}, {&p.A_in, "A"}, {&p.D_in, "D"}, {&p.dt_bias_in, "dt_bias"}})
    if (!t->empty()) require_aligned(t->data, dtype_size(t->dtype), name);
  if (p.h0) require_aligned(p.h0, sizeof(float), "initial_state");
  if (p.ht) require_aligned(p.ht, sizeof(float), "final_state");
}

}  // namespace attnzoo::cuda_mamba2
