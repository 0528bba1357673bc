// The HTTP layer before a model is attached (what clients see while `attnzoo serve` loads) and while it drains for
// a shutdown: real sockets on 127.0.0.1, raw requests. The hostile-client cases are python/tests/test_serve_http.py.
#include "server/server.h"

#include <gtest/gtest.h>

#include <string>

#include "loader/json.h"
#include "server/running_server.h"
#include "testing/raw_http_client.h"

namespace attnzoo::server {
namespace {

using Running = testing::RunningServer;

struct Answer {
  int status = 0;
  std::string head, body;
};

Answer ask(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  testing::RawClient c(port);
  Answer a;
  if (!c.send_request(method, path, body)) return a;
  c.read_until("");
  const std::string& r = c.received();
  if (r.rfind("HTTP/1.1 ", 0) == 0) a.status = std::stoi(r.substr(9, 3));
  a.head = r.substr(0, r.find("\r\n\r\n"));
  a.body = testing::json_body(r);
  return a;
}

std::string error_field(const Answer& a, const char* field) {
  const json::Value v = json::parse(a.body);
  const json::Value* f = v.find("error")->find(field);
  return f->is_string() ? f->as_string() : std::to_string(f->as_int());
}

ServerOptions options() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.model_name = "m";
  return o;
}

TEST(Server, LoadingAnswers503InOpenAiShape) {
  Running s(options());
  ASSERT_GT(s.port, 0);

  const Answer health = ask(s.port, "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(error_field(health, "message"), "the model is still loading");
  EXPECT_NE(health.head.find("Retry-After: 1"), std::string::npos) << health.head;

  const Answer post = ask(s.port, "POST", "/v1/completions", R"({"prompt": "hi"})");
  EXPECT_EQ(post.status, 503);
  EXPECT_EQ(error_field(post, "code"), "503");

  const Answer models = ask(s.port, "GET", "/v1/models");  // the name is known before the weights are
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body).find("data")->as_array().at(0).find("id")->as_string(), "m");

  const Answer metrics = ask(s.port, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("vllm:num_requests_running{model_name=\"m\"} 0\n"), std::string::npos);

  const Answer missing = ask(s.port, "GET", "/v2/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_field(missing, "type"), "not_found_error");
  EXPECT_EQ(ask(s.port, "GET", "/v1/completions").status, 405);
}

TEST(Server, DrainingAnswers503AndClosesConnections) {
  Running s(options());
  s.server.drain();
  const Answer health = ask(s.port, "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(error_field(health, "message"), "the server is shutting down");
  EXPECT_NE(health.head.find("Connection: close"), std::string::npos) << health.head;
  EXPECT_EQ(ask(s.port, "POST", "/v1/chat/completions", "{}").status, 503);
  EXPECT_EQ(s.server.in_flight(), 0u);
}

TEST(Server, OversizedBodyIs413BeforeAnyParsing) {
  ServerOptions o = options();
  o.max_body_bytes = 2048;
  Running s(o);
  const Answer r = ask(s.port, "POST", "/v1/completions", std::string(4096, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(error_field(r, "message").find("2048 bytes"), std::string::npos);
}

TEST(Server, PortInUseIsANamedError) {
  Running first(options());
  ServerOptions same = options();
  same.port = first.port;
  Server second(same);
  EXPECT_THROW(
      {
        try {
          second.bind();
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port)), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
}

}  // namespace
}  // namespace attnzoo::server
