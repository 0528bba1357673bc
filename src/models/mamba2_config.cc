#include "models/mamba2_config.h"

#include <cmath>
#include <string>

#include "loader/json.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

float limit_value(const json::Value& v, const Config& c, const char* key) {
  if (v.is_number()) return float(v.as_double());
  if (const json::Value* f = v.find("__float__"); f && f->is_string()) {
    const std::string& s = f->as_string();
    if (s == "Infinity" || s == "inf") return INFINITY;
    if (s == "-Infinity" || s == "-inf") return -INFINITY;
  }
  throw LoadError(c.source() + ": key '" + key + "': expected numbers (or {\"__float__\": \"Infinity\"})");
}

}  // namespace

std::pair<float, float> read_time_step_limit(const Config& c, const char* key) {
  const json::Value* v = c.find(key);
  if (!v) return {0.f, INFINITY};
  if (!v->is_array() || v->as_array().size() != 2)
    throw LoadError(c.source() + ": key '" + key + "': expected a list [min, max]");
  const float lo = limit_value(v->as_array()[0], c, key), hi = limit_value(v->as_array()[1], c, key);
  if (!(lo <= hi)) throw LoadError(c.source() + ": key '" + key + "': min must not exceed max");
  return {lo, hi};
}

}  // namespace attnzoo
