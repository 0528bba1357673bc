#include "kernels/linear/delta_rule/delta_rule.h"

#include "core/error.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"

namespace attnzoo {
namespace {

const DeltaArgs& without_gate(const DeltaArgs& args) {
  require(args.g.empty(), "g", "the delta rule has no decay gate (use the gated delta rule)");
  return args;
}

}  // namespace

void chunk_delta_rule(const DeltaArgs& args) { chunk_gated_delta_rule(without_gate(args)); }
void recurrent_delta_rule(const DeltaArgs& args) { recurrent_gated_delta_rule(without_gate(args)); }
// The CPU-only reference names itself, not the gated entry it forwards to, when refusing device tensors.
void delta_rule_reference(const DeltaArgs& args) {
  require_delta_host(args, "delta_rule_reference");
  gated_delta_rule_reference(without_gate(args));
}

}  // namespace attnzoo
