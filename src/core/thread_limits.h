#pragma once
// The most threads the pool takes, however they are asked for (ATTNZOO_THREADS, --threads, set_num_threads): far
// above any machine's cores, and low enough that a typo cannot start a million threads.
namespace attnzoo {

constexpr int kMaxThreads = 1024;

}  // namespace attnzoo
