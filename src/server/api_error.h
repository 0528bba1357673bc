#pragma once
// Errors the OpenAI-compatible API answers with: an HTTP status and OpenAI's error object
// {"error": {"message", "type", "param", "code"}}.
#include <stdexcept>
#include <string>

namespace attnzoo::server {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string type, const std::string& message, std::string param = {})
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)) {}
  int status;
  std::string type;   // invalid_request_error, not_found_error, rate_limit_error, server_error
  std::string param;  // the request field at fault, "" when none
};

inline ApiError bad_request(const std::string& message, std::string param = {}) {
  return ApiError(400, "invalid_request_error", message, std::move(param));
}

// {"error": {...}} for `e`; `code` is the HTTP status, as vLLM reports it.
std::string error_body(const ApiError& e);

}  // namespace attnzoo::server
