#include "layers/matmul_precision.h"

#include <atomic>

#include "core/error.h"

namespace attnzoo {
namespace {

std::atomic<MatmulPrecision> g_precision{MatmulPrecision::automatic};

}  // namespace

MatmulPrecision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }

void set_matmul_precision(MatmulPrecision p) { g_precision.store(p, std::memory_order_relaxed); }

bool reduced_products(bool reduced_weights) {
  switch (matmul_precision()) {
    case MatmulPrecision::automatic: return reduced_weights;
    case MatmulPrecision::medium: return true;
    case MatmulPrecision::highest:
    case MatmulPrecision::high: return false;
  }
  return false;
}

const char* matmul_precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::automatic: return "auto";
    case MatmulPrecision::highest: return "highest";
    case MatmulPrecision::high: return "high";
    case MatmulPrecision::medium: return "medium";
  }
  return "?";
}

MatmulPrecision parse_matmul_precision(const std::string& name) {
  if (name == "auto") return MatmulPrecision::automatic;
  if (name == "highest") return MatmulPrecision::highest;
  if (name == "high") return MatmulPrecision::high;
  if (name == "medium") return MatmulPrecision::medium;
  throw ArgumentError("precision: expected 'auto', 'highest', 'high' or 'medium', got '" + name + "'");
}

}  // namespace attnzoo
