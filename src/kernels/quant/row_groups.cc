#include "kernels/quant/row_groups.h"

#include <cstring>
#include <string>

#include "core/error.h"

#include "kernels/quant/gemv_kernels.h"
#include "kernels/quant/row_group_pieces.h"

namespace attnzoo {
namespace {

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
         type == QuantType::Q5_K || type == QuantType::Q6_K || row_groups_iq4(type);
}

bool row_groups_pay(const QuantMatrix& w) {
  return w.row_group == 0 && row_groups_format(w.type) && w.rows % kRowGroup == 0 &&
         (quant_gemv_vnni_enabled() || quant_gemv_avx2_enabled());
}

QuantMatrix to_row_groups(const QuantMatrix& w, uint8_t* out) {
  require(row_groups_format(w.type) && w.row_group == 0 && w.rows % kRowGroup == 0, "w",
          std::string("regrouping takes Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL or IQ4_XS rows in multiples of 16, not [") +
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

}  // namespace attnzoo
