// Decode GEMV rows streaming weights from memory (matrices larger than the L3 cache) and from L2, one thread
// (run with ATTNZOO_THREADS=1: the int8 columns are whole quant_gemv calls), against a plain read of the same
// bytes in the same process; rates from the thread's CPU time, medians of 5 interleaved rounds. "int8" reads the
// GGUF rows as they are, "grouped" the same rows regrouped 16 at a time (row_groups.h), which is what a model's
// Linear holds on a VNNI or AVX2 CPU (row_groups_pay), read by the VNNI rows or, with ATTNZOO_TARGET=avx2 (or on
// an AVX2 CPU), by the AVX2 ones (the line names which). STREAM_FORMATS=Q4_0,Q4_K (say) keeps those formats only.
// Run by hand:
//   test_kernels_quant --gtest_also_run_disabled_tests --gtest_filter='*Stream*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_groups.h"
#include "testing/random_blocks.h"
#include "testing/stream_bench.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

TEST(Quant, DISABLED_BenchGemvStream) {
  const int64_t K = 1024;
  testing::HostTensor x(DType::f32, {4, K}, 1);
  // 1 GiB (memory speed: over 3x the L3 cache of the machines measured, 300 MiB on the Emerald Rapids), then
  // 512 KiB and 24 KiB repeated (L2, L1: the kernels' compute speed)
  for (size_t bytes_target : {size_t(1) << 30, size_t(512) << 10, size_t(24) << 10})
  for (QuantType t : {QuantType::Q4_0, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K,
                      QuantType::Q5_0, QuantType::Q4_1, QuantType::IQ4_NL, QuantType::IQ4_XS, QuantType::BF16}) {
    const char* only = std::getenv("STREAM_FORMATS");
    if (only && !std::strstr(only, quant_type_name(t))) continue;
    // whole groups of 16 rows (at least one), so that every format that can be regrouped is
    const int64_t row_bytes = *quant_row_bytes(t, K);
    const int64_t N = std::max<int64_t>(16, int64_t(bytes_target) / row_bytes / 16 * 16);
    const std::vector<uint8_t> raw = testing::random_quant_rows(t, N, K, 2);
    const QuantMatrix w = make_quant_matrix(raw.data(), raw.size(), t, N, K, "w");
    std::vector<uint8_t> regrouped;
    QuantMatrix grouped = w;
    if (row_groups_pay(w)) {
      regrouped.resize(raw.size());
      grouped = to_row_groups(w, regrouped.data());
    }
    std::vector<float> y(size_t(4 * N));
    for (int64_t T : {1, 4}) {
      const QuantGemvTask task{w, x.view.ptr<float>(), nullptr, {}, size_t(T), 0, size_t(N), nullptr, y.data(),
                               size_t(N)};
      std::vector<float> xsum(size_t(T * K / 16));
      if (quant_is_blocked(t)) activation_sums16(x.view.ptr<float>(), size_t(T), size_t(K), xsum.data());
      QuantGemvTask with_sums = task;
      with_sums.xsum16 = xsum.data();
      std::vector<double> rate[5];
      volatile float sink = 0;
      for (int r = 0; r < 5; ++r) {
        for (int path = 0; path < 5; ++path) {
          const int reps = bytes_target < (size_t(1) << 20) ? int((size_t(50) << 20) / bytes_target) : 1;
          const double t0 = testing::thread_seconds();
          for (int i = 0; i < reps; ++i) {
            if (path == 0) sink = sink + testing::stream_read(reinterpret_cast<const float*>(raw.data()), raw.size() / 4);
            if (path == 1) quant_gemv_rows_f32_portable(with_sums);
            if (path == 2) quant_gemv_rows_f32(with_sums);
            if (path == 3) quant_gemv(w, nullptr, x.view.ptr<float>(), T, y.data(), N);
            if (path == 4) quant_gemv(grouped, nullptr, x.view.ptr<float>(), T, y.data(), N);
          }
          rate[path].push_back(double(raw.size()) * reps / (testing::thread_seconds() - t0) * 1e-9);
        }
      }
      for (auto& v : rate) std::sort(v.begin(), v.end());
      std::printf("%s %-5s T=%lld  read %5.1f GB/s  highway %5.1f GB/s (%3.0f%%)  rows_f32 %5.1f GB/s (%3.0f%%)  int8 %5.1f GB/s (%3.0f%%)  grouped %5.1f GB/s (%3.0f%%)%s%s\n",
                  bytes_target < (size_t(64) << 10) ? "L1 " : bytes_target < (size_t(1) << 20) ? "L2 " : "mem", quant_type_name(t), (long long)T, rate[0][2], rate[1][2], 100 * rate[1][2] / rate[0][2], rate[2][2],
                  100 * rate[2][2] / rate[0][2], rate[3][2], 100 * rate[3][2] / rate[0][2], rate[4][2],
                  100 * rate[4][2] / rate[0][2], grouped.row_group ? "" : " (not regrouped)",
                  !grouped.row_group ? "" : quant_gemv_vnni_enabled()            ? " vnni"
                  : quant_gemv_groups_avx_vnni_enabled() ? " avx2 avx-vnni"
                                                         : " avx2");
    }
  }
}

}  // namespace
}  // namespace attnzoo
