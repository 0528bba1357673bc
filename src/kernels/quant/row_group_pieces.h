#pragma once
// The regrouped layout's map (row_groups.h), in a header so that the dequantization straight from the groups
// (dequant.cc) inlines it with a constant format: every copy then is a fixed-size move, not a memcpy call.
#include <cstdint>

#include "core/quant_type.h"
#include "kernels/quant/row_groups.h"

namespace attnzoo {

// Where the pieces of row i's block lie in its group's unit (16 blocks' bytes): copy(offset in the block, offset
// in the unit, bytes). Blocks of 32: the 2-byte head fields (d, Q4_1's m) of all 16 rows one field after the
// other, then the 4-byte value slices. Q5_K (176 bytes: d, dmin, 12 scale bytes, qh[32], qs[128]) as Q4_K with
// qh's 4-byte slices between the head and qs' (row_groups.h). Q6_K (210 bytes: ql[128], qh[64], 16 int8 scales,
// d): the 16 d, the scales sub-block by sub-block (16 rows' int8 in a row), then per half h and slice s < 8 the
// three slices the kernel reads together: ql bytes 64h + 4s, ql bytes 64h + 32 + 4s, qh bytes 32h + 4s.
// IQ4_NL (18 bytes: d, qs[16]) is Q4_0's; IQ4_XS (136 bytes: d, scales_h, scales_l[4], qs[128]) its three head
// fields 16 rows at a time, then qs' 4-byte slices.
template <class Copy>
[[gnu::always_inline]] inline void for_each_piece(QuantType type, int64_t i, Copy copy) {
  if (type == QuantType::Q4_K || type == QuantType::Q5_K) {
    // d, dmin, the 12 packed scale bytes 16 rows at a time, (Q5_K: qh's 8 slices,) the 32 qs slices
    const bool five = type == QuantType::Q5_K;
    copy(0, 2 * i, 2);
    copy(2, 32 + 2 * i, 2);
    for (int64_t j = 0; j < 12; ++j) copy(4 + j, 64 + kRowGroup * j + i, 1);
    if (five)
      for (int64_t s = 0; s < 8; ++s) copy(16 + 4 * s, kQ5KHighAt + 64 * s + 4 * i, 4);
    const int64_t qs = five ? 48 : 16, to = five ? kQ5KValuesAt : kQ4KValuesAt;
    for (int64_t q = 0; q < 32; ++q) copy(qs + 4 * q, to + 64 * q + 4 * i, 4);
    return;
  }
  if (type == QuantType::IQ4_XS) {
    copy(0, 2 * i, 2);
    copy(2, 32 + 2 * i, 2);
    copy(4, 64 + 4 * i, 4);
    for (int64_t q = 0; q < 32; ++q) copy(8 + 4 * q, kIq4XsValuesAt + 64 * q + 4 * i, 4);
    return;
  }
  if (type == QuantType::Q6_K) {
    copy(208, 2 * i, 2);
    for (int64_t sb = 0; sb < 16; ++sb) copy(192 + sb, 32 + kRowGroup * sb + i, 1);
    for (int64_t hs = 0; hs < 16; ++hs) {  // hs = 8h + s
      const int64_t h = hs / 8, s = hs % 8, at = kQ6ValuesAt + 192 * hs + 4 * i;
      copy(64 * h + 4 * s, at, 4);
      copy(64 * h + 32 + 4 * s, at + 64, 4);
      copy(128 + 32 * h + 4 * s, at + 128, 4);
    }
    return;
  }
  const int64_t head = type == QuantType::Q4_1 ? 4 : 2, values = type == QuantType::Q8_0 ? 32 : 16;
  for (int64_t f = 0; f < head / 2; ++f) copy(2 * f, f * 2 * kRowGroup + 2 * i, 2);
  for (int64_t c = 0; c < values / 4; ++c) copy(head + 4 * c, head * kRowGroup + 4 * (kRowGroup * c + i), 4);
}

}  // namespace attnzoo
