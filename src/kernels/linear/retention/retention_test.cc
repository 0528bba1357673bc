// Retention: parallel, chunked and recurrent forms against the double-precision recurrence, every target.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/linear/common/gla_test_util.h"
#include "kernels/linear/retention/retention.h"

namespace attnzoo {
namespace {
using testing::GlaCase;
using testing::GlaRunArgs;
using testing::HostTensor;

void check(const GlaCase& c) {
  testing::expect_gla_paths_agree(c, [&](GlaPath path, const GlaRunArgs& a) {
    if (path == GlaPath::reference) retention_reference(a.q, a.k, a.v, a.o, a.opts);
    if (path == GlaPath::recurrent) recurrent_retention(a.q, a.k, a.v, a.o, a.opts);
    if (path == GlaPath::chunk) chunk_retention(a.q, a.k, a.v, a.o, a.opts);
  });
}

TEST(Retention, Decays) {
  const std::vector<float> g = retention_log_decays(3);
  EXPECT_FLOAT_EQ(std::exp(g[0]), 1.f - 1.f / 32.f);
  EXPECT_FLOAT_EQ(std::exp(g[2]), 1.f - 1.f / 128.f);
}

TEST(Retention, ChunkAndRecurrent) {
  for (int64_t T : {1, 63, 65, 500}) check({.B = 2, .T = T, .H = 4, .HV = 4, .K = 32, .V = 32, .initial_state = T > 60});
  check({.B = 1, .T = 200, .H = 2, .HV = 4, .K = 60, .V = 100, .cu_seqlens = {0, 70, 200}, .initial_state = true});
}

TEST(Retention, ParallelMatchesReference) {
  testing::for_each_target([&](Target) {
    for (int64_t T : {1, 64, 65, 300}) {
      const int64_t H = 4, K = 48;
      HostTensor q(DType::f32, {2, T, H, K}, 1), k(DType::f32, {2, T, H, K}, 2), v(DType::f32, {2, T, H, K}, 3);
      HostTensor a(DType::f32, {2, T, H, K}, 0, 0.f), b(DType::f32, {2, T, H, K}, 0, 0.f);
      parallel_retention(q.view, k.view, v.view, a.view, {});
      retention_reference(q.view, k.view, v.view, b.view, {});
      EXPECT_LE(testing::relative_rms(a, b), 1e-4) << "T=" << T;
    }
  });
}

TEST(Retention, ParallelRefusesState) {
  HostTensor q(DType::f32, {1, 8, 1, 16}, 1), o(DType::f32, {1, 8, 1, 16}, 0), s(DType::f32, {1, 1, 16, 16}, 0);
  GlaOptions opts;
  opts.final_state = s.view;
  EXPECT_THROW(parallel_retention(q.view, q.view, q.view, o.view, opts), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
