#pragma once
// What request routers in front of several `attnzoo serve` replicas read from each of them, beyond /health and
// /metrics (measured with vllm-router 0.1.17, docs/DEPLOY.md):
//   POST /v1/completions/render, /v1/chat/completions/render: the prompt's token ids (vLLM's Renderer API), which
//        the cache_aware policy keys its prefix tree on before it picks a replica, so the tree holds what the
//        engine's prefix cache holds (a chat request rendered through the checkpoint's template);
//   POST /tokenize: the same ids in vLLM's /tokenize shape, the router's fallback when render is missing;
//   GET  /get_load: {"load": running + waiting requests}, polled by the power_of_two policy;
//   GET  /get_model_info: the served model, which the router passes on to its clients.
// Bodies are read as the generation endpoints read them (parse_request), so a prompt the engine would refuse
// gets the same 400 here.
#include <functional>

#include "server/server.h"

namespace httplib {
class Server;
}

namespace attnzoo::server {

// `ready` returns the loaded model or throws ApiError 503 while it loads.
void add_router_api(httplib::Server& http, std::function<const ServingState&()> ready, const ServerOptions& options);

}  // namespace attnzoo::server
