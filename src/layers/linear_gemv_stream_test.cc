// Decode GEMV over dense weights (bf16, f32) streamed from memory, against a plain read of the same bytes in the
// same process: each shape is rotated over enough copies (>= 1 GiB) that no pass finds it in the L3 cache, and
// every rate is the median of 5 interleaved rounds. One thread: the thread's CPU time, gemv_rows over the whole
// matrix; with ATTNZOO_THREADS > 1, wall time of linear_gemv and of a read split as evenly over the pool. Run by
// hand (it allocates ~1.3 GiB per shape):
//   ATTNZOO_THREADS=1 test_layers --gtest_also_run_disabled_tests --gtest_filter='*GemvStream*'
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "layers/linear.h"
#include "layers/linear_kernels.h"
#include "testing/stream_bench.h"

namespace attnzoo {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Same bytes split into contiguous slices, one per pool task (several tasks per thread, like linear_gemv).
float read_all(const float* p, size_t n) {
  ThreadPool& pool = ThreadPool::global();
  if (pool.num_threads() == 1) return testing::stream_read(p, n);
  const int64_t tasks = int64_t(pool.num_threads()) * 4;
  const size_t per = (n / size_t(tasks) + 63) / 64 * 64;
  std::vector<float> part(static_cast<size_t>(tasks));
  pool.parallel_for(tasks, [&](int64_t t, int) {
    const size_t b = std::min(n, size_t(t) * per);
    part[size_t(t)] = testing::stream_read(p + b, std::min(per, n - b));
  });
  float s = 0;
  for (float v : part) s += v;
  return s;
}

TEST(Linear, DISABLED_BenchGemvStream) {
  const bool one_thread = ThreadPool::global().num_threads() == 1;
  struct Shape {
    const char* name;
    int64_t N, K;
  };
  for (DType dt : {DType::bf16, DType::f32})
    for (const Shape& s : {Shape{"gate/up 3072x1024", 3072, 1024}, Shape{"down 1024x3072", 1024, 3072},
                           Shape{"lm_head 151936x1024", 151936, 1024}}) {
      const size_t mat_bytes = size_t(s.N * s.K) * dtype_size(dt);
      const size_t copies = std::max<size_t>(2, ((size_t(1) << 30) + mat_bytes - 1) / mat_bytes);
      AlignedBuffer<float> w(copies * mat_bytes / 4);
      // Values near 1 (bf16 0x3f80.., f32 1.0..): any finite pattern streams the same.
      if (dt == DType::bf16)
        for (size_t i = 0; i < copies * mat_bytes / 2; ++i) reinterpret_cast<uint16_t*>(w.data())[i] = 0x3f80 + (i & 7);
      else
        for (size_t i = 0; i < copies * mat_bytes / 4; ++i) w[i] = 1.f + float(i & 7) / 8;
      std::vector<float> x(size_t(8 * s.K), 0.5f), y(size_t(8 * s.N));
      std::vector<Target> targets = supported_targets();
      std::erase(targets, Target::scalar);  // not a decode path anyone runs at scale
      for (int64_t T : {1, 4}) {
        // path 0: the read; then one GEMV path per target, best first
        std::vector<std::vector<double>> rate(1 + targets.size());
        volatile float sink = 0;
        for (int r = 0; r < 5; ++r)
          for (size_t path = 0; path < rate.size(); ++path) {
            if (path > 0) set_target(targets[path - 1]);
            const double t0 = one_thread ? testing::thread_seconds() : wall_seconds();
            for (size_t c = 0; c < copies; ++c) {
              const char* m = reinterpret_cast<const char*>(w.data()) + c * mat_bytes;
              if (path == 0) {
                sink = sink + read_all(reinterpret_cast<const float*>(m), mat_bytes / 4);
              } else if (one_thread) {
                gemv_rows({m, dt, size_t(s.K), x.data(), size_t(T), 0, size_t(s.N), nullptr, y.data(), size_t(s.N)});
              } else {
                const TensorView v = TensorView::contiguous(const_cast<char*>(m), dt, {s.N, s.K});
                linear_gemv(v, nullptr, x.data(), T, y.data(), s.N);
              }
            }
            const double sec = (one_thread ? testing::thread_seconds() : wall_seconds()) - t0;
            rate[path].push_back(double(copies * mat_bytes) / sec * 1e-9);
          }
        set_target(supported_targets().front());
        for (auto& v : rate) std::sort(v.begin(), v.end());
        std::printf("%-4s %-20s T=%lld threads=%d  read %5.1f GB/s", dtype_name(dt), s.name, (long long)T,
                    ThreadPool::global().num_threads(), rate[0][2]);
        for (size_t i = 0; i < targets.size(); ++i)
          std::printf("  %s %5.1f (%3.0f%%)", target_name(targets[i]), rate[i + 1][2], 100 * rate[i + 1][2] / rate[0][2]);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
}

}  // namespace
}  // namespace attnzoo
