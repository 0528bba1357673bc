// Linear attention (no decay, feature maps, normaliser): chunked and recurrent against the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/linear/common/gla_test_util.h"
#include "kernels/linear/linear_attention/linear_attention.h"

namespace attnzoo {
namespace {
using testing::GlaCase;
using testing::GlaRunArgs;
using testing::HostTensor;

void check(const GlaCase& c, FeatureMap fm, bool normalize, bool with_z = false) {
  const int64_t N = c.num_seqs();
  // Positive z keeps the normaliser away from zero, as a running sum of elu+1 keys would be.
  HostTensor z0 = testing::uniform_tensor({N, 1, c.H, c.K}, 21, 0.5f, 2.f);
  HostTensor z_ref(DType::f32, {N, 1, c.H, c.K}, 0, 0.f), z(DType::f32, {N, 1, c.H, c.K}, 0, 0.f);
  testing::expect_gla_paths_agree(c, [&](GlaPath path, const GlaRunArgs& a) {
    LinearAttentionOptions o;
    static_cast<GlaOptions&>(o) = a.opts;
    o.feature_map = fm;
    o.normalize = normalize;
    if (normalize && with_z) {
      o.initial_z = z0.view;
      o.final_z = path == GlaPath::reference ? z_ref.view : z.view;
    }
    if (path == GlaPath::reference) linear_attn_reference(a.q, a.k, a.v, a.o, o);
    if (path == GlaPath::recurrent) recurrent_linear_attn(a.q, a.k, a.v, a.o, o);
    if (path == GlaPath::chunk) chunk_linear_attn(a.q, a.k, a.v, a.o, o);
    if (path != GlaPath::reference && normalize && with_z) EXPECT_LE(testing::relative_rms(z, z_ref), 1e-5);
  });
}

TEST(LinearAttention, FeatureMapsUnnormalised) {
  for (FeatureMap fm : {FeatureMap::identity, FeatureMap::relu, FeatureMap::elu_plus_one})
    for (int64_t T : {1, 15, 64, 65, 500})
      check({.B = 2, .T = T, .H = 2, .HV = 2, .K = 32, .V = 32, .initial_state = true}, fm, false);
}

TEST(LinearAttention, Normalised) {
  for (int64_t T : {1, 63, 1000}) check({.B = 1, .T = T, .H = 2, .HV = 2, .K = 64, .V = 64}, FeatureMap::elu_plus_one, true);
  check({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 32, .V = 32, .initial_state = true}, FeatureMap::elu_plus_one, true,
        /*with_z=*/true);
  check({.B = 1, .T = 200, .H = 2, .HV = 4, .K = 60, .V = 100, .cu_seqlens = {0, 100, 101, 200},
         .initial_state = true}, FeatureMap::elu_plus_one, true, /*with_z=*/true);
  check({.B = 1, .T = 100, .H = 1, .HV = 1, .K = 16, .V = 16}, FeatureMap::relu, true);
}

TEST(LinearAttention, HeadDimsAndGroups) {
  for (int64_t D : {16, 60, 100, 128}) check({.B = 1, .T = 70, .H = 1, .HV = 2, .K = D, .V = D}, FeatureMap::identity, false);
}

TEST(LinearAttention, LongSequenceStable) {
  const int64_t T = 65536, K = 16;
  HostTensor q(DType::f32, {1, T, 1, K}, 1), k(DType::f32, {1, T, 1, K}, 2), v(DType::f32, {1, T, 1, K}, 3);
  HostTensor a(DType::f32, {1, T, 1, K}, 0, 0.f), b(DType::f32, {1, T, 1, K}, 0, 0.f);
  LinearAttentionOptions o;
  o.feature_map = FeatureMap::elu_plus_one;
  chunk_linear_attn(q.view, k.view, v.view, a.view, o);
  recurrent_linear_attn(q.view, k.view, v.view, b.view, o);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_TRUE(std::isfinite(a.at(i))) << i;
  EXPECT_LE(testing::relative_rms(a, b), 1e-4);
}

TEST(LinearAttention, BadArguments) {
  HostTensor q(DType::f32, {1, 8, 2, 16}, 1), o(DType::f32, {1, 8, 2, 16}, 0), z(DType::f32, {1, 1, 2, 8}, 0);
  LinearAttentionOptions opts;
  opts.initial_z = z.view;  // wrong K
  EXPECT_THROW(chunk_linear_attn(q.view, q.view, q.view, o.view, opts), ArgumentError);
  opts.normalize = false;  // z without the normaliser
  EXPECT_THROW(chunk_linear_attn(q.view, q.view, q.view, o.view, opts), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
