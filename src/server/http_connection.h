#pragma once
// One accepted TCP connection of the HTTP server: buffered reads and whole writes, each bounded by a deadline so a
// client that stalls (slow headers, a body that never comes, a reader that stops reading) costs a bounded time.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace attnzoo::server::http {

using Clock = std::chrono::steady_clock;

class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }

  enum class Fill { data, eof, timeout, error };
  // Appends what the socket has (waiting until `deadline` for at least one byte).
  Fill fill(Clock::time_point deadline);
  // Unconsumed bytes received so far; consume(n) drops the first n of them.
  std::string_view buffered() const { return std::string_view(buffer_).substr(start_); }
  void consume(size_t n);
  // The bytes the buffer holds allocated: what an idle keep-alive connection costs (at most 64 KiB with nothing
  // buffered, whatever body came before).
  size_t capacity() const { return buffer_.capacity(); }

  // Writes all of `data` by `deadline`; false when the peer is gone or too slow.
  bool send_all(std::string_view data, Clock::time_point deadline);

  // A connection answered with an error mid-request (its unread body still arriving): stop sending, then read and
  // drop what comes for a moment, so closing does not reset the connection before the client reads the answer.
  void linger_close();

  // Whether the peer hung up, without blocking. A FIN alone may be a half-close (the client still reads): the first
  // time one is seen, `probe` is written; a peer that really closed answers it with a reset, seen by the next call.
  // A probe the socket's full buffer cannot take is tried again at the next call; one taken in part is finished by
  // `deadline` (the rest of a chunk left unsent would break the framing of everything after it).
  bool peer_gone(std::string_view probe, Clock::time_point deadline);

 private:
  int fd_;
  std::string buffer_;
  size_t start_ = 0;
  bool probed_ = false;
};

}  // namespace attnzoo::server::http
