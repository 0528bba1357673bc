#include "kernels/quant/row_groups.h"

#include <cstring>
#include <string>

#include "core/error.h"

#include "kernels/quant/gemv_kernels.h"

namespace attnzoo {
namespace {

// Per-row bytes before the values (d, and m for Q4_1) and the values' bytes, per block of 32.
struct GroupShape {
  int64_t head, values;
  int64_t unit() const { return kRowGroup * (head + values); }
};

GroupShape shape_of(QuantType type) {
  switch (type) {
    case QuantType::Q4_0: return {2, 16};
    case QuantType::Q4_1: return {4, 16};
    default: return {2, 32};  // Q8_0
  }
}

// Where the pieces of row i's block lie in the unit: the head's 2-byte fields one after the other for all 16
// rows, then the 4-byte value slices. copy(offset in the block, offset in the unit, bytes).
template <class Copy>
void for_each_piece(const GroupShape& s, int64_t i, Copy copy) {
  for (int64_t f = 0; f < s.head / 2; ++f) copy(2 * f, f * 2 * kRowGroup + 2 * i, 2);
  for (int64_t c = 0; c < s.values / 4; ++c) copy(s.head + 4 * c, s.head * kRowGroup + 4 * (kRowGroup * c + i), 4);
}

}  // namespace

bool row_groups_format(QuantType type) {
  return type == QuantType::Q4_0 || type == QuantType::Q4_1 || type == QuantType::Q8_0;
}

bool row_groups_pay(const QuantMatrix& w) {
  return w.row_group == 0 && row_groups_format(w.type) && w.rows % kRowGroup == 0 && quant_gemv_vnni_enabled();
}

QuantMatrix to_row_groups(const QuantMatrix& w, uint8_t* out) {
  require(row_groups_format(w.type) && w.row_group == 0 && w.rows % kRowGroup == 0, "w",
          std::string("regrouping takes Q4_0, Q4_1 or Q8_0 rows in multiples of 16, not [") +
              std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] " + quant_type_name(w.type));
  const GroupShape s = shape_of(w.type);
  const int64_t nb = w.cols / 32;
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* group = out + (r / kRowGroup) * kRowGroup * w.row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* block = w.row(r) + b * (s.head + s.values);
      uint8_t* unit = group + b * s.unit();
      for_each_piece(s, r % kRowGroup, [&](int64_t at, int64_t to, size_t n) { std::memcpy(unit + to, block + at, n); });
    }
  }
  QuantMatrix g = w;
  g.data = out;
  g.row_group = kRowGroup;
  return g;
}

const uint8_t* row_of_group(const QuantMatrix& w, int64_t r, AlignedBuffer<uint8_t>& scratch) {
  if (w.row_group == 0) return w.row(r);
  const GroupShape s = shape_of(w.type);
  scratch.resize(size_t(w.row_bytes));
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + (r / kRowGroup) * kRowGroup * w.row_bytes;
  for (int64_t b = 0; b < w.cols / 32; ++b) {
    uint8_t* block = scratch.data() + b * (s.head + s.values);
    const uint8_t* unit = group + b * s.unit();
    for_each_piece(s, r % kRowGroup, [&](int64_t at, int64_t from, size_t n) { std::memcpy(block + at, unit + from, n); });
  }
  return scratch.data();
}

}  // namespace attnzoo
