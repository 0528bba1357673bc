// Chunked KDA: the shared per-target driver in common/delta_chunk-inl.h with per-channel decay, compiled for
// every SIMD target.
#include "kernels/linear/kda/kda.h"

#include "core/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/kda/chunk.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/linear/common/delta_chunk-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

void ChunkKda(const DeltaProblem& p) { DeltaChunk<DeltaGate::channel>(p); }

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(ChunkKda);

void chunk_kda(const DeltaArgs& args) {
  const DeltaProblem p = make_delta_problem(args, DeltaGate::channel);
  if (!p.device.is_cpu()) return chunk_delta_on_device(p);
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  HWY_DYNAMIC_DISPATCH(ChunkKda)(p);
}

}  // namespace attnzoo
#endif
