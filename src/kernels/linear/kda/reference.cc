#include "kernels/linear/kda/kda.h"

namespace attnzoo {

void kda_reference(const DeltaArgs& args) {
  require_delta_host(args, "kda_reference");
  delta_reference(make_delta_problem(args, DeltaGate::channel));
}

}  // namespace attnzoo
