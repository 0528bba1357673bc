// attnzoo serve: the OpenAI-compatible HTTP server over the serving engine. It listens first (GET /health is
// 503 while the model loads), prints "listening on http://HOST:PORT" (the port actually bound, for --port 0),
// then "ready" once requests are taken. SIGINT / SIGTERM drain it: new requests (and GET /health) get 503, requests
// in flight get up to --shutdown-grace-seconds to finish, what is left is aborted (503 / an error event), exit 0.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <pthread.h>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/speculative_flags.h"
#include "cli/usage.h"
#include "core/batch_invariance.h"
#include "core/error.h"
#include "engine/chat_turns.h"
#include "engine/engine.h"
#include "engine/stop.h"
#include "layers/matmul_precision.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/model_device.h"
#include "server/server.h"
#include "server/tool_request.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

// Threads that a library started before run_serve blocked the stop signals (OpenBLAS starts its pool when the
// program loads) still take them; with the default action there, SIGTERM killed the process instead of draining it
// (seen in 8 of 12 stops right after start). Caught there, the signal is sent on to the main thread, where it is
// blocked and so waits for sigwait.
pthread_t g_serve_thread;
void forward_stop_signal(int sig) { pthread_kill(g_serve_thread, sig); }

const char* kUsage =
    "usage: attnzoo serve -m DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]\n"
    "         [--max-num-seqs 64] [--max-num-batched-tokens 2048] [--max-model-len N] [--no-chunked-prefill]\n"
    "         [--kv-cache-memory BYTES] [--kv-cache-dtype auto|float32|bfloat16|float16|int8|fp8] [--block-size 16]\n"
    "         [--device auto|cpu|cuda[:N]] [--gpu-memory-utilization 0.9]\n"
    "         [--no-prefix-caching] [--dtype auto|float32|bfloat16] [--matmul-precision auto|highest|medium]\n"
    "         [--batch-invariant]\n"
    "         [--max-waiting-requests 256] [--max-n 16] [--max-logprobs 20] [--max-logit-bias 1024]\n"
    "         [--max-stop 16] [--max-stop-bytes 256] [--max-stop-token-ids 256] [--max-body-values 65536]\n"
    "         [--max-body-bytes 4194304] [--reasoning-parser qwen3|deepseek_r1|openai_gptoss]\n"
    "         [--tool-call-parser hermes|llama3_json|mistral|openai|deepseek_v3|deepseek_v31|kimi_k2|pythonic]\n"
    "         [--max-connections 1024] [--max-connections-per-client N] [--header-timeout-seconds 10]\n"
    "         [--shutdown-grace-seconds 30]\n"
    "         [--speculative ngram|draft --num-speculative-tokens K [--prompt-lookup-max N] [--prompt-lookup-min N]\n"
    "          [--draft-model DIR]]";

struct ServeArgs {
  std::string model, dtype = "auto", kv_cache_dtype = "auto", device = "auto";
  double gpu_memory_utilization = 0.9;
  server::ServerOptions server;
  EngineOptions engine;
  std::optional<int64_t> kv_cache_memory, block_size;
  bool prefix_caching = true;
  SpeculativeOptions speculative;
  bool speculative_flags = false;
  std::optional<int64_t> max_connections_per_client;
  double shutdown_grace_seconds = 30;
};

ServeArgs parse_args(const std::vector<std::string>& args) {
  ServeArgs a;
  a.engine.max_waiting_requests = 256;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    auto integer = [&]() { return parse_number<int64_t>(s, value()); };
    // Checked before narrowing: int(2^32 + 1) would be port 1, size_t(-1) passes any lower bound.
    auto integer_in = [&](int64_t lo, int64_t hi) {
      const int64_t v = integer();
      if (v < lo || v > hi)
        throw ArgumentError(s + ": must be " +
                            (hi == INT64_MAX ? "at least " + std::to_string(lo)
                                             : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]") +
                            ", got " + std::to_string(v));
      return v;
    };
    auto seconds = [&]() {
      const double v = parse_number<double>(s, value());
      if (!(v >= 0 && v <= 86400)) throw ArgumentError(s + ": must be in [0, 86400] seconds");
      return v;
    };
    if (parse_speculative_flag(args, i, a.speculative)) {
      a.speculative_flags = true;
      continue;
    }
    if (s == "-m" || s == "--model") a.model = value();
    else if (s == "--host") a.server.host = value();
    else if (s == "--port") a.server.port = int(integer_in(0, 65535));
    else if (s == "--served-model-name") a.server.model_name = value();
    else if (s == "--max-num-seqs") a.engine.max_num_seqs = integer();
    else if (s == "--max-num-batched-tokens") a.engine.max_num_batched_tokens = integer();
    else if (s == "--max-model-len") a.engine.max_model_len = integer();
    else if (s == "--no-chunked-prefill") a.engine.enable_chunked_prefill = false;
    else if (s == "--max-waiting-requests") a.engine.max_waiting_requests = integer();
    else if (s == "--kv-cache-memory") a.kv_cache_memory = integer();
    else if (s == "--kv-cache-dtype") a.kv_cache_dtype = value();
    else if (s == "--block-size") a.block_size = integer();
    else if (s == "--device") a.device = value();
    else if (s == "--gpu-memory-utilization") a.gpu_memory_utilization = parse_memory_fraction(s, value());
    else if (s == "--no-prefix-caching") a.prefix_caching = false;
    else if (s == "--dtype") a.dtype = value();
    // medium: batched steps (prefill chunks, many decodes at once) multiply in bf16 (layers/matmul_precision.h).
    else if (s == "--matmul-precision") set_matmul_precision(parse_matmul_precision(value()));
    // Temperature-0 answers independent of the load and the prefix cache (core/batch_invariance.h).
    else if (s == "--batch-invariant") set_batch_invariant(true);
    else if (s == "--max-n") a.server.limits.max_n = integer();
    // vLLM's name: the most top_logprobs (chat) / logprobs (completions) a request may ask for.
    else if (s == "--max-logprobs") a.server.limits.max_top_logprobs = integer();
    else if (s == "--max-logit-bias") a.server.limits.max_logit_bias = integer();
    // Bounds on what one body may ask of the engine's thread (docs/SERVING.md); 2^20 keeps sums far from overflow.
    else if (s == "--max-stop") a.server.limits.max_stop = integer_in(0, 1 << 20);
    else if (s == "--max-stop-bytes") a.server.limits.max_stop_bytes = integer_in(1, 1 << 20);
    else if (s == "--max-stop-token-ids") a.server.limits.max_stop_token_ids = integer_in(0, 1 << 20);
    else if (s == "--max-body-values") a.server.limits.max_body_values_beyond_context = integer_in(0, 1 << 30);
    // vLLM's flag: chat answers' <think> text goes to message.reasoning_content (docs/REASONING.md).
    else if (s == "--reasoning-parser") a.server.limits.reasoning_parser = answers::parse_reasoning_parser(value());
    // vLLM's flag: the tool-call format, over the one read off the chat template (docs/TOOL_CALLS.md).
    else if (s == "--tool-call-parser") a.server.limits.tool_call_parser = answers::parse_tool_call_parser(value());
    else if (s == "--max-body-bytes") a.server.max_body_bytes = size_t(integer_in(1024, INT64_MAX));
    else if (s == "--max-connections") a.server.max_connections = size_t(integer_in(1, INT64_MAX));
    else if (s == "--max-connections-per-client") a.max_connections_per_client = integer();
    else if (s == "--header-timeout-seconds") a.server.header_timeout_seconds = seconds();
    else if (s == "--shutdown-grace-seconds") a.shutdown_grace_seconds = seconds();
    else if (is_help(s)) throw HelpRequested(std::string(kUsage) + "\n");
    else throw_unknown_option("serve", s, kUsage);
  }
  if (a.model.empty()) throw ArgumentError(std::string("serve: -m DIR is required\n") + kUsage);
  if (a.kv_cache_memory && *a.kv_cache_memory <= 0) throw ArgumentError("--kv-cache-memory: must be positive");
  if (a.block_size && *a.block_size <= 0) throw ArgumentError("--block-size: must be positive");
  if (a.server.limits.max_n < 1) throw ArgumentError("--max-n: must be at least 1");
  if (a.server.limits.max_top_logprobs < 0) throw ArgumentError("--max-logprobs: must be at least 0");
  if (a.server.limits.max_logit_bias < 0) throw ArgumentError("--max-logit-bias: must be at least 0");
  if (a.max_connections_per_client && *a.max_connections_per_client < 1)
    throw ArgumentError("--max-connections-per-client: must be at least 1");
  if (a.server.header_timeout_seconds <= 0) throw ArgumentError("--header-timeout-seconds: must be positive");
  a.engine.validate();
  a.speculative.validate();
  if (a.server.model_name.empty()) a.server.model_name = std::filesystem::path(a.model).lexically_normal().filename();
  if (a.server.model_name.empty()) a.server.model_name = a.model;
  // One client can usefully hold a connection per running and per waiting request (more get 429 anyway), plus a few
  // for /health and /metrics: by default it may not take more, so no single client can fill the server.
  const int64_t useful = a.engine.max_num_seqs + a.engine.max_waiting_requests + 16;
  a.server.max_connections_per_client =
      std::min(a.server.max_connections, size_t(a.max_connections_per_client.value_or(useful)));
  return a;
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  ServeArgs a = parse_args(args);
  // SIGINT / SIGTERM are taken by sigwait below: block them before any thread starts so all threads inherit the
  // mask. A client that hangs up must not kill the process with SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  g_serve_thread = pthread_self();
  struct sigaction forward = {};
  forward.sa_handler = forward_stop_signal;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, nullptr);
  sigaction(SIGTERM, &forward, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  LoadOptions load = load_options(resolve_formats(a.model, {a.dtype, a.kv_cache_dtype}));
  if (a.kv_cache_memory) load.pool.bytes = *a.kv_cache_memory;
  if (a.block_size) load.pool.block_tokens = *a.block_size;
  load.pool.device = resolve_model_device(a.device, "--device");
  load.pool.gpu_memory_utilization = a.gpu_memory_utilization;
  load.pool.prefix_caching = a.prefix_caching;
  load.pool.max_sequences = std::max(load.pool.max_sequences, a.engine.max_num_seqs);
  // The draft (when asked for) gets the target's pool settings: one sequence per running sample.
  const std::unique_ptr<Model> draft = prepare_speculation(a.speculative, a.speculative_flags, load);
  a.engine.speculative = a.speculative;
  a.engine.draft_model = draft.get();

  server::Server http(a.server);
  const int port = http.bind();
  std::printf("attnzoo serve: listening on http://%s:%d\n", a.server.host.c_str(), port);
  std::fflush(stdout);
  std::thread listener([&] { http.listen(); });

  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ChatFormat> chat;
  try {
    model = Model::load(a.model, load);
    auto tokenizer = tok::Tokenizer::load(a.model);
    // As `attnzoo generate` (default_eos_ids); chat requests add the template's end of turn (parse_request).
    if (a.engine.eos_token_ids.empty()) a.engine.eos_token_ids = default_eos_ids(a.model, tokenizer.get());
    try {
      chat = std::make_unique<ChatFormat>(a.model, tokenizer);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attnzoo serve: no chat template (%s): /v1/chat/completions answers 400\n", e.what());
    }
    if (a.server.limits.reasoning_parser != answers::ReasoningParser::none)
      answers::check_reasoning_parser(a.server.limits.reasoning_parser, chat.get(), *tokenizer, a.model);
    if (a.server.limits.tool_call_parser != answers::ToolFormat::none)
      server::check_tool_call_parser(a.server.limits.tool_call_parser, chat.get(), a.model);
    engine = std::make_unique<Engine>(*model, tokenizer, a.engine);
    http.set_ready({engine.get(), tokenizer, chat.get()});
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  std::printf("attnzoo serve: ready (model %s, max_model_len %lld)\n%s", a.server.model_name.c_str(),
              (long long)engine->max_model_len(), describe_formats(model->info().formats, "  ").c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  // Graceful: stop admitting (503 with Retry-After, /health too, so load balancers route elsewhere), let what is in
  // flight finish within the grace period (a second signal cuts it short), then abort the rest.
  http.drain();
  std::fprintf(stderr, "attnzoo serve: signal %d, draining: %zu requests in flight, up to %g s to finish\n", sig,
               http.in_flight(), a.shutdown_grace_seconds);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.shutdown_grace_seconds);
  const timespec poll_interval{0, 20'000'000};
  while (http.in_flight() > 0 && std::chrono::steady_clock::now() < until)
    if (sigtimedwait(&stop_signals, nullptr, &poll_interval) > 0) break;
  const size_t left = http.in_flight();
  engine->stop();  // what is left gets its abort output: 503 / an error event
  http.stop();
  listener.join();
  std::fprintf(stderr, "attnzoo serve: stopped (%zu requests cut short)\n", left);
  return 0;
}

}  // namespace attnzoo::cli
