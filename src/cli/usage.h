#pragma once
// How every sub-command answers -h / --help and a misspelt option, the same way: a command's usage text is the
// one list of its options, so the suggestion for an unknown option is read from it.
#include <stdexcept>
#include <string>

namespace attnzoo::cli {

// Thrown by a command's parser for -h / --help; main prints the usage to stdout and exits 0.
struct HelpRequested : std::runtime_error {
  explicit HelpRequested(const std::string& usage) : std::runtime_error(usage) {}
};

inline bool is_help(const std::string& s) { return s == "-h" || s == "--help"; }

// The option spelled in `usage` (tokens starting with '-') nearest to `given` by edit distance, or "" when none
// is close enough to be a plausible typo.
std::string closest_option(const std::string& given, const std::string& usage);

// "<command>: unknown option '<given>' (did you mean --x?)" followed by the usage.
[[noreturn]] void throw_unknown_option(const std::string& command, const std::string& given, const std::string& usage);

}  // namespace attnzoo::cli
