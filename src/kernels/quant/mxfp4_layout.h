#pragma once
// MXFP4 as Hugging Face checkpoints store it (gpt-oss; transformers' integrations/mxfp4.py) and as GGUF does.
// Both hold blocks of 32 E2M1 codes sharing one E8M0 exponent, value = e2m1(code) * 2^(exponent - 127); only the
// places of the bytes differ:
//   Hugging Face  two tensors: `_blocks` [..., groups, 16] bytes, byte j holding code 2j in its low nibble and
//                 2j + 1 in its high one; `_scales` [..., groups], the exponents
//   GGUF MXFP4    17-byte blocks: the exponent, then 16 bytes, byte j holding code j (low) and j + 16 (high)
// So a repack moves every nibble but changes no value: the GGUF blocks dequantize to exactly the numbers
// transformers' convert_moe_packed_tensors gives.
#include <cstdint>

namespace attnzoo {

// n_blocks blocks from Hugging Face's `blocks` (16 bytes each) and `scales` (1 byte each) into GGUF MXFP4 blocks
// at dst (17 bytes each), in the same order.
void mxfp4_blocks_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* dst);

}  // namespace attnzoo
