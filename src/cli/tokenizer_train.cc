// attnzoo tokenizer train: byte-level BPE learned from text files, written as a tokenizer.json.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/tokenizer_report.h"
#include "cli/usage.h"
#include "core/error.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

const char* kUsage =
    "usage: attnzoo tokenizer train --vocab-size N --files FILE... -o tokenizer.json\n"
    "         [--min-frequency N] [--special-tokens TOKEN...] [--add-prefix-space] [--progress] [--report FILE]\n"
    "  learns byte-level BPE merges as Hugging Face tokenizers' BpeTrainer does (ByteLevel pre-tokenizer, the 256\n"
    "  byte characters, special tokens first); files are streamed line by line, any size. --progress: the progress\n"
    "  bar on stderr even when it is not a terminal; --report: `attnzoo tokenize --report` statistics of the result\n";

struct TrainArgs {
  tok::BpeTrainerOptions options;
  bool have_vocab_size = false;
  std::vector<std::string> files;
  std::string output;
  std::string report;
  bool progress = false;
};

TrainArgs parse_args(const std::vector<std::string>& args) {
  TrainArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    // Every following argument up to the next option.
    auto values = [&]() {
      std::vector<std::string> out;
      while (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-' || args[i + 1] == "-"))
        out.push_back(args[++i]);
      if (out.empty()) throw ArgumentError(s + ": needs at least one value");
      return out;
    };
    if (s == "--vocab-size") a.options.vocab_size = parse_number<size_t>(s, value()), a.have_vocab_size = true;
    else if (s == "--files") for (std::string& f : values()) a.files.push_back(std::move(f));
    else if (s == "-o" || s == "--output") a.output = value();
    else if (s == "--min-frequency") a.options.min_frequency = parse_number<uint64_t>(s, value());
    else if (s == "--special-tokens") for (std::string& t : values()) a.options.special_tokens.push_back(std::move(t));
    else if (s == "--add-prefix-space") a.options.add_prefix_space = true;
    else if (s == "--progress") a.progress = true;
    else if (s == "--report") a.report = value();
    else if (is_help(s)) throw HelpRequested(kUsage);
    else if (!s.empty() && s[0] == '-') throw_unknown_option("tokenizer train", s, kUsage);
    else throw ArgumentError("tokenizer train: unexpected argument '" + s + "' (training files go after --files)");
  }
  if (!a.have_vocab_size) throw ArgumentError("tokenizer train: --vocab-size N is required");
  if (a.options.vocab_size == 0) throw ArgumentError("--vocab-size: must be positive");
  if (a.files.empty()) throw ArgumentError("tokenizer train: --files FILE... is required");
  if (a.output.empty()) throw ArgumentError("tokenizer train: -o tokenizer.json is required");
  return a;
}

// One line on stderr redrawn in place, at most ten times a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on) {}
  void update(const char* stage, double done, double total, const char* unit, double scale) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double f = total > 0 ? std::min(1.0, done / total) : 1.0;
    constexpr int kWidth = 30;
    std::string bar(size_t(f * kWidth), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%-16s [%s] %5.1f%%  %.1f / %.1f %s ", stage, bar.c_str(), 100 * f, done / scale,
                 total / scale, unit);
    std::fflush(stderr);
  }
  void finish() {
    if (on_) std::fputc('\n', stderr);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int run_tokenizer_train(const std::vector<std::string>& args) {
  const TrainArgs a = parse_args(args);
  uint64_t total_bytes = 0;
  for (const std::string& f : a.files) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(f, ec);
    if (ec) throw ArgumentError("--files: cannot read '" + f + "' (" + ec.message() + ")");
    total_bytes += size;
  }
  // Refused before minutes of training rather than after.
  if (std::filesystem::is_directory(a.output)) throw ArgumentError("-o: '" + a.output + "' is a directory");
  if (std::filesystem::exists(a.output) && access(a.output.c_str(), W_OK) != 0)
    throw ArgumentError("-o: cannot write '" + a.output + "'");
  const std::filesystem::path parent = std::filesystem::absolute(a.output).parent_path();
  if (access(parent.c_str(), W_OK) != 0) throw ArgumentError("-o: cannot write into '" + parent.string() + "'");
  const bool show = a.progress || isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();

  ProgressBar counting(show);
  tok::WordCounter counter(a.options.add_prefix_space);
  uint64_t read = 0;
  for (const std::string& f : a.files)
    counter.add_file(f, [&](uint64_t n) { counting.update("counting words", double(read += n), double(total_bytes), "MB", 1e6); });
  counting.update("counting words", double(total_bytes), double(total_bytes), "MB", 1e6);
  counting.finish();
  tok::WordCounts words = counter.take();
  const size_t distinct_words = words.size();

  ProgressBar merging(show);
  const tok::TrainedBpe bpe = tok::train_bpe(std::move(words), a.options, [&](size_t done, size_t total) {
    merging.update("merging", double(done), double(total), "k merges", 1e3);
  });
  merging.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  {
    std::ofstream out(a.output, std::ios::binary | std::ios::trunc);
    if (!out) throw ArgumentError("-o: cannot write '" + a.output + "'");
    out << tok::trained_tokenizer_json(bpe);
    if (!out.flush()) throw ArgumentError("-o: error writing '" + a.output + "'");
  }
  // Loading the file back checks it before anyone else relies on it.
  const auto t = tok::Tokenizer::load(a.output);
  std::printf("wrote %s: %zu tokens (%zu special, %zu merges) from %zu distinct words, %.1f MB, in %.1f s\n",
              a.output.c_str(), t->vocab_size(), bpe.special_tokens.size(), bpe.merges.size(), distinct_words,
              double(total_bytes) / 1e6, seconds);
  if (!a.report.empty()) return print_tokenizer_report(*t, a.report);
  return 0;
}

int run_tokenizer(const std::vector<std::string>& args) {
  static const char* kGroupUsage = "usage: attnzoo tokenizer train --vocab-size N --files FILE... -o tokenizer.json\n";
  if (args.empty() || is_help(args[0])) {
    if (args.empty()) throw ArgumentError(std::string("tokenizer: give a sub-command\n") + kGroupUsage);
    throw HelpRequested(kUsage);
  }
  if (args[0] == "train") return run_tokenizer_train(std::vector<std::string>(args.begin() + 1, args.end()));
  throw ArgumentError("tokenizer: unknown sub-command '" + args[0] + "' (known: train)");
}

}  // namespace attnzoo::cli
