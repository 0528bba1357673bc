#pragma once
// The AVX2 regrouped rows (gemv_groups_avx2.cc) chosen for a stretch of work in a process whose active target is
// another, in either form of their lane sums: vpmaddubsw + vpmaddwd, or AVX-VNNI's vpdpbusd where the CPU has it.
// The kernel bench (`attnzoo bench kernels`) times the two forms side by side over the same regrouped weights so;
// on an AVX-512 VNNI CPU its default target would run the VNNI rows instead.
//
// The scope changes two process-wide settings, the active target (set_target) and the AVX-VNNI allowance
// (quant_gemv_groups_allow_avx_vnni), and gives both back as they were when it ends, also when an exception ends
// it. With the thread pool that is safe: both are read when a call picks its kernels (on the calling thread:
// int_rows_of and the activation quantization in gemv.cc) and when one of its pool tasks starts
// (quant_gemv_groups_avx2), and parallel_for returns only after every task of the call has ended, so a change made
// between calls on the one thread that makes them is never seen by half a call. Other threads running kernels
// while a scope is held would run under its target too: the bench holds it on its only calling thread.
#include <string>

#include "core/dispatch.h"

namespace attnzoo {

enum class Avx2LaneSums { vpmaddubsw, vpdpbusd };

struct Avx2GroupRowsSupport {
  bool avx2 = false;      // the CPU and this build run the avx2 target
  bool vpdpbusd = false;  // and the rows may take AVX-VNNI's vpdpbusd (core/avx_vnni.h)
  // Why a form cannot run, as the bench's rows say it ("" when both can): "this CPU has no AVX2", "this CPU has
  // no AVX-VNNI" or "AVX-VNNI turned off (ATTNZOO_AVX_VNNI=0)".
  std::string skipped;
};
Avx2GroupRowsSupport avx2_group_rows_support();

class Avx2GroupRowsScope {
 public:
  // Makes avx2 the active target, its regrouped rows on vpmaddubsw. Throws ArgumentError naming "target" where
  // the avx2 target cannot run.
  Avx2GroupRowsScope();
  ~Avx2GroupRowsScope();
  Avx2GroupRowsScope(const Avx2GroupRowsScope&) = delete;
  Avx2GroupRowsScope& operator=(const Avx2GroupRowsScope&) = delete;

  // The form the next calls take. Throws ArgumentError naming "lane_sums" for vpdpbusd where it cannot run.
  void use(Avx2LaneSums form);

 private:
  Target saved_target_;
  bool saved_allowed_;
};

}  // namespace attnzoo
