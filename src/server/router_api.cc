#include "server/router_api.h"

#include <algorithm>
#include <optional>

#include "engine/engine.h"
#include "loader/json.h"
#include "loader/json_try_parse.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

void token_array(json::Writer& w, const std::vector<int32_t>& ids) {
  w.begin_array();
  for (int32_t id : ids) w.value(int64_t(id));
  w.end_array();
}

ApiLimits limits_of(const ServingState& s, const ServerOptions& options) {
  ApiLimits limits = options.limits;
  limits.max_model_len = s.engine->max_model_len();
  return limits;
}

// The request as /v1/completions or /v1/chat/completions would take it, with the same checks.
ApiRequest parse(Endpoint endpoint, const std::string& body, const ServingState& s, const ServerOptions& options) {
  ApiRequest r = parse_request(endpoint, body, *s.tokenizer, s.chat, limits_of(s, options));
  if (!r.model.empty() && r.model != options.model_name)
    throw ApiError(404, "not_found_error", "The model `" + r.model + "` does not exist.", "model");
  return r;
}

// Within the same bounds as parse_request's own parse (openai_request.h).
bool has_messages(const std::string& body, const ApiLimits& limits) {
  const BodySlot slot(body.size());
  json::ParseOptions bounded;
  bounded.max_values = body_value_limit(limits);
  const std::optional<json::Value> v = json::try_parse(body, bounded);  // not JSON: parse_request names the error
  return v && v->is_object() && v->find("messages");
}

}  // namespace

const std::vector<std::string>& RouterApi::paths() {
  static const std::vector<std::string> p = {"/v1/completions/render", "/v1/chat/completions/render", "/tokenize",
                                             "/get_load", "/get_model_info"};
  return p;
}

bool RouterApi::handles(const std::string& path) {
  return std::find(paths().begin(), paths().end(), path) != paths().end();
}

std::string RouterApi::answer(const std::string& method, const std::string& path, const std::string& body,
                              const ServingState& s) {
  const bool post = path != "/get_load" && path != "/get_model_info";
  if (method != (post ? "POST" : "GET"))
    throw ApiError(405, "invalid_request_error", method + " " + path + ": only " + (post ? "POST" : "GET"));
  json::Writer w;
  if (path == "/get_load") {
    const EngineStats stats = s.engine->stats();
    w.begin_object().member("load", stats.running_requests + stats.waiting_requests);
    w.member("num_requests_running", stats.running_requests).member("num_requests_waiting", stats.waiting_requests);
    w.member("kv_cache_usage_perc", stats.kv_cache_usage).end_object();
  } else if (path == "/get_model_info") {
    w.begin_object().member("model_path", options_.model_name).member("tokenizer_path", options_.model_name);
    w.member("is_generation", true).member("max_model_len", s.engine->max_model_len()).end_object();
  } else if (path == "/tokenize") {
    const Endpoint endpoint =
        has_messages(body, limits_of(s, options_)) ? Endpoint::chat_completions : Endpoint::completions;
    const ApiRequest r = parse(endpoint, body, s, options_);
    w.begin_object().member("count", int64_t(r.request.prompt.size()));
    w.member("max_model_len", s.engine->max_model_len()).key("tokens");
    token_array(w, r.request.prompt);
    w.key("token_strs").null().end_object();
  } else {
    // vLLM's GenerateRequest, the token-in form of the request: a list (one per prompt) for a completion, one
    // request for a chat.
    const bool chat = path == "/v1/chat/completions/render";
    const ApiRequest r = parse(chat ? Endpoint::chat_completions : Endpoint::completions, body, s, options_);
    const RequestParams& p = r.request.params;
    if (!chat) w.begin_array();
    w.begin_object().member("request_id", "render-" + std::to_string(next_id_++)).key("token_ids");
    token_array(w, r.request.prompt);
    w.key("sampling_params").begin_object().member("max_tokens", p.max_tokens).member("n", p.n);
    w.member("temperature", double(p.sampling.temperature)).member("top_p", double(p.sampling.top_p));
    w.member("top_k", p.sampling.top_k).end_object();
    w.member("model", options_.model_name).member("stream", r.stream).end_object();
    if (!chat) w.end_array();
  }
  return w.take();
}

}  // namespace attnzoo::server
