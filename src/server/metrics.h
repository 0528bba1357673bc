#pragma once
// GET /metrics: Prometheus text exposition with vLLM's metric names, so dashboards and `vllm bench`-style tools
// read it unchanged. Request latencies are observed here, from each request's last output; pool and scheduler
// numbers come from EngineStats at scrape time.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "engine/request.h"

namespace attnzoo::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // _bucket{le=...} (cumulative), _sum, _count lines for `name` with the label set `labels` ("k=\"v\"").
  void write(std::string& out, const std::string& name, const std::string& labels) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  // A request's last output (finished == true) and the times of one sample's tokens: TTFT, TPOT, ITL, e2e.
  void observe_finished(const RequestOutput& out, const std::vector<EngineClock::time_point>& token_times);
  std::string text(const EngineStats& stats, const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, itl_, e2e_, prompt_tokens_, generation_tokens_;
};

}  // namespace attnzoo::server
