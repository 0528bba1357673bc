#pragma once
// llama.cpp's Qwen3.5 converter stores the linear-attention value heads tiled over the key heads (stored head
// j * key_heads + k is Hugging Face's head k * per_key + j) so that ggml broadcasts the key heads. The GGUF
// reader moves them back and `attnzoo quantize` tiles them: one permutation, in both directions. It moves rows,
// or for `columns` runs of columns within every row, so quantized blocks stay whole when a head is whole blocks.
#include <cstdint>
#include <cstring>
#include <vector>

namespace attnzoo {

struct ValueHeadTiling {
  int64_t key_heads = 0;  // 0: not tiled
  int64_t per_key = 0;    // value heads per key head
  int64_t head_size = 0;  // rows (columns) per value head
  int64_t first = 0;      // rows (columns) before the value heads (attn_qkv's and ssm_conv1d's q and k)
  bool columns = false;   // ssm_out: the heads run along each row (its input)
};

// The value heads of `runs` runs, run r starting at data + r * stride, `unit` bytes per head: to the tiled order
// (to_tiled) or back to Hugging Face's. The caller has checked that every run lies within its buffer.
inline void move_value_heads(const ValueHeadTiling& h, uint8_t* data, int64_t runs, int64_t stride, int64_t unit,
                             bool to_tiled) {
  const int64_t heads = h.key_heads * h.per_key;
  if (heads <= 0 || unit <= 0) return;
  std::vector<uint8_t> copy(static_cast<size_t>(heads * unit));
  for (int64_t r = 0; r < runs; ++r) {
    uint8_t* at = data + r * stride;
    std::memcpy(copy.data(), at, copy.size());
    for (int64_t k = 0; k < h.key_heads; ++k)
      for (int64_t j = 0; j < h.per_key; ++j) {
        const int64_t grouped = k * h.per_key + j, tiled = j * h.key_heads + k;
        std::memcpy(at + (to_tiled ? tiled : grouped) * unit, copy.data() + (to_tiled ? grouped : tiled) * unit,
                    size_t(unit));
      }
  }
}

}  // namespace attnzoo
