#include "server/server.h"

#include <chrono>
#include <stdexcept>

#include "core/error.h"
#include "engine/engine.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "server/responses.h"
#include "server/router_api.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);

http::Response json_response(std::string body) {
  http::Response r;
  r.body = std::move(body);
  return r;
}

// OpenAI's error body; 429 and 503 say when to come back (the queue drains, a draining server is replaced).
http::Response error_response(const ApiError& e) {
  http::Response r = json_response(error_body(e));
  r.status = e.status;
  if (e.status == 429 || e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

ApiError shutting_down() { return ApiError(503, "server_error", "the server is shutting down"); }

// A request the engine aborted without the client asking (only the server's shutdown does that).
bool cut_short(const std::vector<Choice>& choices) {
  for (const Choice& c : choices)
    if (c.finish_reason == FinishReason::abort) return true;
  return false;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Times of the first sample's tokens, for the inter-token latency histogram.
void collect_times(const RequestOutput& out, std::vector<EngineClock::time_point>& times) {
  for (const SampleDelta& d : out.samples)
    if (d.index == 0) times.insert(times.end(), d.token_times.begin(), d.token_times.end());
}

}  // namespace

struct Server::Handlers {
  explicit Handlers(const ServerOptions& o) : options(o) {}
  const ServerOptions& options;
  std::atomic<const ServingState*> state{nullptr};
  ServingState owned;
  ServerMetrics metrics;
  RouterApi router_api{options};
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> draining{false};

  const ServingState& ready() const {
    if (draining) throw shutting_down();
    const ServingState* s = state.load();
    if (!s) throw ApiError(503, "server_error", "the model is still loading");
    return *s;
  }

  void route(const http::Request& req, http::Exchange& ex) {
    try {
      const std::string& p = req.path;
      const bool post = p == "/v1/completions" || p == "/v1/chat/completions";
      const bool get = p == "/v1/models" || p == "/health" || p == "/metrics";
      if (RouterApi::handles(p))
        return void(ex.respond(json_response(router_api.answer(req.method, p, req.body, ready()))));
      // The path as sent (not percent-decoded), so "/health%00x" is named whole.
      if (!post && !get) throw ApiError(404, "not_found_error", "no route for " + req.method + " " + req.target);
      if (req.method != (post ? "POST" : "GET") && !(get && req.method == "HEAD"))
        throw ApiError(405, "invalid_request_error", req.method + " " + p + ": only " + (post ? "POST" : "GET"));
      if (p == "/v1/completions") return generate(Endpoint::completions, req, ex);
      if (p == "/v1/chat/completions") return generate(Endpoint::chat_completions, req, ex);
      if (p == "/v1/models") return void(ex.respond(json_response(models_json())));
      if (p == "/health") {
        ready();
        http::Response r;
        r.content_type = "text/plain";
        return void(ex.respond(r));
      }
      const ServingState* s = state.load();
      const EngineStats stats = s ? s->engine->stats() : EngineStats{};
      http::Response r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics.text(stats, options.model_name);
      ex.respond(r);
    } catch (const ApiError& e) {
      if (!ex.answered()) ex.respond(error_response(e));
    }
  }

  void generate(Endpoint endpoint, const http::Request& req, http::Exchange& ex) {
    const ServingState& s = ready();
    ApiLimits limits = options.limits;
    limits.max_model_len = s.engine->max_model_len();
    ApiRequest r = parse_request(endpoint, req.body, *s.tokenizer, s.chat, limits);
    if (!r.model.empty() && r.model != options.model_name)
      throw ApiError(404, "not_found_error", "The model `" + r.model + "` does not exist.", "model");

    auto queue = OutputQueue::make();
    uint64_t id = 0;
    try {
      id = s.engine->add_request(r.request, queue->callback());
    } catch (const EngineBusy& e) {
      throw ApiError(429, "rate_limit_error", std::string("too many requests waiting: ") + e.what());
    } catch (const EngineStopped&) {
      throw shutting_down();
    } catch (const ArgumentError& e) {
      throw bad_request(e.what());
    }
    ResponseContext ctx{endpoint, (endpoint == Endpoint::completions ? "cmpl-" : "chatcmpl-") +
                                      std::to_string(next_id++), unix_seconds(), options.model_name,
                        s.tokenizer.get(), r.tool_mode, r.parallel_tool_calls, r.reasoning, r.include_reasoning,
                        r.tool_format, r.harmony, r.harmony_prefix, r.tool_forced_name};
    if (r.stream) return stream(ctx, r, *s.engine, id, *queue, ex);
    Choices choices(r.request.params.n);
    std::vector<EngineClock::time_point> times;
    auto checked = std::chrono::steady_clock::now();
    for (;;) {
      // Nothing is written before the end, so only the socket tells of a client that went away; it is asked
      // once per poll interval, however often outputs arrive.
      if (std::chrono::steady_clock::now() - checked >= kPollInterval) {
        if (ex.client_gone()) return s.engine->abort(id);
        checked = std::chrono::steady_clock::now();
      }
      std::optional<RequestOutput> out = queue->pop(kPollInterval);
      if (!out) continue;  // the engine always ends a request with a finished output
      for (const SampleDelta& d : out->samples) choices.add(d);
      collect_times(*out, times);
      if (!out->finished) continue;
      metrics.observe_finished(*out, times);
      if (!out->error.empty()) throw ApiError(500, "server_error", out->error);
      // Never 200 with a cut answer: the client retries elsewhere.
      if (cut_short(choices.all())) throw ApiError(503, "server_error", "the server shut down before the request finished");
      ex.respond(json_response(full_response(ctx, choices.all(), out->usage, r.request.params.logprobs)));
      return;
    }
  }

  void stream(const ResponseContext& ctx, const ApiRequest& r, Engine& engine, uint64_t id, OutputQueue& queue,
              http::Exchange& ex) {
    StreamWriter writer(ctx, r.request.params.n, r.request.params.logprobs, r.include_usage);
    std::vector<EngineClock::time_point> times;
    http::Response head;
    head.content_type = "text/event-stream";
    head.headers.emplace_back("Cache-Control", "no-cache");
    if (!ex.start_stream(head)) return engine.abort(id);
    for (;;) {
      std::optional<RequestOutput> out = queue.pop(kPollInterval);
      // A long prefill writes nothing for a while: the socket tells of a client gone before its first token.
      if (!out) {
        if (ex.client_gone()) return engine.abort(id);
        continue;
      }
      collect_times(*out, times);
      std::string text;
      bool cut = false;
      for (const SampleDelta& d : out->samples) {
        text += writer.chunk(d);
        cut = cut || d.finish_reason == FinishReason::abort;
      }
      if (out->finished) {
        metrics.observe_finished(*out, times);
        if (!out->error.empty()) {
          text += StreamWriter::event(error_body(ApiError(500, "server_error", out->error)));
        } else if (cut) {
          text += StreamWriter::event(error_body(ApiError(503, "server_error", "the server shut down before the request finished")));
        } else if (r.include_usage) {
          text += writer.usage_chunk(out->usage);
        }
        text += StreamWriter::done();
      }
      // A failed write means the client went away.
      if (!ex.write(text)) return engine.abort(id);
      if (out->finished) return void(ex.end_stream());
    }
  }

  std::string models_json() const {
    const ServingState* s = state.load();
    json::Writer w;
    w.begin_object().member("object", "list").key("data").begin_array();
    w.begin_object().member("id", options.model_name).member("object", "model").member("created", unix_seconds());
    w.member("owned_by", "attnzoo").member("root", options.model_name);
    if (s) {
      w.member("max_model_len", s->engine->max_model_len());
      w.member("vocab_size", int64_t(s->tokenizer->vocab_size()));  // attnzoo's: bench serve draws ids below it
    }
    w.end_object().end_array().end_object();
    return w.take();
  }
};

namespace {

http::ServerOptions http_options(const ServerOptions& o) {
  http::ServerOptions h;
  h.host = o.host;
  h.port = o.port;
  h.limits.max_body_bytes = o.max_body_bytes;
  h.limits.header_timeout = std::chrono::milliseconds(int64_t(o.header_timeout_seconds * 1000));
  h.max_connections = o.max_connections;
  h.max_connections_per_client = o.max_connections_per_client;
  return h;
}

}  // namespace

Server::Server(ServerOptions options)
    : options_(std::move(options)), handlers_(std::make_unique<Handlers>(options_)) {
  Handlers& h = *handlers_;
  http_ = std::make_unique<http::Server>(
      http_options(options_),
      [&h](const http::Request& req, http::Exchange& ex) {
        try {
          h.route(req, ex);
        } catch (const ApiError& e) {
          if (!ex.answered()) ex.respond(error_response(e));
        } catch (const std::exception& e) {
          if (!ex.answered()) ex.respond(error_response(ApiError(500, "server_error", e.what())));
        }
      },
      [](int status, const std::string& message) {
        return error_body(ApiError(status, status >= 500 ? "server_error" : "invalid_request_error", message));
      });
}

Server::~Server() { stop(); }

int Server::bind() { return port_ = http_->bind(); }

void Server::listen() { http_->run(); }

void Server::set_ready(const ServingState& state) {
  handlers_->owned = state;
  handlers_->state.store(&handlers_->owned);
}

void Server::drain() {
  handlers_->draining = true;
  http_->drain();
}

// Every engine request is held by an HTTP exchange until answered, so the exchanges count them all once.
size_t Server::in_flight() const { return http_->in_flight(); }

void Server::stop() { http_->stop(); }

}  // namespace attnzoo::server
