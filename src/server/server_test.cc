// The HTTP layer before a model is attached (what clients see while `attnzoo serve` loads): real sockets on
// 127.0.0.1, cpp-httplib's client.
#include "server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>

#include "loader/json.h"
#include "server/running_server.h"

namespace attnzoo::server {
namespace {

using Running = testing::RunningServer;

const json::Value* error_of(const httplib::Result& r, json::Value& holder) {
  holder = json::parse(r->body);
  return holder.find("error");
}

TEST(Server, LoadingAnswers503InOpenAiShape) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.model_name = "m";
  o.http_threads = 4;
  Running s(o);
  ASSERT_GT(s.port, 0);
  httplib::Client c("127.0.0.1", s.port);
  json::Value v;

  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(error_of(health, v)->find("message")->as_string(), "the model is still loading");

  auto post = c.Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 503);
  EXPECT_EQ(error_of(post, v)->find("code")->as_int(), 503);

  auto models = c.Get("/v1/models");  // the name is known before the weights are
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(json::parse(models->body).find("data")->as_array().at(0).find("id")->as_string(), "m");

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("vllm:num_requests_running{model_name=\"m\"} 0\n"), std::string::npos);

  auto missing = c.Get("/v2/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(error_of(missing, v)->find("type")->as_string(), "not_found_error");
}

TEST(Server, OversizedBodyIs413BeforeAnyParsing) {
  ServerOptions o;
  o.port = 0;
  o.model_name = "m";
  o.max_body_bytes = 2048;
  o.http_threads = 2;
  Running s(o);
  httplib::Client c("127.0.0.1", s.port);
  auto r = c.Post("/v1/completions", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  json::Value v;
  EXPECT_NE(error_of(r, v)->find("message")->as_string().find("2048 bytes"), std::string::npos);
}

TEST(Server, PortInUseIsANamedError) {
  ServerOptions o;
  o.port = 0;
  o.http_threads = 1;
  Running first(o);
  ServerOptions same = o;
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
