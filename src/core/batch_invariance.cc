#include "core/batch_invariance.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace attnzoo {
namespace {

// ATTNZOO_BATCH_INVARIANT=1 turns it on for the whole process (vLLM's VLLM_BATCH_INVARIANT), e.g. for a server
// started by a deployment that passes no flags.
bool from_environment() {
  const char* v = std::getenv("ATTNZOO_BATCH_INVARIANT");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::atomic<bool> g_batch_invariant{from_environment()};

}  // namespace

bool batch_invariant() { return g_batch_invariant.load(std::memory_order_relaxed); }

void set_batch_invariant(bool on) { g_batch_invariant.store(on, std::memory_order_relaxed); }

}  // namespace attnzoo
