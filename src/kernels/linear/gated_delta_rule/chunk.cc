// Chunked gated delta rule (and, without a gate, the plain delta rule): the shared per-target driver in
// common/delta_chunk-inl.h, compiled for every SIMD target.
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"

#include "core/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/gated_delta_rule/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/delta_chunk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

void ChunkGatedDeltaRule(const DeltaProblem& p) {
  if (p.gate == DeltaGate::none)
    DeltaChunk<DeltaGate::none>(p);
  else
    DeltaChunk<DeltaGate::head>(p);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(ChunkGatedDeltaRule);

void chunk_gated_delta_rule(const DeltaArgs& args) {
  const DeltaProblem p = make_delta_problem(args, args.g.empty() ? DeltaGate::none : DeltaGate::head);
  if (!p.device.is_cpu()) return chunk_delta_on_device(p);
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  HWY_DYNAMIC_DISPATCH(ChunkGatedDeltaRule)(p);
}

}  // namespace attnzoo
#endif
