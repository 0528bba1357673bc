#include "server/router_api.h"

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "loader/json.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

Handler answering_errors(Handler fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      res.status = e.status;
      res.set_content(error_body(e), "application/json");
    } catch (const std::exception& e) {
      const ApiError err(500, "server_error", e.what());
      res.status = err.status;
      res.set_content(error_body(err), "application/json");
    }
  };
}

void token_array(json::Writer& w, const std::vector<int32_t>& ids) {
  w.begin_array();
  for (int32_t id : ids) w.value(int64_t(id));
  w.end_array();
}

struct RouterApi {
  std::function<const ServingState&()> ready;
  const ServerOptions& options;
  std::atomic<uint64_t> next_id{1};

  // The request as /v1/completions or /v1/chat/completions would take it, with the same checks.
  ApiRequest parse(Endpoint endpoint, const std::string& body, const ServingState& s) const {
    ApiLimits limits = options.limits;
    limits.max_model_len = s.engine->max_model_len();
    ApiRequest r = parse_request(endpoint, body, *s.tokenizer, s.chat, limits);
    if (!r.model.empty() && r.model != options.model_name)
      throw ApiError(404, "not_found_error", "The model `" + r.model + "` does not exist.", "model");
    return r;
  }

  // vLLM's GenerateRequest: the token-in form of the request.
  void generate_request(json::Writer& w, const ApiRequest& r) {
    const RequestParams& p = r.request.params;
    w.begin_object().member("request_id", "render-" + std::to_string(next_id++)).key("token_ids");
    token_array(w, r.request.prompt);
    w.key("sampling_params").begin_object().member("max_tokens", p.max_tokens).member("n", p.n);
    w.member("temperature", double(p.sampling.temperature)).member("top_p", double(p.sampling.top_p));
    w.member("top_k", p.sampling.top_k).end_object();
    w.member("model", options.model_name).member("stream", r.stream).end_object();
  }

  void render(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const ApiRequest r = parse(endpoint, req.body, ready());
    json::Writer w;
    // vLLM renders a completion as a list (one entry per prompt) and a chat as one request.
    if (endpoint == Endpoint::completions) w.begin_array();
    generate_request(w, r);
    if (endpoint == Endpoint::completions) w.end_array();
    res.set_content(w.take(), "application/json");
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const ServingState& s = ready();
    json::Value body;
    try {
      body = json::parse(req.body);
    } catch (const json::ParseError& e) {
      throw bad_request(std::string("malformed JSON body: ") + e.what());
    }
    const bool chat = body.is_object() && body.find("messages");
    const ApiRequest r = parse(chat ? Endpoint::chat_completions : Endpoint::completions, req.body, s);
    json::Writer w;
    w.begin_object().member("count", int64_t(r.request.prompt.size()));
    w.member("max_model_len", s.engine->max_model_len()).key("tokens");
    token_array(w, r.request.prompt);
    w.key("token_strs").null().end_object();
    res.set_content(w.take(), "application/json");
  }

  void load(httplib::Response& res) {
    const EngineStats stats = ready().engine->stats();
    json::Writer w;
    w.begin_object().member("load", stats.running_requests + stats.waiting_requests);
    w.member("num_requests_running", stats.running_requests).member("num_requests_waiting", stats.waiting_requests);
    w.member("kv_cache_usage_perc", stats.kv_cache_usage).end_object();
    res.set_content(w.take(), "application/json");
  }

  void model_info(httplib::Response& res) {
    const ServingState& s = ready();
    json::Writer w;
    w.begin_object().member("model_path", options.model_name).member("tokenizer_path", options.model_name);
    w.member("is_generation", true).member("max_model_len", s.engine->max_model_len()).end_object();
    res.set_content(w.take(), "application/json");
  }
};

}  // namespace

void add_router_api(httplib::Server& http, std::function<const ServingState&()> ready, const ServerOptions& options) {
  // Owned by the routes: the handlers below live as long as the httplib::Server that holds them.
  std::shared_ptr<RouterApi> api(new RouterApi{std::move(ready), options});
  http.Post("/v1/completions/render", answering_errors([api](const httplib::Request& req, httplib::Response& res) {
              api->render(Endpoint::completions, req, res);
            }));
  http.Post("/v1/chat/completions/render",
            answering_errors([api](const httplib::Request& req, httplib::Response& res) {
              api->render(Endpoint::chat_completions, req, res);
            }));
  http.Post("/tokenize", answering_errors([api](const httplib::Request& req, httplib::Response& res) {
              api->tokenize(req, res);
            }));
  http.Get("/get_load", answering_errors([api](const httplib::Request&, httplib::Response& res) { api->load(res); }));
  http.Get("/get_model_info",
           answering_errors([api](const httplib::Request&, httplib::Response& res) { api->model_info(res); }));
}

}  // namespace attnzoo::server
