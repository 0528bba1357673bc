#pragma once
// A tagged union of compiled schemas: objects whose first property (the tag, required) holds one constant string
// per branch, as tool calls are ({"name": "get_weather", "arguments": {...}} | {"name": "get_time", ...}). The
// JSON Schema compiler refuses anyOf over such objects (every branch begins with '{'); here the object opens as
// one node whose tag value picks the branch, and the recognizer continues in that branch's own object node
// (JsonSchemaRecognizer: a literal that closes a variant object's first property switches its frame).
#include <memory>
#include <vector>

#include "engine/json_schema.h"

namespace attnzoo {

// `branches`: compiled schemas whose document is an object (one node at the root), first property required and
// an enum / const of one string, the same key in every branch, different values. ArgumentError otherwise.
std::shared_ptr<const JsonSchema> tagged_union(const std::vector<std::shared_ptr<const JsonSchema>>& branches);

}  // namespace attnzoo
