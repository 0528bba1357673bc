#include "server/connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <httplib.h>
#include <string>

namespace attnzoo::server {
namespace {

// The numeric host and the port of a socket address, as cpp-httplib fills Request::remote_addr / local_addr.
bool host_and_port(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = h;
  port = std::atoi(p);
  return true;
}

bool is_connection(int fd, const httplib::Request& req) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || !host_and_port(addr, len, host, port) ||
      port != req.local_port || host != req.local_addr)
    return false;
  len = sizeof addr;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && host_and_port(addr, len, host, port) &&
         port == req.remote_port && host == req.remote_addr;
}

int find_connection(const httplib::Request& req) {
  if (req.remote_port <= 0 || req.local_port <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    char target[64];
    const std::string link = "/proc/self/fd/" + std::string(e->d_name);
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0 || std::string(target, size_t(n)).rfind("socket:", 0) != 0) continue;
    if (is_connection(int(fd), req)) {
      found = int(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

// Later cpp-httplib versions answer the question themselves (templates: the member is looked up only there).
template <class R>
constexpr bool library_knows() {
  return requires(const R& r) { r.is_connection_closed(); };
}
template <class R>
bool library_says_closed(const R& req) {
  if constexpr (library_knows<R>()) return req.is_connection_closed();
  return false;
}

}  // namespace

ConnectionWatch::ConnectionWatch(const httplib::Request& req) : req_(req) {
  if (!library_knows<httplib::Request>()) fd_ = find_connection(req);
}

bool ConnectionWatch::closed() const {
  if (library_knows<httplib::Request>()) return library_says_closed(req_);
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  // Readable without a hang-up: a pipelined next request is data (open); zero bytes is the peer's FIN.
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace attnzoo::server
