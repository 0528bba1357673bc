// The CUDA embedding gather (layers/cuda/embedding_kernel.cuh) under the CTA emulator against its CPU twin,
// Embedding::lookup: every output bit equal, for dense f32 / bf16 / f16 tables and GGUF Q8_0 / Q4_0 / Q4_K / Q6_K
// ones (random blocks with valid f16 scales, testing/random_blocks.h), f32 and bf16 outputs with padded rows,
// scale 1 and Gemma's sqrt(hidden), repeated ids and the vocabulary's ends; ids outside it leave NaN rows and the
// lowest such token in the status word. The grid is capped at two blocks so that the token loop takes several
// rounds; the bytes between output rows must stay untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant/quant.h"
#include "layers/cuda/embedding_kernel.cuh"
#include "layers/embedding.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {
using namespace cuda_embedding;
using cuda_emulation::DeviceMemory;

template <class Out>
void launch_gather(QuantType type, const EmbedParams<Out>& p) {
  const unsigned grid = std::min(grid_for(p.tokens, kWarps), 2u);
  cuda_emulation::launch(dim3(grid), kThreads, 0, [&](unsigned char*) {
    switch (type) {
      case QuantType::F32: return gather_rows<QuantType::F32>(p);
      case QuantType::BF16: return gather_rows<QuantType::BF16>(p);
      case QuantType::F16: return gather_rows<QuantType::F16>(p);
      case QuantType::Q8_0: return gather_rows<QuantType::Q8_0>(p);
      case QuantType::Q4_0: return gather_rows<QuantType::Q4_0>(p);
      case QuantType::Q4_K: return gather_rows<QuantType::Q4_K>(p);
      default: return gather_rows<QuantType::Q6_K>(p);
    }
  });
}

struct EmbedCase {
  QuantType type;
  int64_t V, D, T;
  bool bf16_out;
  float scale;
  int64_t pad;               // spare output elements after each row
  std::vector<int64_t> bad;  // tokens given ids outside the vocabulary
  // A constructor, not an aggregate, so that cases may leave the trailing fields out (-Wextra flags an aggregate's).
  EmbedCase(QuantType type, int64_t V, int64_t D, int64_t T, bool bf16_out = false, float scale = 1.f,
            int64_t pad = 0, std::vector<int64_t> bad = {})
      : type(type), V(V), D(D), T(T), bf16_out(bf16_out), scale(scale), pad(pad), bad(std::move(bad)) {}
};

void check_embed(const EmbedCase& c) {
  SCOPED_TRACE(std::string(quant_type_name(c.type)) + " V " + std::to_string(c.V) + " D " + std::to_string(c.D) +
               " T " + std::to_string(c.T) + (c.bf16_out ? " bf16 out" : " f32 out") + " scale " +
               std::to_string(c.scale) + " pad " + std::to_string(c.pad) + " bad " + std::to_string(c.bad.size()));
  const std::vector<uint8_t> raw = testing::random_quant_rows(c.type, c.V, c.D, 3 + uint64_t(c.V));
  const Embedding e = Embedding::from_quantized(raw.data(), raw.size(), c.type, c.V, c.D, "token_embd.weight");
  DeviceMemory table(raw.size());
  std::memcpy(table.data(), raw.data(), raw.size());

  std::vector<int32_t> ids(size_t(c.T));
  std::mt19937_64 rng(c.T);
  for (auto& id : ids) id = int32_t(rng() % uint64_t(c.V));
  ids[0] = int32_t(c.V - 1);
  if (c.T > 2) ids[1] = 0, ids[2] = ids[size_t(c.T - 1)];  // the ends and a repeat
  for (int64_t t : c.bad) ids[size_t(t)] = t % 2 ? int32_t(c.V) : -1 - int32_t(t);
  DeviceMemory dev_ids(ids.size() * 4), status(8);
  std::memcpy(dev_ids.data(), ids.data(), ids.size() * 4);
  std::memset(status.data(), 0xff, 8);

  const size_t out_elem = c.bf16_out ? 2 : 4;
  const int64_t stride = c.D + c.pad;
  DeviceMemory out(size_t(c.T * stride) * out_elem + 16);
  std::memset(out.data(), 0xff, out.size());
  auto run = [&](auto tag) {
    using Out = decltype(tag);
    const EmbedParams<Out> p{table.data(), e.matrix().row_bytes, c.V, c.D,
                             reinterpret_cast<const int32_t*>(dev_ids.data()), c.T,
                             reinterpret_cast<Out*>(out.data()), stride, c.scale,
                             reinterpret_cast<unsigned long long*>(status.data())};
    launch_gather(c.type, p);
  };
  c.bf16_out ? run(__nv_bfloat16{}) : run(float{});

  const unsigned long long first_bad = *reinterpret_cast<const unsigned long long*>(status.data());
  const int64_t want_bad = c.bad.empty() ? -1 : *std::min_element(c.bad.begin(), c.bad.end());
  EXPECT_EQ(first_bad, want_bad < 0 ? ~0ull : (unsigned long long)want_bad);

  std::vector<float> want(size_t(c.D));
  for (int64_t t = 0; t < c.T; ++t) {
    const bool bad = std::find(c.bad.begin(), c.bad.end(), t) != c.bad.end();
    if (!bad) e.lookup(&ids[size_t(t)], 1, want.data(), c.scale);
    for (int64_t i = 0; i < c.D; ++i) {
      const unsigned char* at = out.data() + size_t(t * stride + i) * out_elem;
      uint32_t got = 0, exp = 0;
      std::memcpy(&got, at, out_elem);
      if (bad) {
        ASSERT_TRUE(std::isnan(c.bf16_out ? bf16_to_f32(uint16_t(got)) : __uint_as_float(got)))
            << "token " << t << " element " << i << " of a bad id";
        continue;
      }
      if (c.bf16_out) {
        exp = f32_to_bf16(want[size_t(i)]);
      } else {
        std::memcpy(&exp, &want[size_t(i)], 4);
      }
      ASSERT_EQ(got, exp) << "token " << t << " (id " << ids[size_t(t)] << ") element " << i;
    }
    for (int64_t i = c.D; i < stride && t + 1 < c.T; ++i)
      for (size_t b = 0; b < out_elem; ++b)
        ASSERT_EQ(out.data()[size_t(t * stride + i) * out_elem + b], 0xff) << "padding after token " << t;
  }
  for (size_t b = size_t(((c.T - 1) * stride + c.D)) * out_elem; b < out.size(); ++b)
    ASSERT_EQ(out.data()[b], 0xff) << "byte " << b << " after the output";
}

TEST(EmulatedEmbedding, MatchesTheCpuLookupBitForBit) {
  for (bool bf16_out : {false, true})
    for (float scale : {1.f, std::sqrt(2304.f)}) {
      check_embed({QuantType::F32, 37, 65, 21, bf16_out, scale, 3});
      check_embed({QuantType::BF16, 50, 96, 19, bf16_out, scale});
      check_embed({QuantType::F16, 29, 33, 40, bf16_out, scale, 1});
      check_embed({QuantType::Q8_0, 41, 96, 23, bf16_out, scale, 2});
      check_embed({QuantType::Q4_0, 33, 160, 18, bf16_out, scale});
      check_embed({QuantType::Q4_K, 31, 512, 20, bf16_out, scale, 5});
      check_embed({QuantType::Q6_K, 27, 256, 19, bf16_out, scale});
    }
}

TEST(EmulatedEmbedding, IdsOutsideTheVocabularyAreFlagged) {
  check_embed({QuantType::Q6_K, 27, 256, 30, false, 1.f, 0, {5, 22}});
  check_embed({QuantType::BF16, 50, 64, 17, true, 1.f, 2, {16}});
  check_embed({QuantType::Q8_0, 20, 32, 40, false, 2.f, 0, {0, 1, 39}});
}

}  // namespace
}  // namespace attnzoo
