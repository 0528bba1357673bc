#include "layers/linear_observer.h"

#include "core/error.h"

namespace attnzoo {

ScopedLinearObserver::ScopedLinearObserver(LinearInputObserver* o) {
  LinearInputObserver* expected = nullptr;
  if (!detail::g_linear_observer.compare_exchange_strong(expected, o))
    throw ArgumentError("a Linear input observer is already installed (one calibration at a time)");
}

ScopedLinearObserver::~ScopedLinearObserver() { detail::g_linear_observer.store(nullptr); }

}  // namespace attnzoo
