// The strict request reader on exact bytes (a socketpair stands in for the client), so the sanitizer build checks
// every branch of the parser: framing, limits, malformed lines, pipelining. The same cases over real TCP, with
// deadlines and a running server, are python/tests/test_serve_http.py.
#include "server/http_request.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace attnzoo::server::http {
namespace {

using namespace std::chrono_literals;

// A connection whose peer sent `bytes` and then half-closed.
struct Fed {
  explicit Fed(const std::string& bytes) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    conn = std::make_unique<Connection>(fds[0]);
    peer = fds[1];
    EXPECT_EQ(write(peer, bytes.data(), bytes.size()), ssize_t(bytes.size()));
    shutdown(peer, SHUT_WR);
  }
  ~Fed() { close(peer); }
  ReadResult next(Request& req, const Limits& limits = {}) { return read_request(*conn, limits, Clock::now(), req); }
  std::unique_ptr<Connection> conn;
  int peer = -1;
};

TEST(HttpRequest, PipelinedRequestsInBothFramingsComeOutInOrder) {
  Fed f("\r\nGET /health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"
        "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nX-A:  padded \t\r\n\r\nhello"
        "POST /p HTTP/1.1\nTransfer-Encoding: chunked\nConnection: close\n\n"
        "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n");
  Request r;
  ASSERT_EQ(f.next(r).kind, ReadResult::request);
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/health?x=1");
  EXPECT_EQ(r.path, "/health");
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(f.next(r).kind, ReadResult::request);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(*r.header("x-a"), "padded");
  ASSERT_EQ(f.next(r).kind, ReadResult::request);  // bare LF line ends are accepted (RFC 9112 2.2)
  EXPECT_EQ(r.body, "abcde");
  EXPECT_FALSE(r.keep_alive);
  EXPECT_EQ(f.next(r).kind, ReadResult::closed);  // the peer's FIN after the last request: nothing to answer
}

TEST(HttpRequest, EveryAmbiguityAndLimitHasItsStatus) {
  Limits small;
  small.max_body_bytes = 16;
  small.max_header_bytes = 256;
  small.max_header_fields = 4;
  small.max_request_line_bytes = 64;
  const std::string post = "POST / HTTP/1.1\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      {post + "Content-Length: 17\r\n\r\n", 413},
      {post + "Transfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n9\r\n123456789\r\n0\r\n\r\n", 413},
      {post + "\r\n", 411},
      {post + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {post + "Content-Length: 3, 4\r\n\r\nabcd", 400},
      {post + "Content-Length: -5\r\n\r\n", 400},
      {post + "Content-Length: 0x10\r\n\r\n", 400},
      {post + "Content-Length: 99999999999999999999999\r\n\r\n", 400},
      {post + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", 400},
      {post + "NoColon\r\nContent-Length: 0\r\n\r\n", 400},
      {post + "Bad Name: x\r\nContent-Length: 0\r\n\r\n", 400},
      {post + "X: a" + std::string(1, '\0') + "b\r\nContent-Length: 0\r\n\r\n", 400},
      {post + "X: a\r\n b\r\nContent-Length: 0\r\n\r\n", 400},
      {post + "X: a\rb\r\nContent-Length: 0\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 431},
      {"GET / HTTP/1.1\r\nA: " + std::string(300, 'a') + "\r\n\r\n", 431},
      {"GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTP/1.1 extra\r\n\r\n", 400},
      {"GET http://x/ HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET /a\x01 HTTP/1.1\r\n\r\n", 400},
  };
  for (const auto& [bytes, status] : cases) {
    SCOPED_TRACE(bytes);
    Fed f(bytes);
    Request r;
    const ReadResult got = f.next(r, small);
    EXPECT_EQ(got.kind, ReadResult::error) << got.message;
    EXPECT_EQ(got.status, status) << got.message;
    EXPECT_FALSE(got.message.empty());
  }
}

TEST(HttpRequest, HeaderDeadlineGives408OnlyWhenARequestBegan) {
  Limits quick;
  quick.header_timeout = 50ms;
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Connection conn(fds[0]);
  Request r;
  EXPECT_EQ(read_request(conn, quick, Clock::now(), r).kind, ReadResult::closed);  // idle: closed quietly
  ASSERT_EQ(write(fds[1], "GET / HT", 8), 8);
  const ReadResult slow = read_request(conn, quick, Clock::now(), r);
  EXPECT_EQ(slow.status, 408);
  close(fds[1]);
}

TEST(HttpRequest, Expect100ContinueIsAnsweredBeforeTheBodyIsRead) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Connection conn(fds[0]);
  const std::string head = "POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(write(fds[1], head.data(), head.size()), ssize_t(head.size()));
  ASSERT_EQ(write(fds[1], "ok", 2), 2);  // (sent at once here; a real client waits for the 100)
  Request r;
  // The body is already buffered after the header: no 100 is needed, and none is sent.
  ASSERT_EQ(read_request(conn, {}, Clock::now(), r).kind, ReadResult::request);
  EXPECT_EQ(r.body, "ok");
  const std::string head2 = "POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(write(fds[1], head2.data(), head2.size()), ssize_t(head2.size()));
  std::thread client([&] {
    char got[64] = {};
    const ssize_t n = read(fds[1], got, sizeof got - 1);
    EXPECT_EQ(std::string(got, size_t(std::max<ssize_t>(n, 0))), "HTTP/1.1 100 Continue\r\n\r\n");
    EXPECT_EQ(write(fds[1], "hi", 2), 2);
  });
  ASSERT_EQ(read_request(conn, {}, Clock::now(), r).kind, ReadResult::request);
  EXPECT_EQ(r.body, "hi");
  client.join();
  close(fds[1]);
}

}  // namespace
}  // namespace attnzoo::server::http
