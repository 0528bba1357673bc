#pragma once
// The OpenAI-compatible HTTP front end of the engine, over attnzoo's own HTTP/1.1 layer (http_server.h). HTTP
// threads only parse, queue and stream: the model runs on the engine's thread. The server listens before the model
// is loaded (GET /health answers 503 until set_ready), so supervisors can tell "loading" from "down", and answers
// 503 again once drain() starts a graceful shutdown, so load balancers stop routing to it.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace attnzoo {
class Engine;
class ChatFormat;
}  // namespace attnzoo

namespace attnzoo::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: an ephemeral port (see Server::port)
  std::string model_name;               // the id clients name in "model" and /v1/models lists
  size_t max_body_bytes = 4 << 20;      // larger request bodies get 413
  size_t max_connections = 1024;        // open at once; the excess is answered 503 with Retry-After
  size_t max_connections_per_client = 256;
  double header_timeout_seconds = 10;   // to send a request's headers (from connecting or the previous answer)
  ApiLimits limits;
};

// What the server needs once the model is loaded; owned by the caller, alive until stop().
struct ServingState {
  Engine* engine = nullptr;
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  const ChatFormat* chat = nullptr;  // null: the checkpoint has no chat template (chat requests get 400)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket (throws std::runtime_error naming host:port on failure); returns the port bound.
  int bind();
  int port() const { return port_; }
  // Serves until stop(); call after bind(), typically on a thread of its own. Returns at once after stop().
  void listen();
  void set_ready(const ServingState& state);
  // Graceful shutdown, first step: new requests get 503 with Retry-After (GET /health too), every answer closes
  // its connection; requests already admitted go on. Then stop the engine (what is left is aborted: non-streamed
  // requests get 503, streams an error event) and stop().
  void drain();
  // Requests still in the engine or still being answered.
  size_t in_flight() const;
  void stop();

 private:
  struct Handlers;
  ServerOptions options_;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<http::Server> http_;
  int port_ = 0;
};

}  // namespace attnzoo::server
