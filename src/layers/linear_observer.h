#pragma once
// A hook that sees every Linear's input while installed: attnzoo quantize's calibration collects per-input-channel
// activation statistics through it (llama.cpp's imatrix). It belongs to the thread that installs it: forward passes
// that other threads run meanwhile (a server, another Python thread) neither feed the statistics nor race on them.
// Linear::forward calls it before it hands work to the pool, so a model whose layers run on the calling thread is
// seen whole. One observer per thread; when none is installed a forward pass pays one thread-local load.
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
inline thread_local LinearInputObserver* t_linear_observer = nullptr;
}

inline LinearInputObserver* linear_input_observer() { return detail::t_linear_observer; }

// Installs an observer in the calling thread for its lifetime; ArgumentError when this thread has one already.
class ScopedLinearObserver {
 public:
  explicit ScopedLinearObserver(LinearInputObserver* o);
  ~ScopedLinearObserver();
  ScopedLinearObserver(const ScopedLinearObserver&) = delete;
  ScopedLinearObserver& operator=(const ScopedLinearObserver&) = delete;
};

}  // namespace attnzoo
