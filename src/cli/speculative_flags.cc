#include "cli/speculative_flags.h"

#include "cli/generation_flags.h"
#include "core/error.h"

namespace attnzoo::cli {

const char* kSpeculativeFlagsUsage =
    "[--speculative ngram|draft --num-speculative-tokens K [--prompt-lookup-max N] [--prompt-lookup-min N]\n"
    "          [--draft-model|--model-draft DIR]]";

bool parse_speculative_flag(const std::vector<std::string>& args, size_t& i, SpeculativeOptions& o) {
  const std::string& s = args[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
    return args[++i];
  };
  if (s == "--speculative") o.method = parse_speculative_method(value(), s);
  else if (s == "--num-speculative-tokens" || s == "--draft-max") o.num_speculative_tokens = parse_number<int64_t>(s, value());
  else if (s == "--prompt-lookup-max") o.prompt_lookup_max = parse_number<int64_t>(s, value());
  else if (s == "--prompt-lookup-min") o.prompt_lookup_min = parse_number<int64_t>(s, value());
  else if (s == "--draft-model" || s == "--model-draft" || s == "-md") o.draft_model = value();
  else return false;
  return true;
}

std::unique_ptr<Model> prepare_speculation(const SpeculativeOptions& o, bool flags_given, const LoadOptions& load) {
  if (!o.enabled()) {
    if (flags_given) throw ArgumentError("--speculative: the speculative flags need a method (ngram or draft)");
    return nullptr;
  }
  o.validate();
  if (o.method == SpeculativeMethod::ngram && !o.draft_model.empty())
    throw ArgumentError("--draft-model: only the 'draft' method uses a draft model");
  if (o.method != SpeculativeMethod::draft) return nullptr;
  if (o.draft_model.empty()) throw ArgumentError("--draft-model: the 'draft' method needs a draft model (sharing the tokenizer)");
  return Model::load(o.draft_model, load);
}

}  // namespace attnzoo::cli
