// The 8-bit activation rows that the VNNI and AVX2 rows read are QuantActivations::ld8 apart (the lane arrays
// ld8 / 4). quant_gemv lays them out K rounded up to 64 apart, which for the K-quants (K a multiple of 256) is K
// itself: a kernel striding by K there reads the right values by coincidence. Here the rows are laid out wider than
// that, so a kernel that strides by anything but ld8 reads another token's values (or the zero padding), and its
// outputs differ from quant_gemv's over rows K64 apart, compared bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

constexpr QuantType kFormats[] = {QuantType::Q4_0, QuantType::Q4_1, QuantType::Q5_0,   QuantType::Q5_1,
                                  QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K,   QuantType::Q6_K,
                                  QuantType::IQ4_NL, QuantType::IQ4_XS};

struct PaddedActivations {
  std::vector<float> d, dsum16, dsum32, dx8, dxsum4;
  std::vector<int32_t> xsum16, neg8, neg128;
  std::vector<int8_t> xs8;
  QuantActivations act{};
};

// x [T, K] quantized into rows ld8 apart, with the lane sums of the route that runs (`vnni` or AVX2).
void quantize_padded(const float* x, size_t T, size_t K, size_t ld8, bool vnni, PaddedActivations& p) {
  p.d.assign(T * K / 32, 0.f);
  p.dsum16.assign(T * K / 16, 0.f);
  p.dsum32.assign(T * K / 32, 0.f);
  p.xsum16.assign(T * K / 16, 0);
  p.xs8.assign(T * ld8, 0);
  for (auto* v : {&p.dx8, &p.dxsum4}) v->assign(T * ld8 / 4, 0.f);
  for (auto* v : {&p.neg8, &p.neg128}) v->assign(T * ld8 / 4, 0);
  const QuantActivationsOut out{.q = nullptr, .d = p.d.data(), .dsum16 = p.dsum16.data(),
                                .dsum32 = p.dsum32.data(), .xsum16 = p.xsum16.data(), .xs8 = p.xs8.data(),
                                .dx8 = p.dx8.data(), .xsum4_neg8 = p.neg8.data(), .xsum4_neg128 = p.neg128.data(),
                                .dxsum4 = p.dxsum4.data(), .ld8 = ld8};
  quantize_activations(x, T, K, out);
  if (vnni)
    quant_vnni_lane_sums(T, out);
  else
    quant_avx2_lane_sums(T, out);
  p.act = QuantActivations{.q = nullptr, .xs8 = out.xs8, .dx8 = out.dx8, .xsum4_neg8 = out.xsum4_neg8,
                           .xsum4_neg128 = out.xsum4_neg128, .dxsum4 = out.dxsum4, .d = out.d,
                           .dsum16 = out.dsum16, .dsum32 = out.dsum32, .xsum16 = out.xsum16, .ld8 = ld8};
}

TEST(QuantActivationStride, RowsReadTheActivationsAtTheirStride) {
  int checked = 0;
  testing::for_each_target([&](Target) {
    const bool vnni = quant_gemv_vnni_enabled();
    if (!vnni && !quant_gemv_avx2_enabled()) return;
    for (QuantType type : kFormats)
      for (bool regrouped : {false, true}) {
        // The formats quant_gemv sends to these rows on this target (int_rows_of in gemv.cc).
        const bool runs = vnni ? quant_gemv_vnni_handles(type)
                               : quant_gemv_avx2_handles(type) || (regrouped && row_groups_iq4(type));
        if (!runs || (regrouped && !row_groups_format(type))) continue;
        SCOPED_TRACE(std::string(quant_type_name(type)) + (regrouped ? " regrouped" : " GGUF rows"));
        const int64_t N = 32, K = quant_type_info(uint32_t(type))->block_elems == 256 ? 512 : 96;
        const size_t T = 3, ld8 = size_t(K + 63) / 64 * 64 + 128;
        const std::vector<uint8_t> raw = testing::random_quant_rows(type, N, K, 11 + uint64_t(type));
        const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), type, N, K, "w");
        std::vector<uint8_t> bytes(raw.size());
        const QuantMatrix w = regrouped ? to_row_groups(gguf, bytes.data()) : gguf;
        testing::HostTensor x(DType::f32, {int64_t(T), K}, 5 + uint64_t(type));
        PaddedActivations p;
        quantize_padded(x.view.ptr<float>(), T, size_t(K), ld8, vnni, p);
        std::vector<float> got(T * size_t(N), std::numeric_limits<float>::quiet_NaN()), want(got.size());
        const QuantGemvTask g{w, x.view.ptr<float>(), nullptr, p.act, T, 0, size_t(N), nullptr, got.data(),
                              size_t(N)};
        ASSERT_TRUE(vnni ? quant_gemv_rows_vnni(g) : quant_gemv_rows_avx2(g));
        quant_gemv(w, nullptr, x.view.ptr<float>(), int64_t(T), want.data(), N);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "token 1, row 0: " << got[size_t(N)] << " vs " << want[size_t(N)];
        ++checked;
      }
  });
  if (checked == 0) GTEST_SKIP() << "no target here runs the VNNI or AVX2 rows";
}

}  // namespace
}  // namespace attnzoo
