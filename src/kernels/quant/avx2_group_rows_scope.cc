#include "kernels/quant/avx2_group_rows_scope.h"

#include <algorithm>
#include <vector>

#include "core/avx_vnni.h"
#include "core/error.h"
#include "kernels/quant/gemv_kernels.h"

namespace attnzoo {

Avx2GroupRowsSupport avx2_group_rows_support() {
  const std::vector<Target>& targets = supported_targets();
  if (std::find(targets.begin(), targets.end(), Target::avx2) == targets.end())
    return {false, false, "this CPU has no AVX2"};
  const AvxVnniSupport& vnni = avx_vnni_support();
  if (vnni.use) return {true, true, ""};
  return {true, false, vnni.cpu ? "AVX-VNNI turned off (ATTNZOO_AVX_VNNI=0)" : "this CPU has no AVX-VNNI"};
}

Avx2GroupRowsScope::Avx2GroupRowsScope()
    : saved_target_(active_target()), saved_allowed_(quant_gemv_groups_avx_vnni_allowed()) {
  const Avx2GroupRowsSupport support = avx2_group_rows_support();
  require(support.avx2, "target", "the AVX2 regrouped rows need the avx2 target: " + support.skipped);
  set_target(Target::avx2);
  quant_gemv_groups_allow_avx_vnni(false);
}

Avx2GroupRowsScope::~Avx2GroupRowsScope() {
  quant_gemv_groups_allow_avx_vnni(saved_allowed_);
  set_target(saved_target_);  // cannot throw: it was the active target, so this CPU and build run it
}

void Avx2GroupRowsScope::use(Avx2LaneSums form) {
  if (form == Avx2LaneSums::vpdpbusd) {
    const Avx2GroupRowsSupport support = avx2_group_rows_support();
    require(support.vpdpbusd, "lane_sums", std::string("vpdpbusd cannot run: ") + support.skipped);
  }
  quant_gemv_groups_allow_avx_vnni(form == Avx2LaneSums::vpdpbusd);
}

}  // namespace attnzoo
