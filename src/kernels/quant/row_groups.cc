#include "kernels/quant/row_groups.h"

#include <cstring>
#include <string>

#include "core/error.h"

#include "kernels/quant/gemv_kernels.h"

namespace attnzoo {
namespace {

// Where the pieces of row i's block lie in its group's unit (16 blocks' bytes): copy(offset in the block, offset
// in the unit, bytes). Blocks of 32: the 2-byte head fields (d, Q4_1's m) of all 16 rows one field after the
// other, then the 4-byte value slices. Q6_K (210 bytes: ql[128], qh[64], 16 int8 scales, d): the 16 d, the
// scales sub-block by sub-block (16 rows' int8 in a row), then per half h and slice s < 8 the three slices the
// kernel reads together: ql bytes 64h + 4s, ql bytes 64h + 32 + 4s, qh bytes 32h + 4s.
template <class Copy>
void for_each_piece(QuantType type, int64_t i, Copy copy) {
  if (type == QuantType::Q4_K) {  // d, dmin, the 12 packed scale bytes 16 rows at a time, the 32 qs slices
    copy(0, 2 * i, 2);
    copy(2, 32 + 2 * i, 2);
    for (int64_t j = 0; j < 12; ++j) copy(4 + j, 64 + kRowGroup * j + i, 1);
    for (int64_t q = 0; q < 32; ++q) copy(16 + 4 * q, kQ4KValuesAt + 64 * q + 4 * i, 4);
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

struct Blocks {
  int64_t elems, bytes;
};
Blocks blocks_of(QuantType type) {
  const QuantTypeInfo info = *quant_type_info(uint32_t(type));
  return {info.block_elems, info.block_bytes};
}

}  // namespace

bool row_groups_format(QuantType type) {
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0 || type == QuantType::Q4_K ||
         type == QuantType::Q6_K;
}

bool row_groups_pay(const QuantMatrix& w) {
  return w.row_group == 0 && row_groups_format(w.type) && w.rows % kRowGroup == 0 &&
         (quant_gemv_vnni_enabled() || quant_gemv_avx2_enabled());
}

QuantMatrix to_row_groups(const QuantMatrix& w, uint8_t* out) {
  require(row_groups_format(w.type) && w.row_group == 0 && w.rows % kRowGroup == 0, "w",
          std::string("regrouping takes Q4_0, Q4_1, Q8_0, Q4_K or Q6_K rows in multiples of 16, not [") +
              std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] " + quant_type_name(w.type));
  const Blocks bl = blocks_of(w.type);
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* group = out + (r / kRowGroup) * kRowGroup * w.row_bytes;
    for (int64_t b = 0; b < w.cols / bl.elems; ++b) {
      const uint8_t* block = w.row(r) + b * bl.bytes;
      uint8_t* unit = group + b * kRowGroup * bl.bytes;
      for_each_piece(w.type, r % kRowGroup, [&](int64_t at, int64_t to, size_t n) { std::memcpy(unit + to, block + at, n); });
    }
  }
  QuantMatrix g = w;
  g.data = out;
  g.row_group = kRowGroup;
  return g;
}

const uint8_t* row_of_group(const QuantMatrix& w, int64_t r, AlignedBuffer<uint8_t>& scratch) {
  if (w.row_group == 0) return w.row(r);
  const Blocks bl = blocks_of(w.type);
  scratch.resize(size_t(w.row_bytes));
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + (r / kRowGroup) * kRowGroup * w.row_bytes;
  for (int64_t b = 0; b < w.cols / bl.elems; ++b) {
    uint8_t* block = scratch.data() + b * bl.bytes;
    const uint8_t* unit = group + b * kRowGroup * bl.bytes;
    for_each_piece(w.type, r % kRowGroup, [&](int64_t at, int64_t from, size_t n) { std::memcpy(block + at, unit + from, n); });
  }
  return scratch.data();
}

const uint8_t* rows_of_group(const QuantMatrix& w, int64_t g, AlignedBuffer<uint8_t>& scratch) {
  const Blocks bl = blocks_of(w.type);
  scratch.resize(size_t(kRowGroup * w.row_bytes));
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + g * kRowGroup * w.row_bytes;
  for (int64_t b = 0; b < w.cols / bl.elems; ++b) {
    const uint8_t* unit = group + b * kRowGroup * bl.bytes;
    for (int64_t i = 0; i < kRowGroup; ++i) {
      uint8_t* block = scratch.data() + i * w.row_bytes + b * bl.bytes;
      for_each_piece(w.type, i, [&](int64_t at, int64_t from, size_t n) { std::memcpy(block + at, unit + from, n); });
    }
  }
  return scratch.data();
}

}  // namespace attnzoo
