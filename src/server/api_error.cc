#include "server/api_error.h"

#include "loader/json_writer.h"

namespace attnzoo::server {

std::string error_body(const ApiError& e) {
  json::Writer w;
  w.begin_object().key("error").begin_object().member("message", e.what()).member("type", e.type);
  w.key("param");
  if (e.param.empty()) w.null();
  else w.value(e.param);
  w.member("code", int64_t(e.status)).end_object().end_object();
  return w.take();
}

}  // namespace attnzoo::server
