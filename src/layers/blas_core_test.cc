// OpenBLAS's core: its SIMD class, when attnzoo overrides OpenBLAS's choice, and that the override reaches the
// kernels Linear's GEMM runs.
#include "layers/blas_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "layers/linear.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

constexpr const char* kDynamic = "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64";
constexpr const char* kFixed = "OpenBLAS 0.3.21 NO_AFFINITY Prescott MAX_THREADS=64";

TEST(BlasCore, KnownCoresMapToTheirVectorWidth) {
  EXPECT_EQ(blas_core_class("SkylakeX"), Target::avx512);
  EXPECT_EQ(blas_core_class("Cooperlake"), Target::avx512);
  EXPECT_EQ(blas_core_class("sapphirerapids"), Target::avx512);  // OpenBLAS spells some names in lower case
  EXPECT_EQ(blas_core_class("Haswell"), Target::avx2);
  EXPECT_EQ(blas_core_class("Zen"), Target::avx2);
  EXPECT_EQ(blas_core_class("Sandybridge"), Target::scalar);
  EXPECT_EQ(blas_core_class("Prescott"), Target::scalar);
  EXPECT_EQ(blas_core_class("NEOVERSEN1"), std::nullopt);
  EXPECT_EQ(blas_core_class(""), std::nullopt);
}

TEST(BlasCore, AFallbackCoreIsReplacedByTheTargetClassCore) {
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512_bf16, nullptr, kDynamic), "SkylakeX");
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512, nullptr, kDynamic), "SkylakeX");
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx2, nullptr, kDynamic), "Haswell");  // a forced avx2 target
  EXPECT_EQ(blas_core_to_force("Nehalem", Target::avx2, nullptr, kDynamic), "Haswell");
  EXPECT_EQ(blas_core_to_force("Sandybridge", Target::avx512, nullptr, kDynamic), "SkylakeX");
  // An empty OPENBLAS_CORETYPE chooses no core (0.3.21 then picks one by the CPU's features).
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512, "", kDynamic), "SkylakeX");
}

TEST(BlasCore, OpenBlasKeepsEveryCoreItWasNotLeftWith) {
  // A core OpenBLAS chose for a CPU it knows, whatever its width: the measurements on AMD were made with these.
  for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids", "Haswell", "Zen"})
    for (Target t : {Target::avx2, Target::avx512, Target::avx512_bf16})
      EXPECT_EQ(blas_core_to_force(core, t, nullptr, kDynamic), std::nullopt) << core << " " << target_name(t);
  // AMD's Bulldozer family: OpenBLAS's own kernels for those CPUs, and Excavator runs the avx2 target.
  for (const char* core : {"Bulldozer", "Piledriver", "Steamroller", "Excavator"})
    EXPECT_EQ(blas_core_to_force(core, Target::avx2, nullptr, kDynamic), std::nullopt) << core;
  EXPECT_EQ(blas_core_to_force("Prescott", Target::scalar, nullptr, kDynamic), std::nullopt);  // nothing wider runs
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512, "Prescott", kDynamic), std::nullopt);  // the user's
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512, "Haswell", kDynamic), std::nullopt);
  EXPECT_EQ(blas_core_to_force("Prescott", Target::avx512, nullptr, kFixed), std::nullopt);  // no other kernels
  EXPECT_EQ(blas_core_to_force("NEOVERSEN1", Target::avx512, nullptr, kDynamic), std::nullopt);  // unknown name
  EXPECT_EQ(blas_core_to_force("", Target::avx512, nullptr, kDynamic), std::nullopt);
}

TEST(BlasCore, TheLinkedLibraryNamesItsCore) {
  const BlasKernel k = blas_kernel();
  EXPECT_NE(k.config.find("OpenBLAS"), std::string::npos) << k.config;
  EXPECT_FALSE(k.core.empty());
}

// On a CPU the linked OpenBLAS does not know (Debian 12's 0.3.21 on Emerald Rapids reports Prescott), Linear's
// first GEMM runs on the class core attnzoo selected, and computes the same product.
TEST(BlasCore, LinearsFirstGemmRunsTheSelectedCore) {
  const int64_t T = 16, N = 48, K = 64;
  testing::HostTensor w(DType::f32, {N, K}, 5, 0.5f), x(DType::f32, {T, K}, 6, 1.f);
  std::vector<float> got(size_t(T * N)), want(size_t(T * N));
  linear_gemm(w.view, nullptr, x.view.ptr<float>(), T, got.data(), N, LinearGemmBackend::openblas);
  const BlasCoreChoice& choice = configure_blas();  // the first GEMM's decision, not a new one
  // attnzoo sets the variable for the switch alone: left set, it would read here as the user's choice.
  if (const char* env = std::getenv("OPENBLAS_CORETYPE"); env && *env) {
    EXPECT_EQ(choice.selected, "") << "switched although OPENBLAS_CORETYPE=" << env << ", or left it set";
    GTEST_SKIP() << "OPENBLAS_CORETYPE=" << env << " chooses the core";
  }
  const std::optional<std::string> wanted =
      blas_core_to_force(choice.detected, choice.target, nullptr, blas_kernel().config);
  if (!wanted)
    GTEST_SKIP() << "OpenBLAS chose " << choice.detected << " itself for the " << target_name(choice.target)
                 << " target: nothing to correct here";
  EXPECT_EQ(choice.selected, *wanted) << "detected " << choice.detected;
  EXPECT_EQ(blas_kernel().core, *wanted);
  linear_reference(w.view, nullptr, x.view.ptr<float>(), T, want.data(), N);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3) << i;
}

}  // namespace
}  // namespace attnzoo
