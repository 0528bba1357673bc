#pragma once
// The nesting a compiled schema's values need: the recognizer begins a value only where it still fits under
// JsonSchema::kMaxDepth, so no accepted prefix is a dead end at the depth limit.
#include "engine/json_schema.h"

namespace attnzoo {

// Fills g.node_need / g.position_need: the fewest nesting levels (containers count one) a value of each node /
// position needs, to a fixed point (recursion through $ref); 0xFFFF where no finite value exists.
void compute_nesting_need(JsonSchema& g);

}  // namespace attnzoo
