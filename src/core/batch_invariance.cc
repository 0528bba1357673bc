#include "core/batch_invariance.h"

#include <atomic>

namespace attnzoo {
namespace {

std::atomic<bool> g_batch_invariant{false};

}  // namespace

bool batch_invariant() { return g_batch_invariant.load(std::memory_order_relaxed); }

void set_batch_invariant(bool on) { g_batch_invariant.store(on, std::memory_order_relaxed); }

}  // namespace attnzoo
