#pragma once
// Whether the client of a request being handled has hung up. cpp-httplib hands a handler no socket before its
// Request::is_connection_closed (Debian 12 ships 0.11, which lacks it), so the connection's socket is found by its
// addresses: the handler's thread holds the connection open until the handler returns, so the socket whose local
// and peer address equal the request's is that connection's and stays valid while the handler runs.
namespace httplib {
struct Request;
}

namespace attnzoo::server {

class ConnectionWatch {
 public:
  explicit ConnectionWatch(const httplib::Request& req);
  // True once the peer closed or reset the connection. Never blocks; false when the socket was not found.
  bool closed() const;

 private:
  const httplib::Request& req_;
  int fd_ = -1;
};

}  // namespace attnzoo::server
