#pragma once
#include <string>
#include <vector>

namespace attnzoo::cli {

// Removes --threads / --target from args and applies them.
void apply_global_options(std::vector<std::string>& args);
int run_info(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args, const char* argv0);
int run_tokenize(const std::vector<std::string>& args);
int run_tokenizer(const std::vector<std::string>& args);  // attnzoo tokenizer train
int run_inspect(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_chat(const std::vector<std::string>& args);
int run_perplexity(const std::vector<std::string>& args);
int run_serve(const std::vector<std::string>& args);
int run_quantize(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args, const char* argv0);
int run_conformance(const std::vector<std::string>& args);

}  // namespace attnzoo::cli
