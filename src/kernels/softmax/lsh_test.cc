// LSH attention: the fast path against the double reference on the same buckets, and the hashing step
// against rotations computed in double, on every dispatch target.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/softmax/lsh.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct LshCase {
  int64_t B, T, H, D, Dv, num_hashes, num_buckets, chunk;
  bool causal;
};

std::vector<int32_t> hash(const HostTensor& qk, const HostTensor& rot, const LshCase& c) {
  std::vector<int32_t> buckets(size_t(c.B * c.H * c.num_hashes * c.T), -1);
  lsh_hash(qk.view, rot.view, TensorView::contiguous(buckets.data(), DType::i32, {c.B, c.H, c.num_hashes, c.T}));
  return buckets;
}

void check_case(const LshCase& c, uint64_t seed = 1) {
  SCOPED_TRACE("T=" + std::to_string(c.T) + " hashes=" + std::to_string(c.num_hashes) + " buckets=" +
               std::to_string(c.num_buckets) + " chunk=" + std::to_string(c.chunk) + " causal=" +
               std::to_string(c.causal));
  HostTensor qk(DType::f32, {c.B, c.T, c.H, c.D}, seed), v(DType::f32, {c.B, c.T, c.H, c.Dv}, seed + 1);
  HostTensor rot(DType::f32, {c.H, c.D, c.num_hashes, c.num_buckets / 2}, seed + 2);
  std::vector<int32_t> buckets = hash(qk, rot, c);
  const TensorView bv = TensorView::contiguous(buckets.data(), DType::i32, {c.B, c.H, c.num_hashes, c.T});
  HostTensor out(DType::f32, {c.B, c.T, c.H, c.Dv}, 0, 0.f), ref(DType::f32, {c.B, c.T, c.H, c.Dv}, 0, 0.f);
  const LshOptions opts{c.chunk, c.causal};
  lsh_attention_reference(make_lsh_problem(qk.view, v.view, bv, ref.view, opts));
  testing::for_each_target([&](Target) {
    lsh_attention(make_lsh_problem(qk.view, v.view, bv, out.view, opts));
    EXPECT_LE(testing::max_abs_diff(out, ref), 1e-5);
  });
}

TEST(LshAttention, OddLengthsAndSeveralRounds) {
  // 200 and 97 are not multiples of the chunk: the last chunk is short and chunks straddle rounds.
  for (bool causal : {false, true}) {
    check_case({2, 200, 2, 32, 24, 3, 8, 32, causal});
    check_case({1, 97, 3, 64, 64, 2, 4, 16, causal});
    check_case({1, 128, 1, 16, 16, 1, 16, 32, causal});  // one round, whole chunks: transformers' own shapes
  }
}

TEST(LshAttention, FewBucketsKeepPositionOrder) {
  // Two buckets: most tokens share one, so the stable (bucket, position) order decides every chunk.
  check_case({1, 150, 2, 32, 32, 2, 2, 24, true});
}

TEST(LshAttention, ShortSequencesAttendToEverything) {
  // T <= chunk_length: no hashing; causal rows see all earlier tokens, token 0 only itself.
  for (bool causal : {false, true}) {
    check_case({2, 40, 2, 32, 16, 2, 4, 64, causal});
    check_case({1, 1, 1, 8, 8, 1, 2, 4, causal});
  }
}

TEST(LshAttention, HashPicksTheBestRotation) {
  const LshCase c{2, 70, 3, 48, 48, 3, 16, 32, false};
  HostTensor qk(DType::f32, {c.B, c.T, c.H, c.D}, 5), rot(DType::f32, {c.H, c.D, c.num_hashes, c.num_buckets / 2}, 6);
  const int64_t half = c.num_buckets / 2;
  testing::for_each_target([&](Target) {
    std::vector<int32_t> buckets = hash(qk, rot, c);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t r = 0; r < c.num_hashes; ++r)
          for (int64_t t = 0; t < c.T; ++t) {
            std::vector<double> rotated(size_t(2 * half));
            for (int64_t k = 0; k < half; ++k) {
              double dot = 0;
              for (int64_t d = 0; d < c.D; ++d)
                dot += double(qk.at(((b * c.T + t) * c.H + h) * c.D + d)) *
                       double(rot.at(((h * c.D + d) * c.num_hashes + r) * half + k));
              rotated[size_t(k)] = dot, rotated[size_t(half + k)] = -dot;
            }
            const int32_t got = buckets[size_t(((b * c.H + h) * c.num_hashes + r) * c.T + t)];
            ASSERT_GE(got, 0);
            ASSERT_LT(got, c.num_buckets);
            double best = -INFINITY;
            for (double x : rotated) best = std::max(best, x);
            EXPECT_GE(rotated[size_t(got)], best - 1e-4) << "b=" << b << " h=" << h << " r=" << r << " t=" << t;
          }
  });
}

TEST(LshAttention, ErrorsNameTheArgument) {
  HostTensor qk(DType::f32, {1, 8, 2, 16}, 1), v(DType::f32, {1, 8, 2, 16}, 2), out(DType::f32, {1, 8, 2, 16}, 3);
  std::vector<int32_t> buckets(2 * 8, 0);
  const TensorView bv = TensorView::contiguous(buckets.data(), DType::i32, {1, 2, 1, 8});
  testing::expect_error<ArgumentError>([&] { make_lsh_problem(qk.view, v.view, bv, out.view, {0, false}); },
                                       "chunk_length");
  HostTensor v_short(DType::f32, {1, 7, 2, 16}, 2);
  testing::expect_error<ArgumentError>([&] { make_lsh_problem(qk.view, v_short.view, bv, out.view, {}); }, "v:");
  buckets[3] = -2;
  testing::expect_error<ArgumentError>([&] { make_lsh_problem(qk.view, v.view, bv, out.view, {}); }, "buckets:");
  const TensorView wrong_heads = TensorView::contiguous(buckets.data(), DType::i32, {1, 1, 2, 8});
  testing::expect_error<ArgumentError>([&] { make_lsh_problem(qk.view, v.view, wrong_heads, out.view, {}); },
                                       "buckets:");
  HostTensor rot(DType::f32, {2, 15, 1, 2}, 4);
  testing::expect_error<ArgumentError>([&] { lsh_hash(qk.view, rot.view, bv); }, "rotations:");
}

}  // namespace
}  // namespace attnzoo
