#pragma once
// What request routers in front of several `attnzoo serve` replicas read from each of them, beyond /health and
// /metrics (found by running vllm-router 0.1.17 against replicas, docs/DEPLOY.md):
//   POST /v1/completions/render, /v1/chat/completions/render: the prompt's token ids (vLLM's Renderer API), which
//        the cache_aware policy keys its prefix tree on before it picks a replica, so the tree holds what the
//        engine's prefix cache holds (a chat request rendered through the checkpoint's template);
//   POST /tokenize: the same ids in vLLM's /tokenize shape, the router's fallback when render is missing;
//   GET  /get_load: {"load": running + waiting requests}, polled by the power_of_two policy;
//   GET  /get_model_info: the served model, which the router passes on to its clients.
// Bodies are read as the generation endpoints read them (parse_request), so a prompt the engine would refuse
// gets the same 400 here. Independent of the HTTP layer: the server hands over method, path and body.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "server/server.h"

namespace attnzoo::server {

class RouterApi {
 public:
  explicit RouterApi(const ServerOptions& options) : options_(options) {}
  static const std::vector<std::string>& paths();
  static bool handles(const std::string& path);
  // The JSON answer to `method path` (one of paths()); throws ApiError: 405 for the wrong method, 400 / 404 as
  // /v1/completions would answer the same body.
  std::string answer(const std::string& method, const std::string& path, const std::string& body,
                     const ServingState& state);

 private:
  const ServerOptions& options_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace attnzoo::server
