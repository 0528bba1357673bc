// Files that are not what their name says: FIFOs, devices, oversized JSON, configs with values no model can
// have. Each must be refused at once with an error naming the file (and the key), never block or read forever.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>

#include "loader/config.h"
#include "loader/json.h"
#include "loader/mapped_file.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::load_error_of;

TEST(UntrustedFiles, FifoIsRefusedWithoutBlocking) {
  ScratchDir dir;
  const std::string fifo = (dir.path() / "config.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = load_error_of([&] { Config::load(fifo); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(e.find(fifo), std::string::npos) << e;
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  EXPECT_NE(load_error_of([&] { MappedFile::open(fifo); }).find("not a regular file"), std::string::npos);
}

TEST(UntrustedFiles, DevicesAndSymlinksToThemAreRefused) {
  ScratchDir dir;
  const auto link = dir.path() / "config.json";
  std::filesystem::create_symlink("/dev/zero", link);
  EXPECT_NE(load_error_of([&] { Config::load(link.string()); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(load_error_of([&] { Config::load("/dev/zero"); }).find("/dev/zero"), std::string::npos);
}

TEST(UntrustedFiles, OversizedConfigIsRefusedBeforeReading) {
  ScratchDir dir;
  const auto path = dir.path() / "config.json";
  {
    std::ofstream f(path);
    f << "{}";
  }
  std::filesystem::resize_file(path, kMaxConfigJsonBytes + 1);  // sparse: no need to write 16 MiB
  const std::string e = load_error_of([&] { Config::load(path.string()); });
  EXPECT_NE(e.find("MiB limit"), std::string::npos) << e;
}

TEST(UntrustedFiles, JsonValueCountIsBounded) {
  std::string text = "[";
  for (int i = 0; i < 1000; ++i) text += "0,";
  text += "0]";
  json::ParseOptions o;
  o.max_values = 500;
  EXPECT_THROW(json::parse(text, o), json::ParseError);
  o.max_values = 1001 + 1;  // the array itself counts
  EXPECT_NO_THROW(json::parse(text, o));
}

TEST(UntrustedFiles, ConfigValuesNoModelCanHaveAreRefusedNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"num_hidden_layers": 1e9})", "num_hidden_layers"},
      {R"({"hidden_size": 4611686018427387904})", "hidden_size"},
      {R"({"text_config": {"vocab_size": -3}})", "text_config.vocab_size"},
      {R"({"rms_norm_eps": -1})", "rms_norm_eps"},
      {R"({"layer_norm_eps": 0})", "layer_norm_eps"},
      {R"({"sliding_window": -5})", "sliding_window"},
      {R"({"num_attention_heads": 2.5})", "num_attention_heads"},
      {R"({"mamba_expand": 4611686018427387904})", "mamba_expand"},  // times hidden_size, the SSM's width
      // The hybrids' own names for their sizes (Falcon-H1, Jamba, Qwen3-Next, LFM2, Kimi Linear, MoE shared experts).
      {R"({"mamba_d_state": 1099511627776})", "mamba_d_state"},
      {R"({"mamba_d_ssm": 1099511627776})", "mamba_d_ssm"},
      {R"({"mamba_dt_rank": -1})", "mamba_dt_rank"},
      {R"({"linear_conv_kernel_dim": 1099511627776})", "linear_conv_kernel_dim"},
      {R"({"short_conv_kernel_size": 1099511627776})", "short_conv_kernel_size"},
      {R"({"shared_expert_intermediate_size": 1099511627776})", "shared_expert_intermediate_size"},
      {R"({"text_config": {"linear_num_heads": 1099511627776}})", "text_config.linear_num_heads"},
  };
  for (const auto& [text, key] : cases) {
    const std::string e = load_error_of([&] { Config::parse(text, "cfg.json"); });
    EXPECT_NE(e.find(std::string("key '") + key + "'"), std::string::npos) << text << " -> " << e;
  }
  // Real values (and null windows) still load.
  EXPECT_NO_THROW(Config::parse(R"({"num_hidden_layers": 61, "rms_norm_eps": 1e-6, "sliding_window": null,
                                    "max_position_embeddings": 10485760, "vocab_size": 262208})", "cfg.json"));
}

}  // namespace
}  // namespace attnzoo
