#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "loader/json_writer.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/responses.h"
#include "server/router_api.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::server {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(20);

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
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

  const ServingState& ready() const {
    const ServingState* s = state.load();
    if (!s) throw ApiError(503, "server_error", "the model is still loading");
    return *s;
  }

  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    const ServingState& s = ready();
    ApiLimits limits = options.limits;
    limits.max_model_len = s.engine->max_model_len();
    ApiRequest r = parse_request(endpoint, req.body, *s.tokenizer, s.chat, limits);
    if (!r.model.empty() && r.model != options.model_name)
      throw ApiError(404, "not_found_error", "The model `" + r.model + "` does not exist.", "model");

    // A client gone before its request starts (it waited for an HTTP thread) costs the engine nothing.
    auto watch = std::make_shared<ConnectionWatch>(req);
    if (watch->closed()) return;
    auto queue = OutputQueue::make();
    uint64_t id = 0;
    try {
      id = s.engine->add_request(r.request, queue->callback());
    } catch (const EngineBusy& e) {
      throw ApiError(429, "rate_limit_error", std::string("too many requests waiting: ") + e.what());
    } catch (const EngineStopped&) {
      throw ApiError(503, "server_error", "the server is shutting down");
    } catch (const ArgumentError& e) {
      throw bad_request(e.what());
    }
    ResponseContext ctx{endpoint, (endpoint == Endpoint::completions ? "cmpl-" : "chatcmpl-") +
                                      std::to_string(next_id++), unix_seconds(), options.model_name,
                        s.tokenizer.get()};
    const bool logprobs = r.request.params.logprobs;
    const int64_t n = r.request.params.n;
    if (!r.stream) {
      Choices choices(n);
      std::vector<EngineClock::time_point> times;
      auto checked = std::chrono::steady_clock::now();
      for (;;) {
        // Nothing is written before the end, so only the socket tells of a client that went away; it is asked
        // once per poll interval, however often outputs arrive.
        if (std::chrono::steady_clock::now() - checked >= kPollInterval) {
          if (watch->closed()) {
            s.engine->abort(id);
            return;
          }
          checked = std::chrono::steady_clock::now();
        }
        std::optional<RequestOutput> out = queue->pop(kPollInterval);
        if (!out) continue;  // the engine always ends a request with a finished output
        for (const SampleDelta& d : out->samples) choices.add(d);
        collect_times(*out, times);
        if (!out->finished) continue;
        metrics.observe_finished(*out, times);
        if (!out->error.empty()) throw ApiError(500, "server_error", out->error);
        res.set_content(full_response(ctx, choices.all(), out->usage, logprobs), "application/json");
        return;
      }
    }
    auto writer = std::make_shared<StreamWriter>(ctx, n, logprobs, r.include_usage);
    auto times = std::make_shared<std::vector<EngineClock::time_point>>();
    Engine* engine = s.engine;
    const bool include_usage = r.include_usage;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, queue, writer, times, include_usage, watch](size_t, httplib::DataSink& sink) {
          std::optional<RequestOutput> out = queue->pop(kPollInterval);
          // A long prefill writes nothing for a while: the socket tells of a client gone before its first token.
          if (!out) return sink.is_writable() && !watch->closed();
          collect_times(*out, *times);
          std::string text;
          for (const SampleDelta& d : out->samples) text += writer->chunk(d);
          if (out->finished) {
            metrics.observe_finished(*out, *times);
            if (!out->error.empty()) {
              text += StreamWriter::event(error_body(ApiError(500, "server_error", out->error)));
            } else if (include_usage) {
              text += writer->usage_chunk(out->usage);
            }
            text += StreamWriter::done();
          }
          // A failed write means the client went away: the releaser below aborts the request.
          if (!text.empty() && !sink.write(text.data(), text.size())) return false;
          if (out->finished) sink.done();
          return true;
        },
        [engine, id, queue](bool success) {
          if (!success || !queue->finished()) engine->abort(id);
        });
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

Server::Server(ServerOptions options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()),
      handlers_(std::make_unique<Handlers>(options_)) {
  Handlers& h = *handlers_;
  int threads = options_.http_threads;
  if (threads <= 0) threads = 256;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_max_count(1000);  // the library's 5 would make a busy client reconnect every 5 requests
  // SO_REUSEADDR (a restart need not wait for TIME_WAIT) but not the library's default SO_REUSEPORT, with which a
  // second server on the same port would bind silently and take half the connections.
  http_->set_socket_options([this](int sock) {  // socket_t is int on POSIX
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket_ = sock;  // the last one offered is the one that bound
  });

  const auto guarded = [](auto fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, "server_error", e.what()));
      }
    };
  };
  http_->Post("/v1/completions", guarded([&h](const httplib::Request& req, httplib::Response& res) {
                h.generate(Endpoint::completions, req, res);
              }));
  http_->Post("/v1/chat/completions", guarded([&h](const httplib::Request& req, httplib::Response& res) {
                h.generate(Endpoint::chat_completions, req, res);
              }));
  http_->Get("/v1/models", guarded([&h](const httplib::Request&, httplib::Response& res) {
               res.set_content(h.models_json(), "application/json");
             }));
  http_->Get("/health", guarded([&h](const httplib::Request&, httplib::Response& res) {
               h.ready();
               res.set_content("", "text/plain");
             }));
  http_->Get("/metrics", guarded([&h](const httplib::Request&, httplib::Response& res) {
               const ServingState* s = h.state.load();
               const EngineStats stats = s ? s->engine->stats() : EngineStats{};
               res.set_content(h.metrics.text(stats, h.options.model_name), "text/plain; version=0.0.4");
             }));
  const auto router_api = guarded([&h](const httplib::Request& req, httplib::Response& res) {
    res.set_content(h.router_api.answer(req.method, req.path, req.body, h.ready()), "application/json");
  });
  for (const std::string& path : RouterApi::paths()) http_->Get(path, router_api).Post(path, router_api);
  // Responses the library makes itself (404 for unknown paths, 413 for oversized bodies, 400 for bad
  // requests) get OpenAI's error body too.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP " + std::to_string(res.status);
    std::string type = "invalid_request_error";
    if (res.status == 404) message = "no route for " + req.method + " " + req.path, type = "not_found_error";
    if (res.status == 413)
      message = "request body larger than the limit of " + std::to_string(options_.max_body_bytes) + " bytes";
    send_error(res, ApiError(res.status, type, message));
  });
}

Server::~Server() { stop(); }

int Server::bind() {
  port_ = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                             : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port_ <= 0)
    throw std::runtime_error("serve: cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of new clients overflows it, and each dropped SYN costs
  // its client a 1 s retransmit. Listening again on the bound socket only raises the backlog.
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return port_;
}

void Server::listen() {
  {
    std::lock_guard lock(listen_mu_);
    if (stopped_) return;
    listening_ = true;
  }
  http_->listen_after_bind();
}

void Server::set_ready(const ServingState& state) {
  handlers_->owned = state;
  handlers_->state.store(&handlers_->owned);
}

void Server::stop() {
  std::lock_guard lock(listen_mu_);
  if (stopped_) return;  // a second call (the destructor's after the owner's) would wait for a loop long gone
  stopped_ = true;
  if (!listening_) return;
  // listen() may not have reached the library's loop yet, and the library's stop() does nothing before it has:
  // wait (briefly: the loop starts at once on a bound socket) until it runs, then stop it.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http_->stop();
}

}  // namespace attnzoo::server
