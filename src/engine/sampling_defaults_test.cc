#include "engine/sampling_defaults.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "core/error.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

TEST(SamplingDefaults, TransformersDefaultsWithoutAFile) {
  const SamplingParams p = resolve_sampling("", {});
  EXPECT_EQ(p.temperature, 0.f);  // greedy unless do_sample
  EXPECT_EQ(p.top_k, 50);
  EXPECT_EQ(p.top_p, 1.f);
  SamplingOverrides o;
  o.do_sample = true;
  EXPECT_EQ(resolve_sampling("", o).temperature, 1.f);
}

TEST(SamplingDefaults, GenerationConfigSeedsAndTheCallerWins) {
  testing::ScratchDir dir;
  testing::write_file(dir.path() / "generation_config.json",
                      std::string(R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.9})"));
  const SamplingParams p = resolve_sampling(dir.str(), {});
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  SamplingOverrides o;
  o.temperature = 1.5f;
  o.top_k = 5;
  EXPECT_FLOAT_EQ(resolve_sampling(dir.str(), o).temperature, 1.5f);
  EXPECT_EQ(resolve_sampling(dir.str(), o).top_k, 5);
  SamplingOverrides greedy;
  greedy.do_sample = false;
  EXPECT_EQ(resolve_sampling(dir.str(), greedy).temperature, 0.f);
  SamplingOverrides zero;
  zero.temperature = 0.f;
  EXPECT_EQ(resolve_sampling(dir.str(), zero).temperature, 0.f);
  SamplingOverrides bad;
  bad.top_p = 0.f;
  EXPECT_THROW(resolve_sampling(dir.str(), bad), ArgumentError);
}

TEST(SamplingDefaults, ANegativeOrNanTemperatureIsRefusedNotGreedy) {
  for (const float t : {-1.f, std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    for (const std::optional<bool> do_sample : {std::optional<bool>(), std::optional<bool>(false)}) {
      SamplingOverrides o;
      o.temperature = t;
      o.do_sample = do_sample;
      try {
        resolve_sampling("", o);
        ADD_FAILURE() << "temperature " << t << " taken";
      } catch (const ArgumentError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("temperature: must be a finite number >= 0", 0), 0u) << e.what();
      }
    }
  }
}

TEST(SamplingDefaults, ATemperatureAloneSamplesAGreedyCheckpoint) {
  SamplingOverrides o;
  o.temperature = 0.7f;
  EXPECT_FLOAT_EQ(resolve_sampling("", o).temperature, 0.7f);
}

// transformers' minimum length: min_new_tokens, else min_length less the prompt (it counts the prompt's tokens);
// the caller's value wins; none without the file.
TEST(SamplingDefaults, MinNewTokensComeFromGenerationConfig) {
  EXPECT_EQ(resolve_min_new_tokens("", std::nullopt, 10), 0);
  EXPECT_EQ(resolve_min_new_tokens("", 3, 10), 3);
  testing::ScratchDir dir;
  const auto gen = dir.path() / "generation_config.json";
  testing::write_file(gen, std::string(R"({"do_sample": false})"));
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), std::nullopt, 10), 0);
  testing::write_file(gen, std::string(R"({"min_length": 24})"));
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), std::nullopt, 10), 14);
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), std::nullopt, 30), 0);
  testing::write_file(gen, std::string(R"({"min_length": 24, "min_new_tokens": 8})"));
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), std::nullopt, 10), 8);
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), 0, 10), 0);
  testing::write_file(gen, std::string(R"({"min_length": 24, "min_new_tokens": null})"));
  EXPECT_EQ(resolve_min_new_tokens(dir.str(), std::nullopt, 4), 20);
  try {
    resolve_min_new_tokens(dir.str(), -1, 4);
    ADD_FAILURE() << "a negative min_new_tokens was taken";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("min_new_tokens: must be >= 0", 0), 0u) << e.what();
  }
  testing::write_file(gen, std::string(R"({"min_new_tokens": -2})"));
  try {
    resolve_min_new_tokens(dir.str(), std::nullopt, 4);
    ADD_FAILURE() << "a negative min_new_tokens in the file was taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: min_new_tokens: must be >= 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace attnzoo
