#pragma once
// The CUDA quantized GEMV's launch, decided on the host: the kernel's parameters, grid, threads and shared
// memory for a validated problem. Plain C++: gemv.cu launches it; the kernel emulator (testing/cuda_emulation)
// runs the same parameters through the same device code (gemv_kernel.cuh).
#include <cstddef>
#include <cstdint>

#include "kernels/quant/cuda/gemv_cuda.h"

namespace attnzoo::cuda_quant {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;  // a warp's rows share each activation value it loads from shared memory
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kThreads = kWarps * 32;
// Weights per row per pass: x [kM, kTileElems] f32 and each row's bytes of the tile are staged in shared memory,
// two of each (the next tile's are in flight while one is decoded). 2048 is the smallest count whose bytes are whole 16-byte vectors in every format (Q6_K: 8 blocks of 210).
constexpr int kTileElems = 2048;

struct Params {
  const unsigned char* w;
  int64_t w_row_bytes;
  const void* x;
  DType x_dtype;
  int64_t x_stride;
  void* y;
  DType y_dtype;
  int64_t y_stride;
  const float* bias;  // or null
  bool accumulate;
  int M;
  int64_t N, K;
  int w_load_bytes;  // 16, 4 or 2: the widest that divides w's base and its row length
  bool x_async;      // f32 x in whole 16-byte rows: copied by cp.async like the weights, else loaded and converted
};

struct GemvLaunch {
  bool empty = true;  // M = 0 or N = 0: nothing to write
  QuantType type = QuantType::BF16;
  int rows_bucket = 1;  // kM, the activation rows the kernel is compiled for: 1, 2, 4 or 8 (>= M)
  Params params{};
  unsigned grid = 0, threads = kThreads;
  size_t smem_bytes = 0;
};

// A block of the format as the kernel walks it: elements (32, or a K-quant super-block's 256; BF16 / F16 are
// taken 32 at a time) and bytes.
struct BlockShape {
  int elems, bytes;
};
BlockShape block_shape(QuantType type);
// Bytes of one row's tile in shared memory (a whole number of 16-byte vectors).
inline int tile_bytes(QuantType type) {
  const BlockShape b = block_shape(type);
  return kTileElems / b.elems * b.bytes;
}

GemvLaunch plan_quant_gemv(const QuantGemvProblem& p);

}  // namespace attnzoo::cuda_quant
