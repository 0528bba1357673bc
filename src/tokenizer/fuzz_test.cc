// A deterministic mutation fuzzer over tokenizer.json: the seed files of fuzz/corpus/tokenizer are mutated and
// each result must load and encode, or throw ArgumentError / LoadError -- never crash, hang or read out of
// bounds (the sanitizer build runs this too). Same knobs as the loader fuzzer: ATTNZOO_FUZZ_ITERATIONS and
// ATTNZOO_FUZZ_SECONDS.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "loader/fuzz_mutator.h"
#include "tokenizer/fuzz_exercise.h"

namespace attnzoo {
namespace {

using fuzzing::Bytes;

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

std::vector<Bytes> seeds() {
  // __FILE__ is this file's path as the compiler saw it (absolute, or relative to the build directory that
  // ctest runs in): the corpus sits beside the fuzz entry points.
  const auto dir = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "fuzz" / "corpus" /
                   "tokenizer";
  std::vector<Bytes> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

TEST(TokenizerFuzz, SeedsAreValid) {
  const auto s = seeds();
  ASSERT_GE(s.size(), 2u);
  for (const Bytes& b : s) EXPECT_TRUE(fuzzing::exercise_tokenizer(b.data(), b.size()));
}

TEST(TokenizerFuzz, Mutations) {
  const auto s = seeds();
  ASSERT_FALSE(s.empty());
  const int iterations = int(env_or("ATTNZOO_FUZZ_ITERATIONS", 20000));
  const double seconds = env_or("ATTNZOO_FUZZ_SECONDS", 3);
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0, rejected = 0, i = 0;
  for (; i < iterations; ++i) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    fuzzing::Mutator m(0x70c0000u + uint64_t(i));
    Bytes b = s[size_t(i) % s.size()];
    m.mutate(b, false);
    try {
      fuzzing::exercise_tokenizer(b.data(), b.size());
      ++accepted;
    } catch (const ArgumentError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << i << ": undocumented exception: " << e.what();
    }
  }
  std::printf("[fuzz] tokenizer: %d inputs, %d accepted, %d rejected\n", i, accepted, rejected);
  EXPECT_GT(accepted, i / 50);
  EXPECT_GT(rejected, i / 50);
  EXPECT_GT(i, 100) << "too few iterations in the time budget";
}

}  // namespace
}  // namespace attnzoo
