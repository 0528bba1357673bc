#pragma once
// The device side of the MoE dispatch (moe_cuda.h has the contract; moe.cu launches it, the CTA emulator runs it in
// testing/cuda_emulation/moe_cases.cc): the grouping, the gather and the combine. The grouped GEMM is
// grouped_gemm_kernel.cuh.
#include <cstdint>

#include "layers/cuda/elementwise_kernel.cuh"
#include "layers/cuda/moe_plan.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_moe {

// Walks entries [begin, end) in chunks of kGroupThreads, thread c holding entry base + c: a thread's rank among
// the chunk's entries of its expert is the count of lower threads with that expert, and the chunk's last entry of
// each expert advances the expert's cursor. Counting (place false) only advances; placing puts each entry at its
// expert's cursor plus its rank. Only one thread writes a cursor per chunk, so no atomics, and the order is the
// entries' order within each expert: stable. Opens with a barrier (the caller's cursors set); the caller syncs
// before reading the cursors after it.
__device__ __forceinline__ void walk_entries(const GroupParams& p, int* cursor, int* chunk, int begin, int end,
                                             bool place) {
  const int tid = int(threadIdx.x);
  for (int base = begin; base < end; base += kGroupThreads) {
    __syncthreads();  // the cursors set, or the previous chunk's updates done; its chunk no longer read
    const int i = base + tid;
    const int id = i < end ? p.ids[i] : -1;
    chunk[tid] = id;
    __syncthreads();
    int rank = 0;
    bool last = true;
    if (id >= 0) {
      for (int j = 0; j < tid; ++j) rank += chunk[j] == id;
      for (int j = tid + 1; j < kGroupThreads && last; ++j) last = chunk[j] != id;
      if (place) {
        const int row = cursor[id] + rank;
        p.source[row] = i;
        p.dest[i] = row;
      }
    }
    __syncthreads();  // every read of the cursors before they move
    if (id >= 0 && last) cursor[id] += rank + 1;
  }
}

// The single-CTA grouping (n <= kGroupOneCtaMax): count, a serial scan (E <= 1024) of the counts into offsets and
// tile prefixes, place.
__device__ __forceinline__ void group_entries(const GroupParams& p, unsigned char* smem) {
  int* cursor = reinterpret_cast<int*>(smem);
  int* chunk = cursor + p.experts;
  const int tid = int(threadIdx.x);
  for (int e = tid; e < p.experts; e += kGroupThreads) cursor[e] = 0;
  walk_entries(p, cursor, chunk, 0, p.n, false);
  __syncthreads();  // every count in
  if (tid == 0) {
    int row = 0, tile = 0;
    for (int e = 0; e < p.experts; ++e) {
      const int count = cursor[e];
      p.offsets[e] = row;
      p.tiles[e] = tile;
      cursor[e] = row;
      row += count;
      tile += (count + p.tile_rows - 1) / p.tile_rows;
    }
    p.offsets[p.experts] = row;
    p.tiles[p.experts] = tile;
  }
  walk_entries(p, cursor, chunk, 0, p.n, true);
}

// The multi-CTA grouping's first launch: CTA c counts its range's entries per expert into counts[e, c].
__device__ __forceinline__ void count_entries(const GroupParams& p, unsigned char* smem) {
  int* cursor = reinterpret_cast<int*>(smem);
  int* chunk = cursor + p.experts;
  const int c = int(blockIdx.x), tid = int(threadIdx.x);
  const int begin = c * p.range, end = min(p.n, begin + p.range);
  for (int e = tid; e < p.experts; e += kGroupThreads) cursor[e] = 0;
  walk_entries(p, cursor, chunk, begin, end, false);
  __syncthreads();
  for (int e = tid; e < p.experts; e += kGroupThreads) p.counts[int64_t(e) * p.ctas + c] = cursor[e];
}

// The exclusive prefix of each thread's v over the CTA (every thread calls it), and the CTA's total. warp_sums:
// 32 ints of shared memory, free again after the caller's next barrier.
__device__ __forceinline__ int block_exclusive_scan(int v, int* warp_sums, int& total) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
  int x = v;
  for (int d = 1; d < 32; d *= 2) {
    const int y = __shfl_sync(0xffffffffu, x, lane >= d ? lane - d : lane);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? warp_sums[lane] : 0;
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_sync(0xffffffffu, w, lane >= d ? lane - d : lane);
      if (lane >= d) w += y;
    }
    warp_sums[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  total = warp_sums[warps - 1];
  return (warp > 0 ? warp_sums[warp - 1] : 0) + x - v;
}

// The second launch, one CTA of kScanThreads: counts [E, ctas] scanned in place in (expert, CTA) order, so
// counts[e, c] becomes CTA c's first row for expert e; offsets[e] = counts[e, 0]; the tile prefix over the
// experts' totals. Tiles of kScanThreads x kScanItems counts, loaded and stored coalesced, each thread scanning
// kScanItems consecutive ones.
__device__ __forceinline__ void scan_counts(const GroupParams& p, unsigned char* smem) {
  constexpr int kTile = kScanThreads * kScanItems;
  int* tile = reinterpret_cast<int*>(smem);
  int* warp_sums = tile + kTile;
  int* start = warp_sums + 32;  // [experts + 1]
  const int tid = int(threadIdx.x);
  const int64_t m = int64_t(p.experts) * p.ctas;
  int carry = 0;
  for (int64_t base = 0; base < m; base += kTile) {
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t q = base + j * kScanThreads + tid;
      tile[j * kScanThreads + tid] = q < m ? p.counts[q] : 0;
    }
    __syncthreads();
    int* mine = tile + tid * kScanItems;
    int sum = 0;
    for (int j = 0; j < kScanItems; ++j) sum += mine[j];
    int total = 0;
    int run = carry + block_exclusive_scan(sum, warp_sums, total);
    for (int j = 0; j < kScanItems; ++j) {
      const int v = mine[j];
      mine[j] = run;
      run += v;
    }
    __syncthreads();
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t q = base + j * kScanThreads + tid;
      if (q < m) {
        p.counts[q] = tile[j * kScanThreads + tid];
        if (q % p.ctas == 0) start[q / p.ctas] = tile[j * kScanThreads + tid];
      }
    }
    carry += total;
    __syncthreads();  // the tile and the warps' sums free for the next one
  }
  if (tid == 0) start[p.experts] = p.n;
  __syncthreads();
  // E <= kScanThreads: an expert per thread.
  const int e = tid;
  const int rows = e < p.experts ? start[e + 1] - start[e] : 0;
  int tiles_total = 0;
  const int tile_start = block_exclusive_scan((rows + p.tile_rows - 1) / p.tile_rows, warp_sums, tiles_total);
  if (e < p.experts) {
    p.offsets[e] = start[e];
    p.tiles[e] = tile_start;
  }
  if (tid == 0) {
    p.offsets[p.experts] = p.n;
    p.tiles[p.experts] = tiles_total;
  }
}

// The third launch: CTA c places its range from its bases counts[e, c], as group_entries' second pass.
__device__ __forceinline__ void scatter_entries(const GroupParams& p, unsigned char* smem) {
  int* cursor = reinterpret_cast<int*>(smem);
  int* chunk = cursor + p.experts;
  const int c = int(blockIdx.x), tid = int(threadIdx.x);
  const int begin = c * p.range, end = min(p.n, begin + p.range);
  for (int e = tid; e < p.experts; e += kGroupThreads) cursor[e] = p.counts[int64_t(e) * p.ctas + c];
  walk_entries(p, cursor, chunk, begin, end, true);
}

// Grid-stride over the n x H elements: x[r] = h[source[r] / top_k], rounded to Out (what the GEMM's staging would
// round it to; a bf16 h into a bf16 x is a plain copy).
template <class In, class Out>
__device__ __forceinline__ void gather_rows(const GatherParams& p) {
  const In* h = static_cast<const In*>(p.h);
  Out* x = static_cast<Out*>(p.x);
  const int64_t total = int64_t(p.n) * p.H;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < total; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = q / p.H, c = q % p.H;
    const int64_t t = p.source[r] / p.top_k;
    x[q] = cuda_step::from_f32<Out>(cuda_step::to_f32(h[t * p.ldh + c]));
  }
}

// Grid-stride over the T x H elements. The order is the CPU's (SparseMoe / DeepseekMoe forward, then the block's
// residual add): the shared expert's output (times its gate), then each slot's weight * row in slot order, then
// the sum into the residual. Products rounded before the add, as the CPU stores each slot's product first.
__device__ __forceinline__ void combine_slots(const CombineParams& p) {
  const int64_t total = int64_t(p.T) * p.H;
  for (int64_t q = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < total; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = q / p.H, c = q % p.H;
    float acc = 0.f;
    if (p.shared) {
      acc = p.shared[t * p.ldshared + c];
      if (p.shared_gate) acc = __fmul_rn(acc, 1.f / (1.f + expf(-p.shared_gate[t * p.ldgate])));
    }
    for (int j = 0; j < p.top_k; ++j) {
      const int64_t e = t * p.top_k + j;
      acc += __fmul_rn(p.weights[e], p.expert_out[int64_t(p.dest[e]) * p.H + c]);
    }
    p.x[t * p.ldx + c] += acc;
  }
}

// A warp per (token, expert), grid-stride over the T x E pairs: lane l sums x[k] w[k] over k = l, l + 32, ...,
// then the warp's butterfly. The pair is one per warp, so every lane of a warp runs the same loop and shuffles.
// In: x's dtype (f32, or the runner's bf16 normed rows, widened exactly).
template <class In>
__device__ __forceinline__ void router_dots(const RouterParams& p) {
  const int lane = int(threadIdx.x) % 32, warps = int(blockDim.x) / 32;
  const int64_t pairs = int64_t(p.T) * p.E;
  for (int64_t q = int64_t(blockIdx.x) * warps + threadIdx.x / 32; q < pairs; q += int64_t(gridDim.x) * warps) {
    const In* x = static_cast<const In*>(p.x) + (q / p.E) * p.ldx;
    const float* w = p.w + (q % p.E) * p.H;
    float acc = 0.f;
    for (int k = lane; k < p.H; k += 32) acc += cuda_step::to_f32(x[k]) * w[k];
    acc = cuda_step::warp_sum(acc);
    if (lane == 0) p.logits[q] = acc;
  }
}

// Grid-stride over the elements, in place, with the gated activation's formulas (elementwise_kernel.cuh).
template <Activation kAct>
__device__ __forceinline__ void activate_in_place(const ActivationParams& p) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x)
    p.x[i] = cuda_step::activate<kAct>(p.x[i]);
}

}  // namespace attnzoo::cuda_moe
