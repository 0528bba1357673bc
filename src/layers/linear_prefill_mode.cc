#include "layers/linear_prefill_mode.h"

#include <atomic>

#include "core/error.h"

namespace attnzoo {
namespace {

// Read by every linear mixer on every forward call from any thread, set rarely (before a benchmark run).
std::atomic<LinearPrefillMode> g_mode{LinearPrefillMode::chunked};

}  // namespace

LinearPrefillMode linear_prefill_mode() { return g_mode.load(std::memory_order_relaxed); }

void set_linear_prefill_mode(LinearPrefillMode mode) { g_mode.store(mode, std::memory_order_relaxed); }

const char* linear_prefill_mode_name(LinearPrefillMode mode) {
  return mode == LinearPrefillMode::chunked ? "chunked" : "recurrent";
}

LinearPrefillMode parse_linear_prefill_mode(const std::string& name) {
  if (name == "chunked") return LinearPrefillMode::chunked;
  if (name == "recurrent") return LinearPrefillMode::recurrent;
  throw ArgumentError("mode: expected 'chunked' or 'recurrent', got '" + name + "'");
}

}  // namespace attnzoo
