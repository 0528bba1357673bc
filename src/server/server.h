#pragma once
// The OpenAI-compatible HTTP front end of the engine (cpp-httplib from Debian). HTTP threads only parse,
// queue and stream: the model runs on the engine's thread. The server listens before the model is loaded
// (GET /health answers 503 until set_ready), so supervisors can tell "loading" from "down".
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "server/metrics.h"
#include "server/openai_request.h"

namespace httplib {
class Server;
}

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
  int http_threads = 0;                 // connections served at once; 0: from the engine's limits
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
  void stop();

 private:
  struct Handlers;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<Handlers> handlers_;
  int port_ = 0;
  int listen_socket_ = -1;
  std::mutex listen_mu_;
  bool listening_ = false, stopped_ = false;
};

}  // namespace attnzoo::server
