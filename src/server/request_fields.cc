#include "server/request_fields.h"

#include <string>

#include "loader/json_writer.h"
#include "server/api_error.h"

namespace attnzoo::server {

const json::Value* field(const json::Value& body, const char* key) {
  const json::Value* v = body.find(key);
  return v && !v->is_null() ? v : nullptr;
}

double number_field(const json::Value& v, const char* key, double lo, double hi) {
  if (!v.is_number()) throw bad_request(std::string(key) + ": must be a number", key);
  const double d = v.as_double();
  if (!(d >= lo && d <= hi))
    throw bad_request(std::string(key) + ": must be in [" + json::number_text(lo) + ", " + json::number_text(hi) +
                          "], got " + json::number_text(d),
                      key);
  return d;
}

int64_t int_field(const json::Value& v, const char* key, int64_t lo, int64_t hi) {
  if (!v.is_integer()) throw bad_request(std::string(key) + ": must be an integer", key);
  const int64_t i = v.as_int();
  if (i < lo || i > hi)
    throw bad_request(std::string(key) + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "], got " + std::to_string(i),
                      key);
  return i;
}

bool bool_field(const json::Value& v, const char* key) {
  if (!v.is_bool()) throw bad_request(std::string(key) + ": must be true or false", key);
  return v.as_bool();
}

}  // namespace attnzoo::server
