#pragma once
// A strict HTTP/1.1 request reader (RFC 9112) with every size and time a client controls bounded: the request line,
// the header block (bytes and fields), the body for either framing (Content-Length, refused from the header alone
// when too large; chunked, counted as it arrives), and deadlines for the headers and the body. Anything a lenient
// parser would have to guess about (conflicting lengths, a line without a colon, NUL bytes, obsolete line folding,
// both framings at once) is refused with 400, as request smuggling defences require.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_connection.h"

namespace attnzoo::server::http {

struct Limits {
  size_t max_request_line_bytes = 8 << 10;  // 414 beyond
  size_t max_header_bytes = 32 << 10;       // request line + header fields (+ chunked trailers); 431 beyond
  size_t max_header_fields = 100;           // 431 beyond
  size_t max_body_bytes = 4 << 20;          // 413 beyond, whatever the framing
  // From the connection's opening (or its previous response) to the end of the headers: 408 when some of the
  // request came, a silent close when none did (an idle keep-alive connection).
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};   // the end of the headers to the end of the body; 408 beyond
  std::chrono::milliseconds write_timeout{30'000};  // each response write; the connection is dropped beyond
};

struct Request {
  std::string method;
  std::string target;  // as sent: path and query, not percent-decoded
  std::string path;    // the target up to '?'
  bool http10 = false;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"

  const std::string* header(std::string_view lower_name) const;
};

// What reading one request gave: a request, nothing (the peer closed or stayed idle: close quietly), or an error
// to answer (after which the connection closes: its framing can no longer be trusted).
struct ReadResult {
  enum Kind { request, closed, error } kind = closed;
  int status = 0;  // for error: 400, 408, 411, 413, 414, 431, 501, 505
  std::string message;
};

// Reads the next request from `conn` into `out`. `started` is when the connection opened or last answered.
ReadResult read_request(Connection& conn, const Limits& limits, Clock::time_point started, Request& out);

}  // namespace attnzoo::server::http
