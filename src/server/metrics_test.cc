#include "server/metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "loader/json.h"
#include "server/api_error.h"

namespace attnzoo::server {
namespace {

std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(ServerMetrics, HistogramBucketsAreCumulativeWithSumAndCount) {
  Histogram h({0.1, 1.0});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.observe(v);
  std::string out;
  h.write(out, "x", "m=\"a\"");
  const auto s = samples(out);
  EXPECT_EQ(s.at("x_bucket{m=\"a\",le=\"0.1\"}"), 2);  // le is inclusive, as Prometheus defines it
  EXPECT_EQ(s.at("x_bucket{m=\"a\",le=\"1\"}"), 3);
  EXPECT_EQ(s.at("x_bucket{m=\"a\",le=\"+Inf\"}"), 4);
  EXPECT_DOUBLE_EQ(s.at("x_sum{m=\"a\"}"), 3.65);
  EXPECT_EQ(s.at("x_count{m=\"a\"}"), 4);
}

TEST(ServerMetrics, VllmNamesFromStatsAndRequests) {
  ServerMetrics m;
  RequestOutput out;
  out.finished = true;
  out.arrival = EngineClock::time_point{} + std::chrono::seconds(10);
  out.first_token = out.arrival + std::chrono::milliseconds(250);
  out.finish = out.arrival + std::chrono::milliseconds(1250);
  out.usage.prompt_tokens = 7;
  out.usage.completion_tokens = 5;
  std::vector<EngineClock::time_point> times;
  for (int i = 0; i < 5; ++i) times.push_back(*out.first_token + std::chrono::milliseconds(250 * i));
  m.observe_finished(out, times);
  EngineStats stats;
  stats.running_requests = 3;
  stats.waiting_requests = 2;
  stats.kv_cache_usage = 0.25;
  stats.prefix_cache_queries = 100;
  stats.prefix_cache_hits = 40;
  stats.preemptions = 6;
  stats.prompt_tokens = 70;
  stats.generation_tokens = 50;
  stats.speculative.drafts = 9;
  stats.speculative.draft_tokens = 27;
  stats.speculative.accepted_tokens = 12;
  stats.speculative.accepted_per_position = {7, 4, 1};
  const auto s = samples(m.text(stats, "my \"model\""));
  const std::string l = "{model_name=\"my \\\"model\\\"\"}";
  EXPECT_EQ(s.at("vllm:num_requests_running" + l), 3);
  EXPECT_EQ(s.at("vllm:num_requests_waiting" + l), 2);
  EXPECT_EQ(s.at("vllm:kv_cache_usage_perc" + l), 0.25);
  EXPECT_EQ(s.at("vllm:prefix_cache_queries_total" + l), 100);
  EXPECT_EQ(s.at("vllm:prefix_cache_hits_total" + l), 40);
  EXPECT_EQ(s.at("vllm:num_preemptions_total" + l), 6);
  EXPECT_EQ(s.at("vllm:prompt_tokens_total" + l), 70);
  EXPECT_EQ(s.at("vllm:generation_tokens_total" + l), 50);
  EXPECT_EQ(s.at("vllm:spec_decode_num_drafts_total" + l), 9);
  EXPECT_EQ(s.at("vllm:spec_decode_num_draft_tokens_total" + l), 27);
  EXPECT_EQ(s.at("vllm:spec_decode_num_accepted_tokens_total" + l), 12);
  EXPECT_EQ(s.at("vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"my \\\"model\\\"\",position=\"1\"}"), 4);
  EXPECT_DOUBLE_EQ(s.at("vllm:time_to_first_token_seconds_sum" + l), 0.25);
  EXPECT_DOUBLE_EQ(s.at("vllm:e2e_request_latency_seconds_sum" + l), 1.25);
  EXPECT_DOUBLE_EQ(s.at("vllm:time_per_output_token_seconds_sum" + l), 0.25);  // 1 s over the 4 tokens after the first
  EXPECT_EQ(s.at("vllm:inter_token_latency_seconds_count" + l), 4);
}

TEST(ApiError, OpenAiErrorShape) {
  const json::Value v = json::parse(error_body(bad_request("n: must be in [1, 16], got 99", "n")));
  const json::Value* e = v.find("error");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->find("message")->as_string(), "n: must be in [1, 16], got 99");
  EXPECT_EQ(e->find("type")->as_string(), "invalid_request_error");
  EXPECT_EQ(e->find("param")->as_string(), "n");
  EXPECT_EQ(e->find("code")->as_int(), 400);
  EXPECT_TRUE(json::parse(error_body(ApiError(503, "server_error", "loading"))).find("error")->find("param")->is_null());
}

}  // namespace
}  // namespace attnzoo::server
