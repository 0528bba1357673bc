#include "core/batch_invariance.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace attnzoo {
namespace {

// ATTNZOO_BATCH_INVARIANT=1 turns it on for the whole process (vLLM's VLLM_BATCH_INVARIANT), e.g. for a server
// started by a deployment that passes no flags. Read on first use, not at load time, so that a bad value is an
// error naming the variable where it is used rather than a failure before main.
bool from_environment() {
  const char* v = std::getenv("ATTNZOO_BATCH_INVARIANT");
  if (v == nullptr || *v == '\0' || std::string(v) == "0") return false;
  if (std::string(v) == "1") return true;
  throw ArgumentError(std::string("ATTNZOO_BATCH_INVARIANT: expected 0 or 1, got '") + v + "'");
}

std::atomic<bool>& flag() {
  static std::atomic<bool> on{from_environment()};
  return on;
}

}  // namespace

bool batch_invariant() { return flag().load(std::memory_order_relaxed); }

void set_batch_invariant(bool on) { flag().store(on, std::memory_order_relaxed); }

}  // namespace attnzoo
