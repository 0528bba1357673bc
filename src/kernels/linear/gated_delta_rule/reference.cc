#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"

namespace attnzoo {

void gated_delta_rule_reference(const DeltaArgs& args) {
  require_delta_host(args, "gated_delta_rule_reference");
  delta_reference(make_delta_problem(args, args.g.empty() ? DeltaGate::none : DeltaGate::head));
}

}  // namespace attnzoo
