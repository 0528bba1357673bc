#include "server/http_request.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace attnzoo::server::http {
namespace {

ReadResult fail(int status, std::string message) { return {ReadResult::error, status, std::move(message)}; }
ReadResult ok() { return {ReadResult::request, 0, {}}; }
ReadResult closed() { return {ReadResult::closed, 0, {}}; }

// RFC 9110 token characters (method and field names).
bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Visible for error messages: control bytes as \xNN, at most 64 characters.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return s.size() > 64 ? out + "..." : out;
}

// The end of the line starting at `from` in `text` (index of its '\n'), or npos.
size_t line_end(std::string_view text, size_t from) { return text.find('\n', from); }

// A line without its terminator: "\r\n", or a bare "\n" (RFC 9112 2.2 lets a recipient accept it).
std::string_view strip_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Waits for `conn` to buffer at least `want` bytes.
enum class Wait { ok, eof, timeout, error };
Wait fill_to(Connection& conn, size_t want, Clock::time_point deadline) {
  while (conn.buffered().size() < want) {
    switch (conn.fill(deadline)) {
      case Connection::Fill::data: break;
      case Connection::Fill::eof: return Wait::eof;
      case Connection::Fill::timeout: return Wait::timeout;
      case Connection::Fill::error: return Wait::error;
    }
  }
  return Wait::ok;
}

ReadResult parse_request_line(std::string_view line, const Limits& limits, Request& out) {
  if (line.size() > limits.max_request_line_bytes)
    return fail(414, "request line longer than " + std::to_string(limits.max_request_line_bytes) + " bytes");
  const size_t a = line.find(' '), b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
    return fail(400, "malformed request line '" + shown(line) + "' (want METHOD TARGET HTTP/1.1)");
  const std::string_view method = line.substr(0, a), target = line.substr(a + 1, b - a - 1),
                         version = line.substr(b + 1);
  if (!is_token(method)) return fail(400, "malformed method '" + shown(method) + "'");
  if (target.empty() || (target[0] != '/' && target != "*"))
    return fail(400, "request target '" + shown(target) + "' must be a path starting with '/'");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return fail(400, "request target '" + shown(target) + "' holds a control byte");
  if (version == "HTTP/1.1") {
    out.http10 = false;
  } else if (version == "HTTP/1.0") {
    out.http10 = true;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && is_digit(version[5]) && version[6] == '.' &&
             is_digit(version[7])) {
    return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported (HTTP/1.1 is)");
  } else {
    return fail(400, "malformed HTTP version '" + shown(version) + "'");
  }
  out.method = std::string(method);
  out.target = std::string(target);
  out.path = out.target.substr(0, out.target.find('?'));
  return ok();
}

// One "name: value" line into `fields`; 400 for what RFC 9112 5 forbids.
ReadResult parse_field(std::string_view line, std::vector<std::pair<std::string, std::string>>& fields) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "obsolete line folding in the header ('" + shown(line) + "')");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return fail(400, "header line without a colon: '" + shown(line) + "'");
  const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
  if (!is_token(name)) return fail(400, "malformed header name '" + shown(name) + "'");
  for (char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      return fail(400, "header " + std::string(name) + " holds a control byte");
  fields.emplace_back(lower(name), std::string(value));
  return ok();
}

// The header block (request line, fields, empty line) as one view of the buffer, within the limits and deadline.
ReadResult read_header_block(Connection& conn, const Limits& limits, Clock::time_point deadline, size_t& length) {
  // Empty lines before a request line are ignored (RFC 9112 2.2), as a client may send one after a body.
  for (;;) {
    std::string_view b = conn.buffered();
    size_t skip = 0;
    while (skip < b.size() && (b[skip] == '\r' || b[skip] == '\n') && skip < 8) ++skip;
    conn.consume(skip);
    if (!conn.buffered().empty()) break;
    const Connection::Fill f = conn.fill(deadline);
    if (f != Connection::Fill::data) return closed();  // nothing of a request came: close quietly
  }
  size_t scanned = 0;
  for (;;) {
    const std::string_view b = conn.buffered();
    for (size_t nl = line_end(b, scanned); nl != std::string_view::npos; nl = line_end(b, scanned)) {
      if (scanned == 0 && nl > limits.max_request_line_bytes)
        return fail(414, "request line longer than " + std::to_string(limits.max_request_line_bytes) + " bytes");
      const std::string_view line = strip_cr(b.substr(scanned, nl - scanned));
      scanned = nl + 1;
      if (line.empty()) {
        length = scanned;
        return scanned > limits.max_header_bytes
                   ? fail(431, "request header larger than " + std::to_string(limits.max_header_bytes) + " bytes")
                   : ok();
      }
    }
    if (line_end(b, 0) == std::string_view::npos && b.size() > limits.max_request_line_bytes)
      return fail(414, "request line longer than " + std::to_string(limits.max_request_line_bytes) + " bytes");
    if (b.size() > limits.max_header_bytes)
      return fail(431, "request header larger than " + std::to_string(limits.max_header_bytes) + " bytes");
    switch (conn.fill(deadline)) {
      case Connection::Fill::data: continue;
      case Connection::Fill::timeout: return fail(408, "the request header did not arrive in time");
      default: return closed();  // the client left mid-header: nobody to answer
    }
  }
}

ReadResult parse_header_block(std::string_view block, const Limits& limits, Request& out) {
  if (block.find('\0') != std::string_view::npos) return fail(400, "NUL byte in the request header");
  size_t at = 0, nl = line_end(block, 0);
  ReadResult r = parse_request_line(strip_cr(block.substr(0, nl)), limits, out);
  if (r.kind != ReadResult::request) return r;
  for (at = nl + 1; (nl = line_end(block, at)) != std::string_view::npos; at = nl + 1) {
    const std::string_view line = strip_cr(block.substr(at, nl - at));
    if (line.empty()) break;
    if (line.find('\r') != std::string_view::npos) return fail(400, "bare CR in the request header");
    if (out.headers.size() >= limits.max_header_fields)
      return fail(431, "more than " + std::to_string(limits.max_header_fields) + " header fields");
    if (r = parse_field(line, out.headers); r.kind != ReadResult::request) return r;
  }
  return r;
}

// Content-Length: every occurrence (and every element of a list) the same decimal number (RFC 9112 6.3).
ReadResult content_length(const Request& req, const Limits& limits, bool& present, uint64_t& length) {
  present = false;
  for (const auto& [name, value] : req.headers) {
    if (name != "content-length") continue;
    std::string_view rest = value;
    do {
      const size_t comma = rest.find(',');
      const std::string_view item = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (item.empty() || item.size() > 19 || !std::all_of(item.begin(), item.end(), is_digit))
        return fail(400, "Content-Length '" + shown(value) + "' is not a non-negative decimal number");
      const uint64_t n = std::stoull(std::string(item));
      if (present && n != length) return fail(400, "conflicting Content-Length headers");
      present = true;
      length = n;
    } while (!rest.empty());
  }
  if (present && length > limits.max_body_bytes)
    return fail(413, "request body larger than the limit of " + std::to_string(limits.max_body_bytes) + " bytes");
  return ok();
}

ReadResult too_large(const Limits& limits) {
  return fail(413, "request body larger than the limit of " + std::to_string(limits.max_body_bytes) + " bytes");
}

ReadResult wait_failure(Wait w) {
  return w == Wait::timeout ? fail(408, "the request body did not arrive in time") : closed();
}

// A line of the chunked framing (size line or trailer), at most `max` bytes.
ReadResult chunk_line(Connection& conn, size_t max, Clock::time_point deadline, std::string& line) {
  size_t scanned = 0;
  for (;;) {
    const std::string_view b = conn.buffered();
    const size_t nl = b.find('\n', scanned);
    if (nl != std::string_view::npos && nl <= max) {
      line = std::string(strip_cr(b.substr(0, nl)));
      conn.consume(nl + 1);
      return ok();
    }
    if (b.size() > max) return fail(400, "chunked body: a size or trailer line longer than " + std::to_string(max) + " bytes");
    scanned = b.size();
    if (const Wait w = fill_to(conn, b.size() + 1, deadline); w != Wait::ok) return wait_failure(w);
  }
}

ReadResult read_chunked(Connection& conn, const Limits& limits, Clock::time_point deadline, Request& out) {
  size_t trailer_bytes = 0;
  std::string line;
  for (;;) {
    if (ReadResult r = chunk_line(conn, 1024, deadline, line); r.kind != ReadResult::request) return r;
    const std::string_view hex = trim(std::string_view(line).substr(0, line.find(';')));
    if (hex.empty() || hex.size() > 15 || !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      return fail(400, "chunked body: malformed chunk size '" + shown(line) + "'");
    const uint64_t size = std::stoull(std::string(hex), nullptr, 16);
    if (size == 0) break;
    if (size > limits.max_body_bytes - out.body.size()) return too_large(limits);
    if (const Wait w = fill_to(conn, size_t(size) + 2, deadline); w != Wait::ok) return wait_failure(w);
    const std::string_view b = conn.buffered();
    out.body.append(b.substr(0, size_t(size)));
    const std::string_view end = b.substr(size_t(size), 2);
    if (end != "\r\n" && end.substr(0, 1) != "\n") return fail(400, "chunked body: a chunk does not end with CRLF");
    conn.consume(size_t(size) + (end == "\r\n" ? 2 : 1));
  }
  for (;;) {  // trailer fields: bounded like the header, then dropped
    if (ReadResult r = chunk_line(conn, limits.max_header_bytes, deadline, line); r.kind != ReadResult::request) return r;
    if (line.empty()) return ok();
    trailer_bytes += line.size() + 2;
    if (trailer_bytes > limits.max_header_bytes) return fail(431, "chunked body: trailer larger than the header limit");
    if (line.find('\0') != std::string::npos || line.find(':') == std::string::npos)
      return fail(400, "chunked body: malformed trailer line '" + shown(line) + "'");
  }
}

bool has_token(const std::string* value, std::string_view token) {
  if (!value) return false;
  std::string_view rest = *value;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (lower(trim(rest.substr(0, comma))) == token) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return false;
}

}  // namespace

const std::string* Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

ReadResult read_request(Connection& conn, const Limits& limits, Clock::time_point started, Request& out) {
  out = Request{};
  size_t length = 0;
  ReadResult r = read_header_block(conn, limits, started + limits.header_timeout, length);
  if (r.kind != ReadResult::request) return r;
  r = parse_header_block(conn.buffered().substr(0, length), limits, out);
  conn.consume(length);
  if (r.kind != ReadResult::request) return r;
  out.keep_alive = !out.http10 && !has_token(out.header("connection"), "close");

  bool has_length = false;
  uint64_t length_value = 0;
  const std::string* te = out.header("transfer-encoding");
  // A second Transfer-Encoding field could make another parser see another framing (request smuggling).
  if (std::count_if(out.headers.begin(), out.headers.end(), [](const auto& h) { return h.first == "transfer-encoding"; }) > 1)
    return fail(400, "more than one Transfer-Encoding field");
  if (te && out.http10) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (te && out.header("content-length")) return fail(400, "both Transfer-Encoding and Content-Length");
  if (te && lower(*te) != "chunked") return fail(501, "Transfer-Encoding '" + shown(*te) + "' is not supported (chunked is)");
  if (!te) {
    if (r = content_length(out, limits, has_length, length_value); r.kind != ReadResult::request) return r;
    if (!has_length && (out.method == "POST" || out.method == "PUT" || out.method == "PATCH"))
      return fail(411, out.method + " needs a Content-Length or a chunked body");
  }
  const auto deadline = Clock::now() + limits.body_timeout;
  const bool body_pending = te ? conn.buffered().empty() : conn.buffered().size() < length_value;
  if (body_pending && !out.http10 && has_token(out.header("expect"), "100-continue") &&
      !conn.send_all("HTTP/1.1 100 Continue\r\n\r\n", Clock::now() + limits.write_timeout))
    return closed();
  if (te) return read_chunked(conn, limits, deadline, out);
  if (const Wait w = fill_to(conn, size_t(length_value), deadline); w != Wait::ok) return wait_failure(w);
  out.body = std::string(conn.buffered().substr(0, size_t(length_value)));
  conn.consume(size_t(length_value));
  return r;
}

}  // namespace attnzoo::server::http
