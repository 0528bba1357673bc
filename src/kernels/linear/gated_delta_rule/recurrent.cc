// Recurrent (decode) gated delta rule and plain delta rule: common/delta_recurrent-inl.h per SIMD target.
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"

#include "core/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/gated_delta_rule/recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/delta_recurrent-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

void RecurrentGatedDeltaRule(const DeltaProblem& p) {
  if (p.gate == DeltaGate::none)
    DeltaRecurrent<DeltaGate::none>(p);
  else
    DeltaRecurrent<DeltaGate::head>(p);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RecurrentGatedDeltaRule);

void recurrent_gated_delta_rule(const DeltaArgs& args) {
  const DeltaProblem p = make_delta_problem(args, args.g.empty() ? DeltaGate::none : DeltaGate::head);
  if (!p.device.is_cpu()) return recurrent_delta_on_device(p);
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  HWY_DYNAMIC_DISPATCH(RecurrentGatedDeltaRule)(p);
}

}  // namespace attnzoo
#endif
