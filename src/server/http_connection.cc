#include "server/http_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace attnzoo::server::http {
namespace {

constexpr size_t kReadChunk = 16 << 10;
// A body of --max-body-bytes grows the buffer to a few MiB; a keep-alive connection then idles with that much unless
// it is let go. Up to this much is kept between requests (no reallocation for ordinary ones).
constexpr size_t kKeptCapacity = 64 << 10;

int millis_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return int(std::clamp<long long>(left, 0, 1 << 30));
}

// poll() for `events` until `deadline`, through signals; the revents, 0 on timeout.
short wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, millis_until(deadline));
    if (r > 0) return p.revents;
    if (r == 0) return 0;
    if (errno != EINTR) return POLLERR;
  }
}

}  // namespace

Connection::~Connection() { close(fd_); }

Connection::Fill Connection::fill(Clock::time_point deadline) {
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {  // keep the buffer from creeping: drop what was consumed
    buffer_.erase(0, start_);
    start_ = 0;
    if (buffer_.capacity() > kKeptCapacity && buffer_.size() <= kKeptCapacity / 2)
      std::string(buffer_).swap(buffer_);  // (assigning a short string would keep the capacity)
  }
  for (;;) {
    const short ev = wait_for(fd_, POLLIN, deadline);
    if (ev == 0) return Fill::timeout;
    const size_t old = buffer_.size();
    buffer_.resize(old + kReadChunk);
    const ssize_t n = recv(fd_, buffer_.data() + old, kReadChunk, MSG_DONTWAIT);
    buffer_.resize(old + size_t(std::max<ssize_t>(n, 0)));
    if (n > 0) return Fill::data;
    if (n == 0) return Fill::eof;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Fill::error;
  }
}

void Connection::consume(size_t n) {
  start_ = std::min(buffer_.size(), start_ + n);
  if (start_ == buffer_.size()) {
    if (buffer_.capacity() > kKeptCapacity) std::string().swap(buffer_);
    else buffer_.clear();
    start_ = 0;
  }
}

bool Connection::send_all(std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const short ev = wait_for(fd_, POLLOUT, deadline);
    if (ev == 0 || (ev & (POLLERR | POLLHUP | POLLNVAL))) return false;
  }
  return true;
}

void Connection::linger_close() {
  shutdown(fd_, SHUT_WR);
  // Bounded both ways: a client that keeps sending is cut after a second or a mebibyte.
  const auto until = Clock::now() + std::chrono::seconds(1);
  char sink[kReadChunk];
  for (size_t dropped = 0; dropped < (1 << 20);) {
    if (!(wait_for(fd_, POLLIN, until) & (POLLIN | POLLHUP | POLLERR))) return;
    const ssize_t n = recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
    dropped += size_t(std::max<ssize_t>(n, 0));
  }
}

bool Connection::peer_gone(std::string_view probe, Clock::time_point deadline) {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  if (!(p.revents & POLLRDHUP) || probed_) return false;
  if (probe.empty()) return true;
  const ssize_t n = send(fd_, probe.data(), probe.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  probed_ = true;
  return size_t(n) < probe.size() && !send_all(probe.substr(size_t(n)), deadline);
}

}  // namespace attnzoo::server::http
