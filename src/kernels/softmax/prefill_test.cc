// The tiled prefill kernel against the double-precision reference, on every dispatch target.
#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

struct Case {
  int64_t B, Tq, Tk, Hq, Hkv, D;
  DType dtype = DType::f32;
  AttentionOptions opts{};
};

void check_case(const Case& c, uint64_t seed = 1) {
  HostTensor q(c.dtype, {c.B, c.Tq, c.Hq, c.D}, seed), k(c.dtype, {c.B, c.Tk, c.Hkv, c.D}, seed + 1),
      v(c.dtype, {c.B, c.Tk, c.Hkv, c.D}, seed + 2);
  HostTensor out(DType::f32, {c.B, c.Tq, c.Hq, c.D}, 0, 0.f), ref(DType::f32, {c.B, c.Tq, c.Hq, c.D}, 0, 0.f);
  const AttentionProblem p = make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, {});
  attention_prefill_reference(p);
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, c.opts);
    EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5) << "Tq=" << c.Tq << " Tk=" << c.Tk << " D=" << c.D;
  });
}

TEST(Prefill, CausalRaggedLengths) {
  for (int64_t T : {1, 7, 63, 64, 65, 257}) check_case({1, T, T, 2, 2, 64});
}

TEST(Prefill, LongSequence) { check_case({1, 1000, 1000, 2, 1, 32}); }

TEST(Prefill, GqaMqaAndHeadDims) {
  for (int64_t D : {16, 60, 80, 96, 128, 192, 256}) check_case({2, 33, 33, 4, 2, D});
  check_case({1, 70, 70, 8, 1, 64});  // MQA
}

TEST(Prefill, BidirectionalAndBottomRightCausal) {
  Case c{2, 40, 100, 4, 4, 64};
  c.opts.causal = false;
  check_case(c);
  c.opts.causal = true;  // queries are the last 40 positions of 100
  check_case(c);
}

TEST(Prefill, SlidingWindow) {
  for (int64_t w : {1, 16, 64, 100}) {
    Case c{1, 200, 200, 2, 1, 64};
    c.opts.window = w;
    check_case(c);
  }
}

// Soft-capping alone, then sinks, then sinks with ALiBi, a window and a stronger cap, each checked by `check` on a
// 4-head case: the options' order of application is where a kernel would differ from the reference.
template <class Check>
void check_option_mixes(Case c, int64_t window, Check check) {
  static const std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f}, slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  c.opts.softcap = 5.f;
  check(c);
  c.opts.softcap = 0.f;
  c.opts.sinks = sinks.data();
  check(c);
  c.opts.alibi_slopes = slopes.data();
  c.opts.window = window;
  c.opts.softcap = 20.f;
  check(c);
}

TEST(Prefill, SoftcapSinksAlibi) {
  check_option_mixes({1, 130, 130, 4, 2, 64}, 50, [](const Case& c) { check_case(c); });
}

TEST(Prefill, BlockSparse) {
  BlockMask mask({.seq_len = 300, .block = 32, .local_blocks = 2, .global_tokens = 20, .stride = 4,
                  .random_blocks = 1, .seed = 7});
  for (bool causal : {true, false}) {
    Case c{1, 300, 300, 2, 2, 64};
    c.opts.block_mask = &mask;
    c.opts.causal = causal;
    check_case(c);
  }
}

TEST(Prefill, Bf16Inputs) {
  Case c{1, 129, 129, 4, 2, 128, DType::bf16};
  HostTensor q(c.dtype, {1, 129, 4, 128}, 3), k(c.dtype, {1, 129, 2, 128}, 4), v(c.dtype, {1, 129, 2, 128}, 5);
  HostTensor out(DType::bf16, {1, 129, 4, 128}, 0, 0.f), ref(DType::f32, {1, 129, 4, 128}, 0, 0.f);
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, {}));
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, c.opts);
    EXPECT_LE(testing::relative_rms(out, ref), 1e-2);
  });
}

// bf16 q / k / v through every feature: on the avx512_bf16 target the products run on bf16 pairs (AMX tiles
// where the CPU has them; vdpbf16ps in a process with ATTNZOO_AMX=0), on the others widened to f32. The reference
// reads the same bf16 values in double; what is left is the kernel's rounding of the softmax weights to bf16.
void check_bf16_case(const Case& c, const VarlenInfo& varlen = {}, uint64_t seed = 1) {
  const std::vector<int64_t> qs = varlen.num_seqs ? std::vector<int64_t>{c.Tq, c.Hq, c.D}
                                                  : std::vector<int64_t>{c.B, c.Tq, c.Hq, c.D};
  const std::vector<int64_t> ks = varlen.num_seqs ? std::vector<int64_t>{c.Tk, c.Hkv, c.D}
                                                  : std::vector<int64_t>{c.B, c.Tk, c.Hkv, c.D};
  HostTensor q(DType::bf16, qs, seed), k(DType::bf16, ks, seed + 1), v(DType::bf16, ks, seed + 2);
  HostTensor out(DType::f32, qs, 0, 0.f), ref(DType::f32, qs, 0, 0.f);
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, c.opts, varlen));
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, c.opts, varlen);
    EXPECT_LE(testing::relative_rms(out, ref), 4e-3) << "Tq=" << c.Tq << " Tk=" << c.Tk << " D=" << c.D;
    EXPECT_LE(testing::max_abs_diff(out, ref), 3e-2) << "Tq=" << c.Tq << " Tk=" << c.Tk << " D=" << c.D;
  });
}

TEST(Prefill, Bf16EveryFeature) {
  for (int64_t T : {1, 15, 16, 17, 127, 128, 129, 300}) check_bf16_case({1, T, T, 4, 2, 64, DType::bf16});
  for (int64_t D : {60, 64, 80, 96, 128, 192, 256}) check_bf16_case({2, 70, 70, 4, 2, D, DType::bf16});
  check_bf16_case({1, 150, 150, 8, 1, 128, DType::bf16});  // MQA
  Case c{2, 40, 300, 4, 2, 128, DType::bf16};
  c.opts.causal = false;
  check_bf16_case(c);
  c.opts.causal = true;  // bottom-right: the 40 queries are the last of 300 keys
  check_bf16_case(c);
  for (int64_t w : {1, 50, 128, 200}) {
    Case win{1, 400, 400, 4, 2, 64, DType::bf16};
    win.opts.window = w;
    check_bf16_case(win);
  }
  check_option_mixes({1, 260, 260, 4, 2, 64, DType::bf16}, 100, [](const Case& c) { check_bf16_case(c); });
  BlockMask mask({.seq_len = 300, .block = 32, .local_blocks = 2, .global_tokens = 20, .stride = 4,
                  .random_blocks = 1, .seed = 7});
  Case sparse{1, 300, 300, 2, 2, 64, DType::bf16};
  sparse.opts.block_mask = &mask;
  check_bf16_case(sparse);
  const std::vector<int32_t> cu = {0, 1, 8, 71, 136, 393};
  check_bf16_case({1, cu.back(), cu.back(), 4, 2, 64, DType::bf16}, {cu.data(), nullptr, int64_t(cu.size() - 1)});
}

// Scores that rise along the keys by a few units per key tile, then jump: the bf16 path's running maximum
// follows small rises lazily (weights above 1, no rescale) and must rescale on a large one; a missed rescale
// overflows or loses the early keys' share.
TEST(Prefill, Bf16RisingScores) {
  const int64_t T = 700, H = 2, D = 64;
  HostTensor q(DType::bf16, {1, T, H, D}, 1), k(DType::bf16, {1, T, H, D}, 2), v(DType::bf16, {1, T, H, D}, 3);
  auto* qb = reinterpret_cast<uint16_t*>(q.view.data);
  auto* kb = reinterpret_cast<uint16_t*>(k.view.data);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      qb[(t * H + h) * D] = f32_to_bf16(8.f);  // score ~ 8 * k[.., 0] / sqrt(D) + noise
      kb[(t * H + h) * D] = f32_to_bf16(t < 600 ? float(t) / 40.f : float(t) / 8.f);
    }
  HostTensor out(DType::f32, {1, T, H, D}, 0, 0.f), ref(DType::f32, {1, T, H, D}, 0, 0.f);
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, {}, {}));
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, {});
    EXPECT_LE(testing::relative_rms(out, ref), 4e-3);
    EXPECT_LE(testing::max_abs_diff(out, ref), 3e-2);
  });
}

TEST(Prefill, Varlen) {
  const std::vector<int32_t> cu = {0, 1, 8, 71, 136, 393};
  const int64_t total = cu.back();
  HostTensor q(DType::f32, {total, 4, 64}, 1), k(DType::f32, {total, 2, 64}, 2), v(DType::f32, {total, 2, 64}, 3);
  HostTensor out(DType::f32, {total, 4, 64}, 0, 0.f), ref(DType::f32, {total, 4, 64}, 0, 0.f);
  VarlenInfo vl{cu.data(), nullptr, int64_t(cu.size() - 1)};
  AttentionOptions o;
  attention_prefill_reference(make_prefill_problem(q.view, k.view, v.view, ref.view, o, vl));
  testing::for_each_target([&](Target) {
    attention_prefill(q.view, k.view, v.view, out.view, o, vl);
    EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5);
  });
}

TEST(Prefill, ErrorsNameTheArgument) {
  HostTensor q(DType::f32, {1, 4, 3, 16}, 1), k(DType::f32, {1, 4, 2, 16}, 2), out(DType::f32, {1, 4, 3, 16}, 3);
  try {
    attention_prefill(q.view, k.view, k.view, out.view, {});
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("q: head count 3"), std::string::npos) << e.what();
  }
  HostTensor bad(DType::i32, {1, 4, 2, 16}, 0, 0.f);
  EXPECT_THROW(attention_prefill(q.view, bad.view, bad.view, out.view, {}), DTypeError);
}

// The device seam: operands on different devices, a device tensor where only the host path exists, and a GPU
// asked for where there is none are named errors, never a dereferenced device pointer.
TEST(Prefill, DevicesAreCheckedAtTheEntry) {
  HostTensor q(DType::bf16, {1, 4, 2, 64}, 1), k(DType::bf16, {1, 4, 2, 64}, 2), v(DType::bf16, {1, 4, 2, 64}, 3);
  HostTensor out(DType::bf16, {1, 4, 2, 64}, 0, 0.f);
  TensorView qd = q.view, kd = k.view, vd = v.view, od = out.view;
  qd.device = Device::cuda();
  testing::expect_error<ArgumentError>([&] { attention_prefill(qd, k.view, v.view, out.view, {}); },
                                       "k: lives on cpu, q on cuda:0");
  int32_t lens[1] = {4};
  KvCacheView cache{k.view, v.view, lens, nullptr, 0};
  testing::expect_error<ArgumentError>([&] { attention_prefill(qd, cache, out.view, {}); }, "q: lives on cuda:0");
  testing::expect_error<ArgumentError>([&] { attention_decode(qd, cache, out.view, {}); },
                                       "k_cache: lives on cpu, q on cuda:0");
  testing::expect_error<ArgumentError>([&] { attention_decode_reference(qd, cache, out.view, {}); }, "q: lives on");
  if (cuda_device_count() > 0) return;  // the fake device pointers below would be read by a real GPU
  kd.device = vd.device = od.device = Device::cuda();
  EXPECT_THROW(attention_prefill(qd, kd, vd, od, {}), DeviceError);
}

}  // namespace
}  // namespace attnzoo
