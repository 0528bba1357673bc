// attnzoo command-line front end: dispatches sub-commands; each lives in its own file.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/usage.h"
#include "core/error.h"

namespace {

void usage() {
  std::puts(
      "usage: attnzoo <command> [options]    (attnzoo <command> --help: that command's options)\n"
      "\n"
      "commands:\n"
      "  info                    CPU targets, threads, caches, library versions\n"
      "  bench kernels [--quick] [--json] [--no-torch]\n"
      "                          kernel timings vs this machine's measured peak and vs PyTorch\n"
      "  bench model -m DIR [--prompt N] [--gen N] [--linear-prefill chunked|recurrent]\n"
      "              [--matmul-precision auto|highest|medium] [--json]\n"
      "                          prefill / decode tok/s of a model vs measured peaks\n"
      "  tokenize -m DIR TEXT    token ids and pieces (--report FILE: tokenizer statistics)\n"
      "  tokenizer train --vocab-size N --files FILE... -o tokenizer.json\n"
      "                          byte-level BPE trained as Hugging Face tokenizers' BpeTrainer does\n"
      "  inspect DIR | -m DIR | --config FILE [--json]\n"
      "                          layers, parameters, KV / state bytes per layer type (config.json alone\n"
      "                          is enough); vs the same stack all-attention / all-MLA\n"
      "  generate [-m MODEL] -p TEXT [--chat]\n"
      "                          text generation (--chat: the prompt as a user message in the chat template)\n"
      "  chat [-m MODEL]         interactive chat in the checkpoint's chat template, streamed\n"
      "                          (MODEL: a checkpoint directory, a .gguf file or a directory with one;\n"
      "                          default .models/SmolLM2-135M-Instruct.Q4_1.gguf from scripts/setup.sh)\n"
      "  perplexity [-m MODEL] -f FILE [-c 512] [-b 2048] [--chunks N]\n"
      "                          perplexity over a text as llama.cpp computes it ([1]x,[2]y,... and\n"
      "                          Final estimate: PPL = X +/- err)\n"
      "  serve -m DIR [--host 127.0.0.1] [--port 8000] [--max-num-seqs N] [--max-num-batched-tokens N]\n"
      "        [--kv-cache-memory BYTES] [--kv-cache-dtype T] [--block-size N]\n"
      "                          OpenAI-compatible HTTP server (completions, chat, streaming, /metrics)\n"
      "  bench serve --base-url URL [--num-prompts N] [--request-rate R] [--max-concurrency C] [--json]\n"
      "                          load generator against a running server (TTFT, TPOT, ITL, throughput)\n"
      "  quantize -m DIR|IN.gguf -o OUT.gguf [--type Q8_0|Q4_K|Q3_K|Q2_K|IQ4_XS|BF16|...]\n"
      "                          a Hugging Face checkpoint (or a GGUF file, as llama-quantize) as a (quantized) GGUF\n"
      "                          file, as llama.cpp writes it\n"
      "  explain [-m DIR] -o FILE  explainer page drawn from real kernel runs\n"
      "  conformance [--quick|--full] [-m PATH ...] [--llama-perplexity PATH] [--json FILE] [--html FILE]\n"
      "                          every kernel family and architecture vs the installed references\n"
      "                          (torch, fla, transformers, gguf, tokenizers): worst error, tolerance, status\n"
      "\n"
      "global options: -t|--threads N (else ATTNZOO_THREADS), --target scalar|avx2|avx512|avx512_bf16\n"
      "                --version: print the version");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    usage();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::printf("attnzoo %s\n", ATTNZOO_VERSION);  // project(VERSION) in CMakeLists.txt, as attnzoo.__version__
    return 0;
  }
  try {
    attnzoo::cli::apply_global_options(args);
    const std::string cmd = args[0];
    args.erase(args.begin());
    if (cmd == "info") return attnzoo::cli::run_info(args);
    if (cmd == "bench") return attnzoo::cli::run_bench(args, argv[0]);
    if (cmd == "tokenize") return attnzoo::cli::run_tokenize(args);
    if (cmd == "tokenizer") return attnzoo::cli::run_tokenizer(args);
    if (cmd == "inspect") return attnzoo::cli::run_inspect(args);
    if (cmd == "generate") return attnzoo::cli::run_generate(args);
    if (cmd == "chat") return attnzoo::cli::run_chat(args);
    if (cmd == "perplexity") return attnzoo::cli::run_perplexity(args);
    if (cmd == "serve") return attnzoo::cli::run_serve(args);
    if (cmd == "quantize") return attnzoo::cli::run_quantize(args);
    if (cmd == "explain") return attnzoo::cli::run_explain(args, argv[0]);
    if (cmd == "conformance") return attnzoo::cli::run_conformance(args);
    std::fprintf(stderr, "attnzoo: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  } catch (const attnzoo::cli::HelpRequested& h) {
    std::fputs(h.what(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnzoo: error: %s\n", e.what());
    return 1;
  }
}
