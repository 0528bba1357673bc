// How many times a decode step of a Q4_K_M GGUF quantizes its inputs to 8 bits (matmul precision "auto"), with the
// projections of one input sharing one quantization and one by one (Linear::set_sharing(false)), and that the
// logits are the same to the bit either way. The tiny decoder's 128-column projections take llama-quantize's
// fallbacks (testing/tiny_gguf.h): q / k / gate / up Q5_0, v Q8_0 (Q6_K asked, with more bits), o / down K-quants.
// Where the VNNI rows run, Q5_0 has AVX2 rows and Q8_0 VNNI ones: q / k / v still quantize x once between them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "convert/ftype_mixture.h"
#include "kernels/quant/quant.h"
#include "layers/attention_layer.h"
#include "layers/linear.h"
#include "layers/matmul_precision.h"
#include "models/model.h"
#include "testing/tiny_gguf.h"

namespace attnzoo {
namespace {

TEST(DecodeQuantizations, Q4KMDecodeStepQuantizesEachInputOnce) {
  testing::ScratchDir dir;
  TensorPolicy q4_k_m;
  set_file_type(q4_k_m, "Q4_K_M", "--type");
  const auto model = Model::load(testing::write_tiny_gguf(dir, testing::TinyDecoder{}, QuantType::Q4_K, q4_k_m));
  ScopedMatmulPrecision scope(MatmulPrecision::automatic);
  const int64_t L = model->info().num_layers, V = model->info().vocab_size;
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  const int steps = 6;
  uint64_t per_step[2] = {};
  std::vector<float> logits[2];
  for (int shared = 0; shared < 2; ++shared) {
    Linear::set_sharing(shared == 1);
    const auto seq = model->new_sequence();
    Batch batch;
    batch.add(*seq, prompt);
    model->forward(batch, true);
    int32_t token = 35;
    const uint64_t before = quant_gemv_quantizations();
    for (int i = 0; i < steps; ++i) {
      batch.clear();
      batch.add(*seq, std::span(&token, 1));
      const std::vector<float> l = model->forward(batch, true);
      logits[shared].insert(logits[shared].end(), l.begin(), l.end());
      token = int32_t((token * 31 + 7) % V);
    }
    per_step[shared] = (quant_gemv_quantizations() - before) / uint64_t(steps);
  }
  Linear::set_sharing(true);
  std::printf("Q4_K_M tiny decoder, %lld layers: %llu quantizations per decode step one by one, %llu shared\n",
              (long long)L, (unsigned long long)per_step[0], (unsigned long long)per_step[1]);
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
  // Per layer q, k, v, o, gate, up, down one by one; x (q / k / v), the attention output, x (gate / up) and the
  // activation shared; the Q8_0 head once either way.
  EXPECT_EQ(per_step[0], uint64_t(7 * L + 1));
  EXPECT_EQ(per_step[1], uint64_t(4 * L + 1));
}

}  // namespace
}  // namespace attnzoo
