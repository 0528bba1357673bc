#pragma once
// A process-wide hook that sees every Linear's input while installed: attnzoo quantize's calibration collects
// per-input-channel activation statistics through it (llama.cpp's imatrix). One observer at a time; when none is
// installed a forward pass pays one relaxed atomic load.
#include <atomic>
#include <cstdint>
#include <string>

namespace attnzoo {

class LinearInputObserver {
 public:
  virtual ~LinearInputObserver() = default;
  // x [T, in] f32 contiguous, the input of the Linear named `name` (its module name: "model.layers.0.mlp.up_proj").
  // Called on the thread that runs the forward pass.
  virtual void observe(const std::string& name, const float* x, int64_t T, int64_t in) = 0;
};

namespace detail {
inline std::atomic<LinearInputObserver*> g_linear_observer{nullptr};
}

inline LinearInputObserver* linear_input_observer() {
  return detail::g_linear_observer.load(std::memory_order_relaxed);
}

// Installs an observer for its lifetime; ArgumentError when another one is installed.
class ScopedLinearObserver {
 public:
  explicit ScopedLinearObserver(LinearInputObserver* o);
  ~ScopedLinearObserver();
  ScopedLinearObserver(const ScopedLinearObserver&) = delete;
  ScopedLinearObserver& operator=(const ScopedLinearObserver&) = delete;
};

}  // namespace attnzoo
