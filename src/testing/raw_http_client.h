#pragma once
// For the server tests: a plain blocking HTTP/1.1 client on a socket of its own, so a test can send exactly the bytes
// it likes and hang up whenever it likes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

namespace attnzoo::testing {

// A plain blocking HTTP/1.1 client on a socket of its own, so a test can hang up whenever it likes.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { hang_up(); }
  bool send_request(const std::string& method, const std::string& path, const std::string& body) {
    return send_raw(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                    "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  bool send_raw(const std::string& all) {
    size_t sent = 0;
    while (connected_ && sent < all.size()) {
      const ssize_t n = send(fd_, all.data() + sent, all.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += size_t(n);
    }
    return connected_;
  }
  // Reads until `until` appears in what was received (empty: until the server closes); false on EOF first.
  bool read_until(const std::string& until) {
    // A server that never answers fails the test after 10 s instead of hanging it.
    const timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char buf[4096];
    while (until.empty() || received_.find(until) == std::string::npos) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return until.empty();
      received_.append(buf, size_t(n));
    }
    return true;
  }
  void hang_up() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

inline std::string json_body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

}  // namespace attnzoo::testing
