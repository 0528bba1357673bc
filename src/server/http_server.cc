#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <system_error>

#include "server/descriptor_budget.h"

namespace attnzoo::server::http {
namespace {

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

std::string chunk(std::string_view data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + std::string(data) + "\r\n";
}

std::string peer_address(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
  return text;
}

// A connection refused at admission: answered at once, then read and dropped for a moment before it is closed
// (closing with its request unread would reset the connection and could lose the answer), on the accept loop.
struct Refused {
  int fd;
  Clock::time_point until;
};
constexpr size_t kMaxRefused = 256;

}  // namespace

std::string Exchange::head(const Response& r, bool chunked) const {
  std::string h = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  h += "Content-Type: " + r.content_type + "\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  else if (!(streaming_ && req_.http10)) h += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  for (const auto& [name, value] : r.headers) h += name + ": " + value + "\r\n";
  h += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

bool Exchange::respond(const Response& r) {
  answered_ = true;
  const std::string h = head(r, false);
  const bool body = req_.method != "HEAD";
  ok_ = ok_ && conn_.send_all(body ? h + r.body : h, Clock::now() + limits_.write_timeout);
  return ok_;
}

bool Exchange::start_stream(const Response& r) {
  answered_ = streaming_ = true;
  if (req_.http10) keep_alive_ = false;  // no chunked framing: the stream ends when the connection does
  ok_ = ok_ && conn_.send_all(head(r, !req_.http10), Clock::now() + limits_.write_timeout);
  return ok_;
}

bool Exchange::write(std::string_view data) {
  if (data.empty() || !ok_) return ok_;
  ok_ = conn_.send_all(req_.http10 ? std::string(data) : chunk(data), Clock::now() + limits_.write_timeout);
  return ok_;
}

bool Exchange::end_stream() {
  if (ok_ && !req_.http10) ok_ = conn_.send_all("0\r\n\r\n", Clock::now() + limits_.write_timeout);
  return ok_;
}

bool Exchange::client_gone() {
  if (!ok_) return true;
  // The probe a client that only half-closed reads harmlessly: an interim 100 before the answer (HTTP/1.1 clients
  // must skip 1xx responses), an SSE comment line inside a stream. HTTP/1.0 has neither.
  std::string_view probe;
  const std::string comment = chunk(":\n\n");
  if (!req_.http10) probe = streaming_ ? std::string_view(comment) : std::string_view("HTTP/1.1 100 Continue\r\n\r\n");
  if (conn_.peer_gone(probe, Clock::now() + limits_.write_timeout)) ok_ = false;
  return !ok_;
}

Server::Server(ServerOptions options, Handler handler, ErrorBody error_body)
    : options_(std::move(options)), handler_(std::move(handler)), error_body_(std::move(error_body)) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
}

Server::~Server() {
  stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

int Server::bind() {
  std::string notice;
  options_.max_connections = fit_descriptor_limit(options_.max_connections, kMaxRefused, notice);
  options_.max_connections_per_client = std::min(options_.max_connections_per_client, options_.max_connections);
  if (!notice.empty()) std::fprintf(stderr, "attnzoo serve: %s\n", notice.c_str());
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int e = getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found); e != 0)
    throw std::runtime_error("serve: cannot listen on " + where + ": " + gai_strerror(e));
  std::string why = "no address";
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR: a restart need not wait for TIME_WAIT. Not SO_REUSEPORT: a second server on the same port
    // must fail here rather than silently take half the connections.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) throw std::runtime_error("serve: cannot listen on " + where + ": " + why);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(addr).sin6_port
                                          : reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

void Server::run() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || listen_fd_ < 0) return;
    running_ = true;
  }
  std::deque<Refused> refused;
  std::vector<pollfd> fds;
  while (!stopping_) {
    fds.assign({{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}});
    for (const Refused& r : refused) fds.push_back({r.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    const auto now = Clock::now();
    for (size_t i = refused.size(); i-- > 0;) {
      char sink[4096];
      const bool readable = fds[2 + i].revents != 0;
      const ssize_t n = readable ? recv(refused[i].fd, sink, sizeof sink, MSG_DONTWAIT) : -1;
      if ((readable && n == 0) || (n < 0 && readable && errno != EAGAIN) || now >= refused[i].until) {
        close(refused[i].fd);
        refused.erase(refused.begin() + std::ptrdiff_t(i));
      }
    }
    reap_finished();
    if (!(fds[0].revents & POLLIN)) continue;
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
      if (fd < 0) {
        // EAGAIN: all taken. Out of descriptors or memory: the pending connection stays readable, so wait a little
        // rather than spin on it (the next round retries).
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        break;
      }
      const int yes = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // stream events leave as they are written
      if (admit(fd, peer_address(addr))) continue;
      // Refused: 503 at once (the request is not read: its answer cannot depend on it).
      const std::string body = error_body_(503, "too many connections; retry later");
      const std::string answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
      send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);  // a fresh socket's buffer holds it
      shutdown(fd, SHUT_WR);
      if (refused.size() >= kMaxRefused) {
        close(refused.front().fd);
        refused.pop_front();
      }
      refused.push_back({fd, Clock::now() + std::chrono::seconds(1)});
    }
  }
  for (const Refused& r : refused) close(r.fd);
  std::lock_guard lock(mu_);
  running_ = false;
  cv_.notify_all();
}

bool Server::admit(int fd, const std::string& client) {
  std::lock_guard lock(mu_);
  size_t& mine = per_client_[client];
  if (threads_.size() >= options_.max_connections || mine >= options_.max_connections_per_client) {
    if (mine == 0) per_client_.erase(client);
    return false;
  }
  ++mine;
  try {
    std::thread t([this, fd, client] { serve(fd, client); });
    const std::thread::id id = t.get_id();
    threads_.emplace(id, std::move(t));
  } catch (const std::system_error&) {  // out of threads: refused like any excess connection
    if (--mine == 0) per_client_.erase(client);
    return false;
  }
  return true;
}

void Server::reap_finished() {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu_);
    for (const std::thread::id id : finished_) {
      auto it = threads_.find(id);
      done.push_back(std::move(it->second));
      threads_.erase(it);
    }
    finished_.clear();
  }
  for (std::thread& t : done) t.join();  // each has only its last instructions left
}

void Server::answer_error(Connection& conn, bool http10, int status, const std::string& message) {
  Request req;
  req.http10 = http10;
  Exchange ex(conn, req, options_.limits, false);
  Response r;
  r.status = status;
  r.body = error_body_(status, message);
  ex.respond(r);
  conn.linger_close();
}

void Server::serve(int fd, std::string client) {
  {
    Connection conn(fd);
    auto started = Clock::now();
    for (bool more = true; more;) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        open_[fd] = true;
      }
      Request req;
      const ReadResult r = read_request(conn, options_.limits, started, req);
      {
        std::lock_guard lock(mu_);
        open_[fd] = false;
      }
      if (r.kind == ReadResult::closed) break;
      if (r.kind == ReadResult::error) {
        answer_error(conn, req.http10, r.status, r.message);
        break;
      }
      ++handling_;
      Exchange ex(conn, req, options_.limits, req.keep_alive && !draining_);
      bool failed = false;
      try {
        handler_(req, ex);
      } catch (const std::exception& e) {
        failed = true;
        if (!ex.answered()) answer_error(conn, req.http10, 500, e.what());
      }
      if (!failed && !ex.answered() && !ex.closed()) {
        failed = true;
        answer_error(conn, req.http10, 500, "the request got no answer");
      }
      more = !failed && ex.answered() && ex.reusable();
      --handling_;
      started = Clock::now();
    }
    std::lock_guard lock(mu_);
    open_.erase(fd);
  }  // the socket closes here, after it left open_ (stop() must not shut down a reused descriptor)
  std::lock_guard lock(mu_);
  if (--per_client_[client] == 0) per_client_.erase(client);
  finished_.push_back(std::this_thread::get_id());
  cv_.notify_all();
}

void Server::stop() {
  std::unique_lock lock(mu_);
  if (stopping_.exchange(true)) return;
  draining_ = true;
  const char byte = 1;
  (void)!::write(wake_[1], &byte, 1);
  cv_.wait(lock, [&] { return !running_; });
  for (const auto& [fd, reading] : open_)
    if (reading) shutdown(fd, SHUT_RDWR);
  const auto all_ended = [&] { return finished_.size() == threads_.size(); };
  if (!cv_.wait_for(lock, std::chrono::seconds(2), all_ended))
    for (const auto& [fd, reading] : open_) shutdown(fd, SHUT_RDWR);
  cv_.wait(lock, all_ended);
  lock.unlock();
  reap_finished();
}

}  // namespace attnzoo::server::http
