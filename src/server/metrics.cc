#include "server/metrics.h"

#include <algorithm>
#include <chrono>

#include "loader/json_writer.h"

namespace attnzoo::server {
namespace {

// vLLM's bucket bounds for the same histograms.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> tpot_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_buckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
          960.0, 1920.0, 7680.0};
}
std::vector<double> token_count_buckets() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};
}

double seconds(EngineClock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string prom_number(double v) { return json::number_text(v); }

void head(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + prom_number(v) + "\n";
}

// A prometheus_client counter: TYPE names the family, the sample carries _total.
void counter(std::string& out, const std::string& name, const std::string& labels, double v, const char* help) {
  head(out, name, "counter", help);
  sample(out, name + "_total", labels, v);
}

void gauge(std::string& out, const std::string& name, const std::string& labels, double v, const char* help) {
  head(out, name, "gauge", help);
  sample(out, name, labels, v);
}

std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? prom_number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + prom_number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_(ttft_buckets()),
      tpot_(tpot_buckets()),
      itl_(tpot_buckets()),
      e2e_(e2e_buckets()),
      prompt_tokens_(token_count_buckets()),
      generation_tokens_(token_count_buckets()) {}

void ServerMetrics::observe_finished(const RequestOutput& out, const std::vector<EngineClock::time_point>& times) {
  std::lock_guard lock(mu_);
  if (out.finish) e2e_.observe(seconds(*out.finish - out.arrival));
  if (out.first_token) ttft_.observe(seconds(*out.first_token - out.arrival));
  // Time per output token of the request (vLLM: decode time over the tokens after the first), and each gap
  // between consecutive tokens of one sample.
  if (out.first_token && out.finish && times.size() > 1)
    tpot_.observe(seconds(*out.finish - *out.first_token) / double(times.size() - 1));
  for (size_t i = 1; i < times.size(); ++i) itl_.observe(seconds(times[i] - times[i - 1]));
  prompt_tokens_.observe(double(out.usage.prompt_tokens));
  generation_tokens_.observe(double(out.usage.completion_tokens));
}

std::string ServerMetrics::text(const EngineStats& s, const std::string& model_name) const {
  const std::string labels = "model_name=\"" + label_value(model_name) + "\"";
  std::string out;
  gauge(out, "vllm:num_requests_running", labels, double(s.running_requests), "Number of requests in model execution batches.");
  gauge(out, "vllm:num_requests_waiting", labels, double(s.waiting_requests), "Number of requests waiting to be processed.");
  gauge(out, "vllm:kv_cache_usage_perc", labels, s.kv_cache_usage, "KV-cache usage. 1 means 100 percent usage.");
  counter(out, "vllm:prefix_cache_queries", labels, double(s.prefix_cache_queries),
          "Prefix cache queries, in terms of number of queried tokens.");
  counter(out, "vllm:prefix_cache_hits", labels, double(s.prefix_cache_hits),
          "Prefix cache hits, in terms of number of cached tokens.");
  counter(out, "vllm:num_preemptions", labels, double(s.preemptions), "Cumulative number of preemption from the engine.");
  counter(out, "vllm:prompt_tokens", labels, double(s.prompt_tokens), "Number of prefill tokens processed.");
  counter(out, "vllm:generation_tokens", labels, double(s.generation_tokens), "Number of generation tokens processed.");
  const SpeculativeStats& spec = s.speculative;
  counter(out, "vllm:spec_decode_num_drafts", labels, double(spec.drafts), "Number of spec decoding drafts.");
  counter(out, "vllm:spec_decode_num_draft_tokens", labels, double(spec.draft_tokens), "Number of draft tokens.");
  counter(out, "vllm:spec_decode_num_accepted_tokens", labels, double(spec.accepted_tokens), "Number of accepted tokens.");
  head(out, "vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.");
  for (size_t pos = 0; pos < spec.accepted_per_position.size(); ++pos)
    sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", labels + ",position=\"" + std::to_string(pos) + "\"",
           double(spec.accepted_per_position[pos]));
  head(out, "vllm:request_success", "counter", "Count of successfully processed requests.");
  sample(out, "vllm:request_success_total", labels + ",finished_reason=\"finished\"", double(s.finished_requests));
  sample(out, "vllm:request_success_total", labels + ",finished_reason=\"abort\"", double(s.aborted_requests));
  std::lock_guard lock(mu_);
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    head(out, name, "histogram", help);
    h.write(out, name, labels);
  };
  histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
  histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpot_);
  histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_);
  histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2e_);
  histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_);
  histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", generation_tokens_);
  return out;
}

}  // namespace attnzoo::server
