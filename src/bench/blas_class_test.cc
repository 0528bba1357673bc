// The notes printed when the BLAS core is narrower than the active target, or when attnzoo switched it.
#include <gtest/gtest.h>

#include "bench/blas_class.h"

namespace attnzoo::bench {
namespace {

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

TEST(BlasClass, ChoiceNoteNamesBothCoresOnlyWhenAttnzooSwitched) {
  EXPECT_EQ(blas_choice_note({"Zen", "", Target::avx2}), "");
  const std::string note = blas_choice_note({"Prescott", "SkylakeX", Target::avx512_bf16});
  EXPECT_NE(note.find("OpenBLAS detected Prescott"), std::string::npos) << note;
  EXPECT_NE(note.find("attnzoo selected SkylakeX"), std::string::npos) << note;
  EXPECT_NE(note.find("avx512_bf16"), std::string::npos) << note;
  EXPECT_NE(note.find("OPENBLAS_CORETYPE"), std::string::npos) << note;
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

}  // namespace
}  // namespace attnzoo::bench
