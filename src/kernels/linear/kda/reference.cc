#include "kernels/linear/kda/kda.h"

namespace attnzoo {

void kda_reference(const DeltaArgs& args) { delta_reference(make_delta_problem(args, DeltaGate::channel)); }

}  // namespace attnzoo
