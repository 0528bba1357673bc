#pragma once
// How many connections `attnzoo serve` can hold within the process's descriptor limit (RLIMIT_NOFILE). Every
// admitted connection is a socket, a refused one lingers up to a second with its own, and the process keeps others
// (the listening socket, the wake pipe, model files, logs). A shell's soft limit is often 1024, the default
// connection cap: accept() would fail with EMFILE before admission could answer 503, and clients would wait in the
// listen backlog instead. So the soft limit is raised toward the hard one (as nginx's worker_rlimit_nofile and
// vLLM's start-up do), and where even the hard limit is short the connection cap is lowered, with a notice.
#include <cstddef>
#include <cstdint>
#include <string>

namespace attnzoo::server::http {

// Descriptors kept beside the connections' own.
constexpr uint64_t kDescriptorReserve = 128;

struct DescriptorPlan {
  uint64_t soft_limit = 0;  // the soft limit to set: never below the current one, never above the hard one
  size_t max_connections = 0;  // the connections that fit under it: `asked` where they do, at least 1
};
// Pure: the plan for `asked` connections and `lingering` refused sockets under the limits `soft` / `hard`.
DescriptorPlan plan_descriptors(size_t asked, size_t lingering, uint64_t soft, uint64_t hard);

// Applies the plan to this process (setrlimit where it raises the soft limit) and returns the connections that
// fit; `notice` says why when they are fewer than asked (empty otherwise).
size_t fit_descriptor_limit(size_t asked, size_t lingering, std::string& notice);

}  // namespace attnzoo::server::http
