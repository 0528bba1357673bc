#pragma once
// Block-quantized weights regrouped at load for the AVX-512 VNNI and AVX2 decode rows: 16 rows side by side, so
// that one vpdpbusd lane holds one row (16 outputs per instruction, no horizontal sum per row; AVX2 takes a slice
// as two halves of 8 rows: gemv_groups_avx2.cc), as llama.cpp's repacked
// Q4_0 x 8 layouts do for its CPU backend. Row-major GGUF blocks spend most of a one-token GEMV on per-row work:
// unpacking two blocks per instruction, converting their two scales, reducing 16 lanes at the row's end. Here a
// block column of 16 rows is one unit:
//   16 f16 scales d (Q4_1: then 16 f16 minima m), then the rows' values in 4-byte slices: slice c of row i
//   (bytes 4c .. 4c + 3 of its block's values) at 4 (16 c + i).
// So Q4_0 / Q4_1 slice c holds elements 4c .. 4c + 3 in its low nibbles and 16 + 4c .. 16 + 4c + 3 in its high
// ones, Q8_0 slice c elements 4c .. 4c + 3: one 64-byte load per slice feeds a vpdpbusd whose other operand is
// the token's 4 activations broadcast. Q4_K / Q5_K / Q6_K superblocks are cut the same way (below: their value
// bytes in slices, their sub-block scales 16 rows at a time). The bytes are the GGUF bytes, moved: dequantize_rows
// (the prefill panels, f32 and bf16) reads the units in place, other readers of single rows (the f32 and portable
// rows) get them back with row_of_group.
#include <cstdint>

#include "core/aligned_buffer.h"
#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

constexpr int64_t kRowGroup = 16;
// Q6_K units (16 x 210 bytes): 16 f16 d, 16 x 16 int8 scales (sub-block-major), then from kQ6ValuesAt 16 runs of
// three slices (16 rows x 4 bytes each) in the order the kernel reads them (row_groups.cc).
constexpr int64_t kQ6ValuesAt = 32 + 256;
// Q4_K units (16 x 144 bytes): 16 f16 d, 16 f16 dmin, the 12 packed 6-bit scale / min bytes 16 rows at a time
// (byte j of every row side by side), then from kQ4KValuesAt qs' 32 slices (chunk c's slice s at 8c + s).
constexpr int64_t kQ4KValuesAt = 64 + 192;
// Q5_K units (16 x 176 bytes): Q4_K's head (d, dmin, the packed scales), then from kQ5KHighAt qh's 8 slices (bytes
// 4s .. 4s + 3 of 16 rows: the fifth bits of elements 4s .. 4s + 3 of all 8 sub-blocks), then from kQ5KValuesAt
// qs' 32 slices as Q4_K's. Every chunk of qs reads the same 8 qh slices (its two bits of each byte moved into bit 4
// by shifts), so the qh slices lie once, before all the qs slices, in the order chunk 0 reads them.
constexpr int64_t kQ5KHighAt = kQ4KValuesAt, kQ5KValuesAt = kQ5KHighAt + 8 * 64;
// IQ4_XS units (16 x 136 bytes): 16 f16 d, 16 scales_h (u16), 16 scales_l (4 bytes each), then from kIq4XsValuesAt
// qs' 32 slices (sub-block j's 16 bytes are slices 4j .. 4j + 3, as four Q4_0 / IQ4_NL slices of one block).
constexpr int64_t kIq4XsValuesAt = 128;

inline bool row_groups_iq4(QuantType type) { return type == QuantType::IQ4_NL || type == QuantType::IQ4_XS; }

// Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS (the VNNI and AVX2 regrouped rows' formats).
bool row_groups_format(QuantType type);
// Worth regrouping at load: a format above, rows a multiple of 16, and the VNNI or AVX2 rows in use on this CPU.
bool row_groups_pay(const QuantMatrix& w);
// w's bytes regrouped into `out` (w.bytes() of them); the returned matrix describes `out` (row_group 16).
QuantMatrix to_row_groups(const QuantMatrix& w, uint8_t* out);
// Row r of a regrouped matrix as GGUF blocks in `scratch` (or w.row(r) itself when w is not regrouped).
const uint8_t* row_of_group(const QuantMatrix& w, int64_t r, AlignedBuffer<uint8_t>& scratch);

// The regrouped rows (VNNI and AVX2) ask for the line 8 KiB ahead into L2 for every 64 bytes they load, as the
// dense GEMV does: the stream prefetcher alone left their loads waiting (VNNI, no prefetch: 50-56% of a plain
// read), and 2 KiB ahead into L1 read one token's rows at 74-84%, 8 KiB into L2 at 82-95%
// (docs/benchmarks/cpu-classes.md).
constexpr size_t kGroupPrefetch = 8192;
inline void group_prefetch(const uint8_t* p) { __builtin_prefetch(p + kGroupPrefetch, 0, 2); }

// A task's groups of 16 rows, tokens up to 4 at a time: dot(kT tag, group, t0, out) writes out[t * 16 + i] for
// token t0 + t and row i of the group; the bias is added here.
template <class Task, class Dot>
void for_row_groups(const Task& g, Dot dot) {
  for (size_t n = g.n0; n < g.n1; n += kRowGroup) {
    const uint8_t* group = static_cast<const uint8_t*>(g.w.data) + n * size_t(g.w.row_bytes);
    float out[8][kRowGroup];
    by_4_tokens(g.T, out[0], [&](auto kT, size_t t0, float* /*out[0] + t0, not a row of out*/) {
      dot(kT, group, t0, out[t0]);
    });
    for (size_t t = 0; t < g.T; ++t)
      for (size_t i = 0; i < size_t(kRowGroup); ++i)
        g.y[t * g.ldy + n + i] = out[t][i] + (g.bias ? g.bias[n + i] : 0.f);
  }
}

// A task's rows [n0, n1) of a regrouped matrix copied back to GGUF rows, for the row kernels that read single
// rows: fn(task) runs on the copy with the task's outputs and bias.
template <class Task, class Fn>
void on_gguf_rows(const Task& g, Fn fn) {
  thread_local AlignedBuffer<uint8_t> rows, row;
  const int64_t n = int64_t(g.n1 - g.n0);
  rows.resize(size_t(n * g.w.row_bytes));
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* src = row_of_group(g.w, int64_t(g.n0) + r, row);
    std::copy(src, src + g.w.row_bytes, rows.data() + r * g.w.row_bytes);
  }
  Task t = g;
  t.w = QuantMatrix{rows.data(), g.w.type, n, g.w.cols, g.w.row_bytes};
  t.y = g.y + g.n0;
  if (g.bias) t.bias = g.bias + g.n0;
  t.n0 = 0;
  t.n1 = size_t(n);
  fn(t);
}

}  // namespace attnzoo
