// Quantized KV caches (int8 / fp8 e4m3 with per-row scales): the e4m3 codec, the quantizing write, and decode,
// paged prefill and MLA reading them. Kernels are held to the double reference run on the dequantized values
// (so only f32 rounding separates them), and to an f32 cache of the unquantized rows within the format's error.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "kernels/softmax/kv_quant.h"
#include "kernels/softmax/kv_write.h"
#include "kernels/softmax/mla.h"
#include "testing/paged_cache.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

TEST(KvQuant, Fp8CodesRoundTripAndRoundToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f8e4m3_to_f32(uint8_t(b))));
      continue;
    }
    EXPECT_EQ(f32_to_f8e4m3(f8e4m3_to_f32(uint8_t(b))), b) << b;
  }
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.f);
  EXPECT_EQ(f32_to_f8e4m3(1.0625f), 0x38);    // halfway 1 and 1.125: to the even code
  EXPECT_EQ(f32_to_f8e4m3(1.1875f), 0x3a);    // halfway 1.125 and 1.25: to the even code
  EXPECT_EQ(f32_to_f8e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_f8e4m3(0x1p-10f), 0x00);   // halfway 0 and the smallest subnormal
  EXPECT_EQ(f32_to_f8e4m3(3 * 0x1p-10f), 0x02);
  EXPECT_EQ(f32_to_f8e4m3(-15.f * 0x1p-10f), 0x88);  // 7.5 * 2^-9 rounds up into the smallest normal
  EXPECT_EQ(f32_to_f8e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_f8e4m3(-1e6f), 0xfe);
}

// K / V rows of several sequences written through write_kv_paged into a quantized paged cache and an f32 one,
// and the quantized cache's dequantized values as a third (f32) cache.
// f32 rounding between a kernel and the reference, for outputs of values up to ~40 N(0, 1) (the outlier rows).
constexpr double kF32Tolerance = 40 * 2e-5;

struct QuantizedPages {
  int64_t Hkv, D, block_size, max_blocks, num_blocks;
  std::vector<int32_t> lens, table;
  HostTensor k_new, v_new;
  HostTensor kq, vq, k_scale, v_scale;  // quantized
  HostTensor kf, vf;                    // f32 of the same rows
  HostTensor kd, vd;                    // f32 of the dequantized rows

  QuantizedPages(DType dtype, std::vector<int32_t> lengths, int64_t hkv, int64_t d, int64_t bs, uint64_t seed)
      : Hkv(hkv), D(d), block_size(bs),
        max_blocks((*std::max_element(lengths.begin(), lengths.end()) + bs - 1) / bs),
        num_blocks(int64_t(lengths.size()) * max_blocks + 3),
        lens(std::move(lengths)),
        table(testing::shuffled_block_table(int64_t(lens.size()), max_blocks, num_blocks, seed)),
        k_new(DType::f32, {total(), hkv, d}, seed + 1), v_new(DType::f32, {total(), hkv, d}, seed + 2),
        kq(dtype, {num_blocks, bs, hkv, d}, 0, 0.f), vq(dtype, {num_blocks, bs, hkv, d}, 0, 0.f),
        k_scale(DType::f32, {num_blocks, bs, hkv}, 0, 0.f), v_scale(DType::f32, {num_blocks, bs, hkv}, 0, 0.f),
        kf(DType::f32, {num_blocks, bs, hkv, d}, 0, 0.f), vf(DType::f32, {num_blocks, bs, hkv, d}, 0, 0.f),
        kd(DType::f32, {num_blocks, bs, hkv, d}, 0, 0.f), vd(DType::f32, {num_blocks, bs, hkv, d}, 0, 0.f) {
    // Some value rows far larger than the rest (outlier tokens), so one scale per row matters.
    for (int64_t row = 0; row < v_new.numel() / d; row += 7)
      for (int64_t i = 0; i < d; ++i) v_new.view.ptr<float>()[row * d + i] *= 40.f;
    std::vector<int64_t> slots;
    for (size_t b = 0; b < lens.size(); ++b)
      for (int64_t pos = 0; pos < lens[b]; ++pos)
        slots.push_back(int64_t(table[b * size_t(max_blocks) + size_t(pos / bs)]) * bs + pos % bs);
    write_kv_paged(k_new.view, v_new.view, slots.data(), kq.view, vq.view, k_scale.view, v_scale.view);
    write_kv_paged(k_new.view, v_new.view, slots.data(), kf.view, vf.view);
    for (int64_t row = 0; row < num_blocks * bs * hkv; ++row) {
      dequantize_kv_row(kq.bytes.data() + row * d, dtype, k_scale.view.ptr<float>()[row], kd.view.ptr<float>() + row * d,
                        size_t(d));
      dequantize_kv_row(vq.bytes.data() + row * d, dtype, v_scale.view.ptr<float>()[row], vd.view.ptr<float>() + row * d,
                        size_t(d));
    }
  }
  int64_t total() const { return std::accumulate(lens.begin(), lens.end(), int64_t(0)); }
  KvCacheView quantized() const {
    return {kq.view, vq.view, lens.data(), table.data(), max_blocks, k_scale.view, v_scale.view};
  }
  KvCacheView f32() const { return {kf.view, vf.view, lens.data(), table.data(), max_blocks}; }
  KvCacheView dequantized() const { return {kd.view, vd.view, lens.data(), table.data(), max_blocks}; }
};

TEST(KvQuant, WriteQuantizesEachRowWithItsScale) {
  for (DType dtype : {DType::i8, DType::f8_e4m3}) {
    QuantizedPages pages(dtype, {37, 5}, 3, 40, 8, 5);
    const float qmax = dtype == DType::i8 ? 127.f : 448.f;
    const float* kf = pages.vf.view.ptr<float>();
    const float* kd = pages.vd.view.ptr<float>();
    int64_t rows = 0;
    for (int64_t row = 0; row < pages.num_blocks * pages.block_size * pages.Hkv; ++row) {
      float amax = 0.f;
      for (int64_t d = 0; d < pages.D; ++d) amax = std::max(amax, std::fabs(kf[row * pages.D + d]));
      const float scale = pages.v_scale.view.ptr<float>()[row];
      if (amax == 0.f) {  // a slot nobody wrote
        EXPECT_EQ(scale, 0.f);
        continue;
      }
      ++rows;
      ASSERT_EQ(scale, amax / qmax) << row;
      for (int64_t d = 0; d < pages.D; ++d) {
        const float x = kf[row * pages.D + d], got = kd[row * pages.D + d];
        // int8: half a step; e4m3: half an ulp of 3 mantissa bits, or half the subnormal step.
        const float bound = dtype == DType::i8 ? 0.5f * scale
                                               : std::max(std::fabs(x) / 16.f, 0x1p-10f * scale) * 1.0001f;
        ASSERT_LE(std::fabs(got - x), bound) << "row " << row << " d " << d;
        if (dtype == DType::i8)
          ASSERT_EQ(int(pages.vq.view.ptr<int8_t>()[row * pages.D + d]), int(std::nearbyint(x / scale)));
      }
    }
    EXPECT_EQ(rows, 42 * 3);
  }
}

TEST(KvQuant, WriteChecksScales) {
  HostTensor rows(DType::f32, {2, 2, 8}, 1), cache(DType::i8, {4, 4, 2, 8}, 0, 0.f);
  HostTensor v_cache(DType::i8, {4, 4, 2, 8}, 0, 0.f);
  HostTensor scale(DType::f32, {4, 4, 2}, 0, 0.f), bad_scale(DType::f32, {4, 4}, 0, 0.f);
  HostTensor f32_cache(DType::f32, {4, 4, 2, 8}, 0, 0.f);
  const std::vector<int64_t> slots = {0, 5};
  testing::expect_error<ArgumentError>(
      [&] { write_kv_paged(rows.view, rows.view, slots.data(), cache.view, v_cache.view, {}, scale.view); }, "k_scale");
  testing::expect_error<ArgumentError>(
      [&] { write_kv_paged(rows.view, rows.view, slots.data(), cache.view, v_cache.view, scale.view, bad_scale.view); },
      "v_scale");
  testing::expect_error<ArgumentError>(
      [&] { write_paged_rows(rows.view, slots.data(), f32_cache.view, "rows", "cache", scale.view); }, "scale");
}

TEST(KvQuant, DecodeReadsQuantizedPages) {
  for (DType dtype : {DType::i8, DType::f8_e4m3})
    for (int64_t Tq : {1, 3})
      for (int64_t bs : {16, 7}) {
        QuantizedPages pages(dtype, {300, 41, 1200}, 2, 64, bs, uint64_t(bs + Tq));
        const int64_t B = 3, Hq = 8, D = 64;
        HostTensor q(DType::f32, {B, Tq, Hq, D}, 9);
        HostTensor ref(DType::f32, {B, Tq, Hq, D}, 0, 0.f), full(DType::f32, {B, Tq, Hq, D}, 0, 0.f);
        HostTensor quant_ref(DType::f32, {B, Tq, Hq, D}, 0, 0.f), out(DType::f32, {B, Tq, Hq, D}, 0, 0.f);
        attention_decode_reference(q.view, pages.dequantized(), ref.view, {});
        attention_decode_reference(q.view, pages.quantized(), quant_ref.view, {});
        attention_decode_reference(q.view, pages.f32(), full.view, {});
        EXPECT_LE(testing::max_abs_diff(quant_ref, ref), 1e-5);
        testing::for_each_target([&](Target) {
          attention_decode(q.view, pages.quantized(), out.view, {});
          EXPECT_LE(testing::max_abs_diff(out, ref), kF32Tolerance) << dtype_name(dtype) << " Tq=" << Tq << " bs=" << bs;
        });
        // Against the unquantized rows: int8 keeps ~2 decimal digits per element, e4m3 ~1.
        // Measured: int8 0.005-0.009, e4m3 0.027-0.040 relative RMS.
        EXPECT_LE(testing::relative_rms(out, full), dtype == DType::i8 ? 1.5e-2 : 6e-2) << dtype_name(dtype);
      }
}

TEST(KvQuant, PagedPrefillReadsQuantizedPages) {
  for (DType dtype : {DType::i8, DType::f8_e4m3}) {
    QuantizedPages pages(dtype, {150, 70}, 2, 48, 16, 3);
    const std::vector<int32_t> cu = {0, 40, 110};  // 40 and 70 new queries, bottom-right aligned
    HostTensor q(DType::f32, {110, 4, 48}, 4);
    HostTensor ref(DType::f32, {110, 4, 48}, 0, 0.f), out(DType::f32, {110, 4, 48}, 0, 0.f);
    AttentionOptions opts;
    opts.causal = true;
    const VarlenInfo varlen{cu.data(), nullptr, 2};
    attention_prefill_reference(make_cached_prefill_problem(q.view, pages.dequantized(), ref.view, opts, varlen));
    testing::for_each_target([&](Target) {
      attention_prefill(q.view, pages.quantized(), out.view, opts, varlen);
      EXPECT_LE(testing::max_abs_diff(out, ref), kF32Tolerance) << dtype_name(dtype);
    });
  }
}

TEST(KvQuant, ContiguousQuantizedCache) {
  // [B, S_max, Hkv, D] is a paged cache of one S_max-row block per sequence under the identity table: written
  // that way, then read without a block table by decode and by prefill.
  for (DType dtype : {DType::i8, DType::f8_e4m3}) {
    const int64_t B = 2, S = 80, Hkv = 2, D = 32, Hq = 4;
    const std::vector<int32_t> lens = {80, 33};
    HostTensor rows(DType::f32, {B * S, Hkv, D}, 3);
    HostTensor kq(dtype, {B, S, Hkv, D}, 0, 0.f), vq(dtype, {B, S, Hkv, D}, 0, 0.f);
    HostTensor ks(DType::f32, {B, S, Hkv}, 0, 0.f), vs(DType::f32, {B, S, Hkv}, 0, 0.f);
    HostTensor kd(DType::f32, {B, S, Hkv, D}, 0, 0.f), vd(DType::f32, {B, S, Hkv, D}, 0, 0.f);
    std::vector<int64_t> slots(size_t(B * S));
    std::iota(slots.begin(), slots.end(), 0);
    write_kv_paged(rows.view, rows.view, slots.data(), kq.view, vq.view, ks.view, vs.view);
    for (int64_t row = 0; row < B * S * Hkv; ++row) {
      dequantize_kv_row(kq.bytes.data() + row * D, dtype, ks.view.ptr<float>()[row], kd.view.ptr<float>() + row * D,
                        size_t(D));
      dequantize_kv_row(vq.bytes.data() + row * D, dtype, vs.view.ptr<float>()[row], vd.view.ptr<float>() + row * D,
                        size_t(D));
    }
    const KvCacheView quantized{kq.view, vq.view, lens.data(), nullptr, 0, ks.view, vs.view};
    const KvCacheView dequantized{kd.view, vd.view, lens.data(), nullptr, 0};
    HostTensor q(DType::f32, {B, 2, Hq, D}, 4);
    HostTensor ref(DType::f32, {B, 2, Hq, D}, 0, 0.f), out(DType::f32, {B, 2, Hq, D}, 0, 0.f);
    attention_decode_reference(q.view, dequantized, ref.view, {});
    attention_decode(q.view, quantized, out.view, {});
    EXPECT_LE(testing::max_abs_diff(out, ref), 2e-5) << dtype_name(dtype);
    HostTensor qp(DType::f32, {B, 12, Hq, D}, 5);
    HostTensor refp(DType::f32, {B, 12, Hq, D}, 0, 0.f), outp(DType::f32, {B, 12, Hq, D}, 0, 0.f);
    AttentionOptions opts;
    opts.causal = true;
    attention_prefill_reference(make_cached_prefill_problem(qp.view, dequantized, refp.view, opts, {}));
    attention_prefill(qp.view, quantized, outp.view, opts, {});
    EXPECT_LE(testing::max_abs_diff(outp, refp), 2e-5) << dtype_name(dtype);
  }
}

// bf16 queries against a quantized cache score with vdpbf16ps on AVX-512-BF16 CPUs (each key converted to bf16
// in registers, exactly): every row count of its 4-row blocks, D a multiple of 32 or not (the widening path),
// the scale moved onto the scores under softcap and sinks. Held to the double reference on the dequantized rows.
TEST(KvQuant, Bf16QueriesAgainstQuantizedPages) {
  std::vector<float> sinks(8);
  for (size_t h = 0; h < sinks.size(); ++h) sinks[h] = 0.3f * float(h) - 1.f;
  for (DType dtype : {DType::i8, DType::f8_e4m3})
    for (auto [Tq, Hq, D] : {std::tuple{1, 8, 64}, {1, 6, 96}, {2, 6, 64}, {3, 2, 32}, {1, 4, 48}})
      for (bool extras : {false, true}) {
        const int64_t Hkv = 2, B = 2;
        QuantizedPages pages(dtype, {70, 300}, Hkv, D, 16, uint64_t(Tq + D));
        AttentionOptions opts;
        if (extras) {
          opts.softcap = 20.f;
          opts.sinks = sinks.data();
        }
        HostTensor q(DType::bf16, {B, Tq, Hq, D}, 11);
        HostTensor ref(DType::f32, {B, Tq, Hq, D}, 0, 0.f), out(DType::f32, {B, Tq, Hq, D}, 0, 0.f);
        attention_decode_reference(q.view, pages.dequantized(), ref.view, opts);
        testing::for_each_target([&](Target t) {
          attention_decode(q.view, pages.quantized(), out.view, opts);
          EXPECT_LE(testing::max_abs_diff(out, ref), kF32Tolerance)
              << dtype_name(dtype) << " Tq=" << Tq << " Hq=" << Hq << " D=" << D << " target " << int(t);
        });
      }
}

// On AVX-512 VNNI CPUs, bf16 queries against int8 keys score as int16 queries (one step = |q|max / 32767 per row)
// with vpdpwssd: query elements below |q|max / 256 can lose low bits there. Queries whose elements span 2^0 .. 2^-16
// on purpose, every row count of the 4-row blocks, D of 32 to 128 (and 48: not a multiple of 32, the other path),
// held to the double reference on the dequantized rows within 4e-4, half the f32 paths' kF32Tolerance
// (measured: at most 1.6e-4 there, 3e-6 on the f32 paths; outputs reach ~100 through the outlier value rows).
TEST(KvQuant, Int8KeysScoreBf16QueriesAsInt16) {
  for (auto [Tq, Hq, D] : {std::tuple{1, 8, 128}, {1, 6, 96}, {2, 6, 64}, {3, 2, 32}, {1, 4, 48}}) {
    const int64_t Hkv = 2, B = 2;
    QuantizedPages pages(DType::i8, {70, 300}, Hkv, D, 16, uint64_t(Tq + D + 1));
    HostTensor q(DType::f32, {B, Tq, Hq, D}, 12);
    float* qf = q.view.ptr<float>();
    for (int64_t i = 0; i < q.view.numel(); ++i) qf[i] = std::ldexp(qf[i], -int(i % 17));  // 2^0 .. 2^-16
    HostTensor qb(DType::bf16, {B, Tq, Hq, D}, 0, 0.f);
    convert_from_f32(qf, qb.view.data, DType::bf16, size_t(q.view.numel()));
    HostTensor ref(DType::f32, {B, Tq, Hq, D}, 0, 0.f), out(DType::f32, {B, Tq, Hq, D}, 0, 0.f);
    attention_decode_reference(qb.view, pages.dequantized(), ref.view, {});
    testing::for_each_target([&](Target t) {
      attention_decode(qb.view, pages.quantized(), out.view, {});
      EXPECT_LE(testing::max_abs_diff(out, ref), 4e-4) << "Tq=" << Tq << " Hq=" << Hq << " D=" << D << " target "
                                                       << int(t);
    });
  }
}

// Every finite e4m3 code (subnormals and both zeros included) as a key element, through every decode path:
// the bf16 conversion of the dot-product path handles the subnormal codes separately.
TEST(KvQuant, DecodeReadsEveryFp8KeyCode) {
  const int64_t Hkv = 2, D = 64, Hq = 4;
  QuantizedPages pages(DType::f8_e4m3, {200}, Hkv, D, 16, 5);
  const int64_t rows = pages.num_blocks * pages.block_size * Hkv;
  for (int64_t row = 0; row < rows; ++row) {
    // Even rows: any code, at a scale that keeps the scores small (so f32 rounding stays small). Odd rows: only
    // the subnormal and smallest normal codes (below 2^-4), at a scale that makes them matter to the scores.
    const bool small = row % 2 == 1;
    const float scale = small ? 8.f : 0x1p-12f;
    pages.k_scale.view.ptr<float>()[row] = scale;
    for (int64_t i = 0; i < D; ++i) {
      uint8_t code = uint8_t((row * D + i) * 37 % 256);
      if (small) code &= 0x9f;
      if ((code & 0x7f) == 0x7f) code = uint8_t(code ^ 0x7f);  // NaN codes: the quantizer never stores them
      pages.kq.bytes[size_t(row * D + i)] = code;
      pages.kd.view.ptr<float>()[row * D + i] = f8e4m3_to_f32(code) * scale;
    }
  }
  for (DType q_dtype : {DType::f32, DType::bf16}) {
    HostTensor q(q_dtype, {1, 1, Hq, D}, 3);
    HostTensor ref(DType::f32, {1, 1, Hq, D}, 0, 0.f), out(DType::f32, {1, 1, Hq, D}, 0, 0.f);
    attention_decode_reference(q.view, pages.dequantized(), ref.view, {});
    testing::for_each_target([&](Target) {
      attention_decode(q.view, pages.quantized(), out.view, {});
      EXPECT_LE(testing::max_abs_diff(out, ref), kF32Tolerance) << dtype_name(q_dtype);
    });
  }
}

TEST(KvQuant, DecodeRejectsMissingOrStrayScales) {
  QuantizedPages pages(DType::i8, {20}, 1, 16, 8, 1);
  HostTensor q(DType::f32, {1, 1, 2, 16}, 2), out(DType::f32, {1, 1, 2, 16}, 0, 0.f);
  KvCacheView no_scale = pages.quantized();
  no_scale.v_scale = {};
  testing::expect_error<ArgumentError>([&] { attention_decode(q.view, no_scale, out.view, {}); }, "v_scale");
  KvCacheView stray = pages.f32();
  stray.k_scale = pages.k_scale.view;
  testing::expect_error<ArgumentError>([&] { attention_decode(q.view, stray, out.view, {}); }, "k_scale");
}

TEST(KvQuant, MlaReadsQuantizedLatents) {
  const int64_t H = 4, dn = 16, dr = 8, dv = 16, r = 32, L = r + dr, bs = 16;
  HostTensor w(DType::f32, {H * (dn + dv), r}, 3, 0.2f);
  const MlaWeights weights{w.view, H, dn, dr, dv, r};
  for (DType dtype : {DType::i8, DType::f8_e4m3}) {
    const std::vector<int32_t> lens = {90, 33};
    const int64_t B = 2, max_blocks = 6, num_blocks = 15;
    const std::vector<int32_t> table = testing::shuffled_block_table(B, max_blocks, num_blocks, 8);
    HostTensor rows(DType::f32, {123, 1, L}, 5);
    HostTensor lq(dtype, {num_blocks, bs, 1, L}, 0, 0.f), scale(DType::f32, {num_blocks, bs, 1}, 0, 0.f);
    HostTensor ld(DType::f32, {num_blocks, bs, 1, L}, 0, 0.f);
    std::vector<int64_t> slots;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t pos = 0; pos < lens[size_t(b)]; ++pos)
        slots.push_back(int64_t(table[size_t(b * max_blocks + pos / bs)]) * bs + pos % bs);
    write_paged_rows(rows.view, slots.data(), lq.view, "latent", "latent_cache", scale.view);
    for (int64_t row = 0; row < num_blocks * bs; ++row)
      dequantize_kv_row(lq.bytes.data() + row * L, dtype, scale.view.ptr<float>()[row], ld.view.ptr<float>() + row * L,
                        size_t(L));
    const LatentCacheView quantized{lq.view, lens.data(), table.data(), max_blocks, scale.view};
    const LatentCacheView dequantized{ld.view, lens.data(), table.data(), max_blocks};
    HostTensor q(DType::f32, {B, 1, H, dn + dr}, 6);
    HostTensor ref(DType::f32, {B, 1, H, dv}, 0, 0.f), out(DType::f32, {B, 1, H, dv}, 0, 0.f);
    mla_decode_reference(q.view, dequantized, weights, ref.view, {});
    testing::for_each_target([&](Target) {
      mla_decode(q.view, quantized, weights, out.view, {});  // absorbed, decode kernel
      EXPECT_LE(testing::max_abs_diff(out, ref), 5e-5) << dtype_name(dtype);
      mla_prefill(q.view, quantized, weights, out.view, {});  // naive, gathered rows
      EXPECT_LE(testing::max_abs_diff(out, ref), 5e-5) << dtype_name(dtype);
    });
    // Packed queries with more than 8 per sequence take the absorbed path on the prefill kernel.
    HostTensor qp(DType::f32, {30, H, dn + dr}, 7);
    HostTensor refp(DType::f32, {30, H, dv}, 0, 0.f), outp(DType::f32, {30, H, dv}, 0, 0.f);
    const std::vector<int32_t> cu = {0, 20, 30};
    const VarlenInfo varlen{cu.data(), nullptr, 2};
    mla_decode_reference(qp.view, dequantized, weights, refp.view, {}, varlen);
    mla_decode(qp.view, quantized, weights, outp.view, {}, varlen);
    EXPECT_LE(testing::max_abs_diff(outp, refp), 5e-5) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace attnzoo
