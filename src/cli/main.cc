// attnzoo command-line front end: dispatches sub-commands; each lives in its own file.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace {

void usage() {
  std::puts(
      "usage: attnzoo <command> [options]\n"
      "\n"
      "commands:\n"
      "  info                    CPU targets, threads, caches, library versions\n"
      "  bench kernels [--quick] [--json] [--no-torch]\n"
      "                          kernel timings vs this machine's measured peak and vs PyTorch\n"
      "  bench model -m DIR [--prompt N] [--gen N] [--linear-prefill chunked|recurrent]\n"
      "              [--matmul-precision highest|medium] [--json]\n"
      "                          prefill / decode tok/s of a model vs measured peaks\n"
      "  tokenize -m DIR TEXT    token ids and pieces (--report FILE: tokenizer statistics)\n"
      "  inspect DIR | -m DIR | --config FILE [--json]\n"
      "                          layers, parameters, KV / state bytes per layer type (config.json alone\n"
      "                          is enough); vs the same stack all-attention / all-MLA\n"
      "  generate -m DIR -p TEXT [--chat]\n"
      "                          text generation (--chat: the prompt as a user message in the chat template)\n"
      "  chat -m DIR             interactive chat in the checkpoint's chat template, streamed\n"
      "  explain [-m DIR] -o FILE  explainer page drawn from real kernel runs\n"
      "\n"
      "global options: --threads N (else ATTNZOO_THREADS), --target scalar|avx2|avx512|avx512_bf16");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  try {
    attnzoo::cli::apply_global_options(args);
    const std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "info") return attnzoo::cli::run_info(args);
    if (cmd == "bench") return attnzoo::cli::run_bench(args, argv[0]);
    if (cmd == "tokenize") return attnzoo::cli::run_tokenize(args);
    if (cmd == "inspect") return attnzoo::cli::run_inspect(args);
    if (cmd == "generate") return attnzoo::cli::run_generate(args);
    if (cmd == "chat") return attnzoo::cli::run_chat(args);
    if (cmd == "explain") return attnzoo::cli::run_explain(args, argv[0]);
    std::fprintf(stderr, "attnzoo: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnzoo: error: %s\n", e.what());
    return 1;
  }
}
