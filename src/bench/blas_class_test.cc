// The BLAS core's SIMD class, and the note printed when it is narrower than the active target.
#include <gtest/gtest.h>

#include "bench/blas_class.h"

namespace attnzoo::bench {
namespace {

TEST(BlasClass, KnownCoresMapToTheirVectorWidth) {
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

TEST(BlasClass, NoteOnlyWhenTheBlasKernelsAreNarrower) {
  EXPECT_EQ(blas_class_note("Haswell", Target::avx2, nullptr), "");
  EXPECT_EQ(blas_class_note("Cooperlake", Target::avx512_bf16, nullptr), "");
  EXPECT_EQ(blas_class_note("SkylakeX", Target::avx512_bf16, nullptr), "");  // same f32 kernels
  EXPECT_EQ(blas_class_note("SkylakeX", Target::avx2, nullptr), "");         // wider BLAS: nothing lost
  EXPECT_EQ(blas_class_note("NEOVERSEN1", Target::avx512, nullptr), "");     // unknown: no claim
  const std::string pinned = blas_class_note("Haswell", Target::avx512_bf16, "Haswell");
  EXPECT_NE(pinned.find("Haswell kernels"), std::string::npos) << pinned;
  EXPECT_NE(pinned.find("avx512_bf16"), std::string::npos) << pinned;
  EXPECT_NE(pinned.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << pinned;
  const std::string detected = blas_class_note("Sandybridge", Target::avx2, nullptr);
  EXPECT_NE(detected.find("Sandybridge"), std::string::npos) << detected;
  EXPECT_EQ(detected.find("OPENBLAS_CORETYPE"), std::string::npos) << detected;
}

TEST(BlasClass, ForcedNarrowerTargetsHoldThePeersToTheirClass) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(class_environment(Target::avx2, Target::avx512_bf16),
            (Env{{"ATEN_CPU_CAPABILITY", "avx2"}, {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}, {"OPENBLAS_CORETYPE", "Haswell"}}));
  EXPECT_EQ(class_environment(Target::avx2, Target::avx512).size(), 3u);
  EXPECT_EQ(class_environment(Target::scalar, Target::avx2).at(0), (std::pair<std::string, std::string>{
                                                                      "ATEN_CPU_CAPABILITY", "default"}));
  EXPECT_TRUE(class_environment(Target::avx2, Target::avx2).empty());          // nothing forced
  EXPECT_TRUE(class_environment(Target::avx512, Target::avx512_bf16).empty());  // same f32 kernels and peers
  EXPECT_TRUE(class_environment(Target::avx512_bf16, Target::avx512_bf16).empty());
}

TEST(BlasClass, TheLinkedLibraryNamesItsCore) {
  const BlasKernel k = blas_kernel();
  EXPECT_NE(k.config.find("OpenBLAS"), std::string::npos) << k.config;
  EXPECT_FALSE(k.core.empty());
}

}  // namespace
}  // namespace attnzoo::bench
