#include "kernels/quant/mxfp4_layout.h"

namespace attnzoo {

void mxfp4_blocks_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* dst) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* src = blocks + b * 16;
    uint8_t* out = dst + b * 17;
    out[0] = scales[b];
    // code k sits in source byte k / 2, high nibble when k is odd
    auto code = [&](int k) { return uint8_t((src[k >> 1] >> ((k & 1) * 4)) & 0xF); };
    for (int j = 0; j < 16; ++j) out[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
  }
}

}  // namespace attnzoo
