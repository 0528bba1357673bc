// Recurrent (decode) KDA: the shared per-target recurrence in common/delta_recurrent-inl.h with per-channel
// decay, compiled for every SIMD target.
#include "kernels/linear/kda/kda.h"

#include "core/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/kda/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/delta_recurrent-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

void RecurrentKda(const DeltaProblem& p) { DeltaRecurrent<DeltaGate::channel>(p); }

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RecurrentKda);

void recurrent_kda(const DeltaArgs& args) {
  const DeltaProblem p = make_delta_problem(args, DeltaGate::channel);
  if (!p.device.is_cpu()) return recurrent_delta_on_device(p);
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  HWY_DYNAMIC_DISPATCH(RecurrentKda)(p);
}

}  // namespace attnzoo
#endif
