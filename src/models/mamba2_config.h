#pragma once
// config.json readers shared by the Mamba-2 family builders (Mamba2ForCausalLM, Falcon-H1).
#include <utility>

#include "loader/config.h"

namespace attnzoo {

// time_step_limit as (min, max). transformers writes infinity as {"__float__": "Infinity"}; older files may
// hold a plain number or be absent ((0, inf): no clamp).
std::pair<float, float> read_time_step_limit(const Config& c, const char* key = "time_step_limit");

}  // namespace attnzoo
