#pragma once
// Reading one field of a request body, each a 400 naming the field when it is the wrong kind or out of range:
// what the OpenAI request parser and the tool-calling fields share.
#include <cstdint>

#include "loader/json.h"

namespace attnzoo::server {

// The field, or nullptr when it is absent or null (OpenAI's clients send null for "not set").
const json::Value* field(const json::Value& body, const char* key);

double number_field(const json::Value& v, const char* key, double lo, double hi);
int64_t int_field(const json::Value& v, const char* key, int64_t lo, int64_t hi);
bool bool_field(const json::Value& v, const char* key);

}  // namespace attnzoo::server
