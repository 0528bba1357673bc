#pragma once
// For the server tests: a Server bound to its port and listening on a thread of its own until destroyed.
#include <thread>
#include <utility>

#include "server/server.h"

namespace attnzoo::testing {

struct RunningServer {
  explicit RunningServer(server::ServerOptions options) : server(std::move(options)) {
    port = server.bind();
    thread = std::thread([this] { server.listen(); });
  }
  ~RunningServer() {
    server.stop();
    thread.join();
  }
  server::Server server;
  int port = 0;
  std::thread thread;
};

}  // namespace attnzoo::testing
