// The connection's read buffer over a socketpair: after a large body, a keep-alive connection waiting for its next
// request holds at most 64 KiB, not the megabytes the body took (a thousand idle connections would hold gigabytes).
#include "server/http_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

namespace attnzoo::server::http {
namespace {

using namespace std::chrono_literals;

constexpr size_t kKept = 64 << 10;

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    conn = std::make_unique<Connection>(fds[0]);
    peer = fds[1];
  }
  ~Pair() { close(peer); }
  // Sends `bytes` from the peer (on a thread: they pass the socket's buffer) and reads until all are buffered.
  void deliver(const std::string& bytes) {
    const size_t want = conn->buffered().size() + bytes.size();
    std::thread writer([&] {
      for (size_t at = 0; at < bytes.size();) {
        const ssize_t n = write(peer, bytes.data() + at, bytes.size() - at);
        if (n <= 0) return;
        at += size_t(n);
      }
    });
    while (conn->buffered().size() < want)
      if (conn->fill(Clock::now() + 5s) != Connection::Fill::data) break;
    writer.join();
    ASSERT_EQ(conn->buffered().size(), want);
  }
  std::unique_ptr<Connection> conn;
  int peer = -1;
};

TEST(HttpConnection, EmptiedBufferLetsGoOfALargeBody) {
  Pair p;
  const std::string body(4 << 20, 'x');
  p.deliver(body);
  EXPECT_GE(p.conn->capacity(), body.size());
  p.conn->consume(body.size());
  EXPECT_LE(p.conn->capacity(), kKept);
  // Ordinary requests keep their buffer (no reallocation per request).
  p.deliver(std::string(1000, 'y'));
  const size_t small = p.conn->capacity();
  p.conn->consume(1000);
  EXPECT_EQ(p.conn->capacity(), small);
}

TEST(HttpConnection, PipelinedRemainderAfterALargeBodyIsCompactedSmall) {
  Pair p;
  const std::string body(4 << 20, 'x');
  p.deliver(body + "GET /health");  // the next request began behind the body
  p.conn->consume(body.size());
  EXPECT_GE(p.conn->capacity(), body.size());
  p.deliver(" HTTP/1.1\r\n");  // its next bytes: the fill drops the consumed body first
  EXPECT_EQ(p.conn->buffered(), "GET /health HTTP/1.1\r\n");
  EXPECT_LE(p.conn->capacity(), kKept);
}

}  // namespace
}  // namespace attnzoo::server::http
