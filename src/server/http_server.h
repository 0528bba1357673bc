#pragma once
// The HTTP/1.1 layer of `attnzoo serve`: an accept loop that admits a bounded number of connections (in all and per
// client address; the excess is answered 503 with Retry-After at once, never queued), one thread per admitted
// connection reading strict requests (http_request.h) and answering them in order (keep-alive and pipelining; a
// client that half-closes after its request still gets the answer), whole or streamed (chunked) responses, and a
// drain / stop for graceful shutdown. It knows nothing of the API: one handler takes every request.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "server/http_request.h"

namespace attnzoo::server::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: an ephemeral port
  Limits limits;
  size_t max_connections = 1024;            // open at once, from all clients
  size_t max_connections_per_client = 256;  // open at once from one address
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Retry-After, Cache-Control)
};

// One request's way back to its client. A handler calls respond() once, or start_stream(), write()s and
// end_stream(); each returns false once the client is gone.
class Exchange {
 public:
  Exchange(Connection& conn, const Request& req, const Limits& limits, bool keep_alive)
      : conn_(conn), req_(req), limits_(limits), keep_alive_(keep_alive) {}
  bool respond(const Response& r);
  bool start_stream(const Response& head);  // head.body is not sent
  bool write(std::string_view data);
  bool end_stream();
  // Whether the client hung up, never blocking (see Connection::peer_gone: a half-close is not a hang-up).
  bool client_gone();

  bool answered() const { return answered_; }
  bool closed() const { return !ok_; }
  bool reusable() const { return keep_alive_ && ok_; }

 private:
  std::string head(const Response& r, bool chunked) const;
  Connection& conn_;
  const Request& req_;
  const Limits& limits_;
  bool keep_alive_, ok_ = true, answered_ = false, streaming_ = false;
};

using Handler = std::function<void(const Request&, Exchange&)>;
// The body of the answers the layer makes itself (protocol errors, admission's 503).
using ErrorBody = std::function<std::string(int status, const std::string& message)>;

class Server {
 public:
  Server(ServerOptions options, Handler handler, ErrorBody error_body);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens (throws std::runtime_error naming host:port); returns the port.
  int bind();
  // The accept loop, until stop(); call after bind(), typically on a thread of its own.
  void run();
  // From now on every response closes its connection (clients reconnect elsewhere).
  void drain() { draining_ = true; }
  // Stops accepting, closes connections waiting for a request, and waits for every connection thread to end
  // (the caller first stops what handlers wait for); connections still answering two seconds later (a client that
  // stopped reading its stream) are cut.
  void stop();
  // Requests being handled now.
  size_t in_flight() const { return handling_.load(); }

 private:
  bool admit(int fd, const std::string& client);  // false: refused (the caller answers 503)
  void serve(int fd, std::string client);
  void reap_finished();
  void answer_error(Connection& conn, bool http10, int status, const std::string& message);

  ServerOptions options_;
  Handler handler_;
  ErrorBody error_body_;
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  std::atomic<bool> draining_{false}, stopping_{false};
  std::atomic<size_t> handling_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  std::map<std::string, size_t> per_client_;
  std::map<int, bool> open_;  // connection -> waiting for (or reading) a request: stop() shuts those down first
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> finished_;
};

}  // namespace attnzoo::server::http
