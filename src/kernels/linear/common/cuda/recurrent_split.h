#pragma once
// The work split the CUDA recurrences share (delta_recurrent, gla_recurrent, rwkv7_recurrent): a CTA per
// (sequence, head, slice of kCols state columns); warp w holds state rows [32 w, 32 w + 32) of the slice, lane c
// column c, one float per row in registers. Plain C++, so the launch plans see the same sizes as the kernels.
namespace attnzoo::cuda_linear {

constexpr int kCols = 32;            // state columns per CTA: one warp wide
constexpr int kRowsPerThread = 32;   // state rows per warp, in each thread's registers
constexpr int kMaxWarps = 8;         // so K <= 256
constexpr int kMaxK = kMaxWarps * kRowsPerThread;
constexpr int kMaxThreads = kMaxWarps * 32;

}  // namespace attnzoo::cuda_linear
