#include "layers/linear_observer.h"

#include "core/error.h"

namespace attnzoo {

ScopedLinearObserver::ScopedLinearObserver(LinearInputObserver* o) {
  if (detail::t_linear_observer != nullptr)
    throw ArgumentError("a Linear input observer is already installed in this thread (one calibration at a time)");
  detail::t_linear_observer = o;
}

ScopedLinearObserver::~ScopedLinearObserver() { detail::t_linear_observer = nullptr; }

}  // namespace attnzoo
