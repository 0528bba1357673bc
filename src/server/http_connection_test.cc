// The connection over a socketpair: after a large body, a keep-alive connection waiting for its next request holds
// at most 64 KiB of read buffer, not the megabytes the body took (a thousand idle connections would hold
// gigabytes); the hang-up probe reaches a half-closed client whole, even past a full send buffer.
#include "server/http_connection.h"

#include <gtest/gtest.h>
#include <poll.h>
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

// A client that half-closed while the server's send buffer was full: the probe cannot go out yet. It must not
// count as sent (no later call would send it, and a client that really closed would never be noticed); once the
// client reads, the next call sends it whole.
TEST(HttpConnection, HangUpProbeWaitsForRoomAndGoesOutWhole) {
  Pair p;
  std::string fill(4096, 'x');
  size_t queued = 0;
  for (ssize_t n; (n = send(p.conn->fd(), fill.data(), fill.size(), MSG_DONTWAIT)) > 0;) queued += size_t(n);
  ASSERT_GT(queued, 0u);
  ASSERT_EQ(shutdown(p.peer, SHUT_WR), 0);
  const std::string probe = "4\r\n:\n\n\r\n";
  EXPECT_FALSE(p.conn->peer_gone(probe, Clock::now() + 1s));  // half-closed, the probe waits for room
  std::string got(queued + probe.size(), '\0');
  size_t read_bytes = 0;
  while (read_bytes < queued) {
    const ssize_t n = read(p.peer, got.data() + read_bytes, queued - read_bytes);
    ASSERT_GT(n, 0);
    read_bytes += size_t(n);
  }
  EXPECT_FALSE(p.conn->peer_gone(probe, Clock::now() + 1s));  // sent now: the client still reads
  pollfd readable{p.peer, POLLIN, 0};
  ASSERT_EQ(poll(&readable, 1, 1000), 1) << "the probe never came";
  ASSERT_EQ(recv(p.peer, got.data() + queued, probe.size(), MSG_DONTWAIT), ssize_t(probe.size()));
  EXPECT_EQ(got.substr(queued), probe);
  EXPECT_FALSE(p.conn->peer_gone(probe, Clock::now() + 1s));  // once per connection
  close(p.peer);
  p.peer = -1;
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i, std::this_thread::sleep_for(10ms))
    gone = p.conn->peer_gone(probe, Clock::now() + 1s);
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace attnzoo::server::http
