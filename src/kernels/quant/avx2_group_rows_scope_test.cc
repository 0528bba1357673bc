// Avx2GroupRowsScope: the kernel bench's way to the AVX2 regrouped rows in a process whose target is another. The
// forms it names are the ones that run (observed through the vpdpbusd task count), their bits are the same, and
// the process's target and AVX-VNNI allowance are what they were once the scope has ended, however it ends.
#include "kernels/quant/avx2_group_rows_scope.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/dispatch.h"
#include "core/error.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"

namespace attnzoo {
namespace {

struct Regrouped {
  std::vector<uint8_t> bytes;
  QuantMatrix w;
};

Regrouped regrouped_q4_0(int64_t N, int64_t K) {
  const std::vector<uint8_t> raw = testing::random_quant_rows(QuantType::Q4_0, N, K, 11);
  const QuantMatrix gguf = make_quant_matrix(raw.data(), raw.size(), QuantType::Q4_0, N, K, "w");
  Regrouped r{std::vector<uint8_t>(raw.size()), {}};
  r.w = to_row_groups(gguf, r.bytes.data());
  return r;
}

TEST(Avx2GroupRowsScope, RunsTheNamedFormAndGivesTheSettingsBack) {
  const Avx2GroupRowsSupport support = avx2_group_rows_support();
  if (!support.avx2) GTEST_SKIP() << support.skipped;
  const Target before = active_target();
  quant_gemv_groups_allow_avx_vnni(false);  // not the default, so that giving back "true" would show
  const int64_t N = 32, K = 256;
  const Regrouped r = regrouped_q4_0(N, K);
  std::vector<float> x(size_t(4 * K)), pairs(size_t(4 * N)), dpbusd(size_t(4 * N));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 101) - 50) / 16.f;
  {
    Avx2GroupRowsScope scope;
    EXPECT_EQ(active_target(), Target::avx2);
    uint64_t tasks = quant_gemv_groups_avx_vnni_tasks();
    quant_gemv(r.w, nullptr, x.data(), 4, pairs.data(), N);
    EXPECT_EQ(quant_gemv_groups_avx_vnni_tasks(), tasks) << "vpdpbusd ran under vpmaddubsw";
    if (support.vpdpbusd) {
      scope.use(Avx2LaneSums::vpdpbusd);
      tasks = quant_gemv_groups_avx_vnni_tasks();
      quant_gemv(r.w, nullptr, x.data(), 4, dpbusd.data(), N);
      EXPECT_GT(quant_gemv_groups_avx_vnni_tasks(), tasks) << "the rows did not take vpdpbusd";
      EXPECT_EQ(0, std::memcmp(pairs.data(), dpbusd.data(), pairs.size() * sizeof(float)));
      scope.use(Avx2LaneSums::vpmaddubsw);
      tasks = quant_gemv_groups_avx_vnni_tasks();
      quant_gemv(r.w, nullptr, x.data(), 1, dpbusd.data(), N);
      EXPECT_EQ(quant_gemv_groups_avx_vnni_tasks(), tasks);
    } else {
      EXPECT_THROW(scope.use(Avx2LaneSums::vpdpbusd), ArgumentError);
    }
  }
  EXPECT_EQ(active_target(), before);
  EXPECT_FALSE(quant_gemv_groups_avx_vnni_allowed());
  quant_gemv_groups_allow_avx_vnni(true);
}

TEST(Avx2GroupRowsScope, AnExceptionEndingItGivesTheSettingsBack) {
  const Avx2GroupRowsSupport support = avx2_group_rows_support();
  if (!support.avx2) GTEST_SKIP() << support.skipped;
  const Target before = active_target();
  try {
    Avx2GroupRowsScope scope;
    if (support.vpdpbusd) scope.use(Avx2LaneSums::vpdpbusd);
    throw std::runtime_error("a failing bench row");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(active_target(), before);
  EXPECT_TRUE(quant_gemv_groups_avx_vnni_allowed());
}

TEST(Avx2GroupRowsScope, SupportSaysWhyAFormCannotRun) {
  const Avx2GroupRowsSupport s = avx2_group_rows_support();
  EXPECT_EQ(s.skipped.empty(), s.avx2 && s.vpdpbusd) << s.skipped;
  if (!s.avx2) EXPECT_EQ(s.skipped, "this CPU has no AVX2");
}

}  // namespace
}  // namespace attnzoo
