#pragma once
// The Hopper (sm_90a) prefill: FlashAttention-3's design on wgmma and TMA. Persistent CTAs (one per SM at most)
// share the items, an item being 128 query rows of one head of one sequence, by one of two schedules
// (PrefillSchedule: a fixed stride, or an atomic counter that hands the next item to whichever CTA asks first),
// with three warpgroups:
//   - the producer (warpgroup 0) gives its registers up (setmaxnreg) and one of its threads loads the Q tile once
//     and the K / V tiles of 128 keys (64 at D = 256) into a shared ring by TMA (4, 3 or 2 stages at D = 64, 128,
//     256: prefill_sm90_params.h), guarded by mbarriers: K and V each "full" (a transaction count of the tile's
//     bytes) and one "empty" (every consumer thread arrives once it has read the stage);
//   - two consumers of 64 query rows each: S = Q K^T by wgmma with both operands in shared memory (K-major),
//     the score transform, mask and online softmax in the accumulator registers (exp2 of scale * log2 e, shared
//     with the sm_80 path: prefill_rows.cuh, online_softmax.cuh), P rounded to the input dtype in registers and
//     O += P V by wgmma with A from registers and V as an MN-major B; the epilogue stores O with bounded plain
//     stores, so ragged sequence ends need no masking on the way out.
// K's full barrier is separate from V's, so S = Q K^T of a tile starts while its V is still in flight, and each
// consumer keeps the next tile's Q K^T in flight with this tile's P V, the softmax between them (FlashAttention-3's
// intra-warpgroup overlap). Across the two consumers, named barriers take turns (FlashAttention-3's ping-pong,
// section 3.1 of the paper): a consumer issues its GEMMs only in its turn and hands the turn over once they are
// issued, so one warpgroup's softmax (exp2 on the multi-function units) runs while the other's GEMMs hold the
// tensor cores, instead of both warpgroups contending for the same unit at the same time.
// Tile layouts, descriptors and swizzle: sm90.cuh and prefill_sm90_params.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/softmax/cuda/online_softmax.cuh"
#include "kernels/softmax/cuda/prefill_rows.cuh"
#include "kernels/softmax/cuda/prefill_sm90_params.h"
#include "kernels/softmax/cuda/sm90.cuh"

namespace attnzoo::cuda_prefill {

// The turns: consumer c waits at barrier kSm90TurnBarrier + c with bar.sync before issuing, and the other
// consumer's bar.arrive (128 threads each side) lets it go. Consumer 1 arrives once up front, so consumer 0 takes
// the first turn, and hands nothing over after its own last turn, so every phase completes: both consumers take
// the same number of turns, since the key range is the CTA's, not each warpgroup's.
constexpr int kSm90TurnBarrier = 1;  // 1 and 2; 0 is __syncthreads'
constexpr int kSm90TurnThreads = 2 * 128;

// The ring in shared memory (prefill_sm90_params.h's layout) from its 1024-byte aligned base: Q's buffer and its
// barriers (q_full: the TMA's bytes; q_empty: both consumers, once their last Q K^T of an item has landed), the
// K / V stages and theirs, and item_full (the dynamic schedule's: the producer has written the item slot). Ring
// position i (key tiles through the ring since the CTA began, over every item it took) is stage i % S in phase
// i / S.
template <int D>
struct Sm90Ring {
  using L = Sm90Layout<D>;
  uint32_t base;
  __device__ __forceinline__ uint32_t barrier(int index) const { return base + L::kBarriers + 8u * uint32_t(index); }
  __device__ __forceinline__ uint32_t q_full() const { return barrier(0); }
  __device__ __forceinline__ uint32_t q_empty() const { return barrier(1); }
  __device__ __forceinline__ uint32_t k_full(int stage) const { return barrier(2 + stage); }
  __device__ __forceinline__ uint32_t v_full(int stage) const { return barrier(2 + L::kStages + stage); }
  __device__ __forceinline__ uint32_t empty(int stage) const { return barrier(2 + 2 * L::kStages + stage); }
  __device__ __forceinline__ uint32_t item_full() const { return barrier(2 + 3 * L::kStages); }
  __device__ __forceinline__ uint32_t item_slot() const { return base + L::kItemSlot; }
  __device__ __forceinline__ uint32_t k_tile(int stage) const { return base + L::kK + uint32_t(stage) * L::kKVBytes; }
  __device__ __forceinline__ uint32_t v_tile(int stage) const { return base + L::kV + uint32_t(stage) * L::kKVBytes; }
  static __device__ __forceinline__ int stage(int i) { return i % L::kStages; }
  static __device__ __forceinline__ uint32_t parity(int i) { return uint32_t(i / L::kStages) & 1; }
};

// The item after `item` for this CTA. static_stride: a fixed stride. dynamic: the next one the counter hands
// out (the first grid's items are taken without it: CTA c starts on item c); the last CTA to finish drawing
// zeroes the counters for the next launch on the stream, so a launch needs no host reset and a CUDA graph may
// replay it. Past the list: params.items.
template <PrefillSchedule S>
__device__ __forceinline__ int next_item_sm90(const PrefillSm90Params& params, int item, int ctas) {
  if constexpr (S == PrefillSchedule::static_stride) {
    return item + ctas;
  } else {
    // Unsigned: the counter ends at most ctas past params.items, far below 2^32.
    const uint32_t next = uint32_t(ctas) + atomicAdd(&params.schedule[0], 1u);
    return next < uint32_t(params.items) ? int(next) : params.items;
  }
}
__device__ __forceinline__ void finish_drawing_sm90(const PrefillSm90Params& params, int ctas) {
  // Every CTA's last draw is ordered before its count of done (the fence), and the count before the reset, so
  // no draw of this launch lands after the counter went back to zero.
  __threadfence();
  if (atomicAdd(&params.schedule[1], 1u) == unsigned(ctas) - 1) {
    __threadfence();
    params.schedule[0] = 0;
    params.schedule[1] = 0;
  }
}

// The producer's one thread: for every item of this CTA, Q once its buffer is free, then the item's K / V tiles
// into the ring as stages free up; the next item's loads start while the consumers still finish this one.
// dynamic: the item also goes to the ring's item slot (guarded like Q's buffer: written once q_empty says the
// consumers have read the last one, published by item_full), and once the counter runs out, params.items tells
// the consumers to stop. The slot is addressed from the ring's base: this thread runs on 24 registers, and a
// pointer to it held across the loop made the 64-bit divisions below spill.
template <int D, PrefillSchedule S>
__device__ __forceinline__ void produce_sm90(const PrefillSm90Params& params, const Sm90Ring<D>& ring, int cta,
                                             int ctas) {
  using L = Sm90Layout<D>;
  constexpr int Bc = L::kKeyTile;
  const PrefillParams& p = params.p;
  int i = 0;  // ring position
  int round = 0;
  for (int item = cta; item < params.items; ++round) {
    const int head = item % params.heads, kv_head = head / p.group;
    const WorkItem w = p.work[item / params.heads];
    const SeqDesc s = p.seqs[w.seq];
    const KeyTiles range = key_tiles(p, s, w.q_start, kSm90QueryTile, Bc);
    // Sequences start at whole tokens (the plan checks it), so their first rows are token coordinates.
    const int q_row = int(s.q_offset / p.q_token) + w.q_start;
    const int k_row = int(s.k_offset / p.k_token), v_row = int(s.v_offset / p.v_token);
    sm90::mbarrier_wait(ring.q_empty(), (uint32_t(round) & 1) ^ 1);  // the first round finds it free
    if constexpr (S == PrefillSchedule::dynamic) {
      sm90::st_shared_u32(ring.item_slot(), uint32_t(item));
      sm90::mbarrier_arrive(ring.item_full());  // release: the consumers' wait makes the slot's value visible
    }
    sm90::mbarrier_arrive_expect_tx(ring.q_full(), L::kQBytes);
    for (int box = 0; box < L::kBoxes; ++box)
      sm90::tma_load_3d(ring.base + L::kQ + uint32_t(box) * L::kQBox, params.q, 64 * box, head, q_row,
                        ring.q_full());
    for (int n = range.n_begin; n < range.n_end; ++n, ++i) {
      const int stage = ring.stage(i);
      sm90::mbarrier_wait(ring.empty(stage), ring.parity(i) ^ 1);  // the first pass finds every stage free
      sm90::mbarrier_arrive_expect_tx(ring.k_full(stage), L::kKVBytes);
      for (int box = 0; box < L::kBoxes; ++box)
        sm90::tma_load_3d(ring.k_tile(stage) + uint32_t(box) * L::kKVBox, params.k, 64 * box, kv_head,
                          k_row + n * Bc, ring.k_full(stage));
      sm90::mbarrier_arrive_expect_tx(ring.v_full(stage), L::kKVBytes);
      for (int box = 0; box < L::kBoxes; ++box)
        sm90::tma_load_3d(ring.v_tile(stage) + uint32_t(box) * L::kKVBox, params.v, 64 * box, kv_head,
                          v_row + n * Bc, ring.v_full(stage));
    }
    // Drawn only now, with every load of this item issued: the draw's latency hides behind the q_empty wait, and
    // the CTA claims the next item a ring's depth before its consumers can start it, not a whole item before.
    item = next_item_sm90<S>(params, item, ctas);
  }
  if constexpr (S == PrefillSchedule::dynamic) {
    sm90::mbarrier_wait(ring.q_empty(), (uint32_t(round) & 1) ^ 1);
    sm90::st_shared_u32(ring.item_slot(), uint32_t(params.items));
    sm90::mbarrier_arrive(ring.item_full());
    finish_drawing_sm90(params, ctas);
  }
}

// One consumer warpgroup's 64 rows of one item (query tile `work_index`, `head`), the CTA's `round`-th item,
// whose key tiles start at ring position `first`. Returns the item's count of key tiles.
template <class Elem, int D>
__device__ __forceinline__ int consume_item_sm90(const PrefillSm90Params& params, const Sm90Ring<D>& ring,
                                                 int work_index, int head, int round, int first) {
  using L = Sm90Layout<D>;
  using Ring = Sm90Ring<D>;
  constexpr int Br = kSm90QueryTile, Bc = L::kKeyTile;
  const PrefillParams& p = params.p;
  const WorkItem w = p.work[work_index];
  const SeqDesc s = p.seqs[w.seq];
  const int m0 = w.q_start;
  const KeyTiles range = key_tiles(p, s, m0, Br, Bc);

  const int tid = sm80::thread_index(), consumer = tid / 128 - 1;
  const int lane = tid % 32, warp = (tid % 128) / 32, g = lane / 4, t = lane % 4;
  auto wait_turn = [&] { sm90::named_barrier_sync(kSm90TurnBarrier + consumer, kSm90TurnThreads); };
  auto pass_turn = [&] { sm90::named_barrier_arrive(kSm90TurnBarrier + 1 - consumer, kSm90TurnThreads); };
  // This thread's two rows (g and g + 8 of its warp's 16 in its warpgroup's 64) as sequence positions.
  const int row = m0 + 64 * consumer + 16 * warp + g;
  const int qpos[2] = {s.Tk - s.Tq + row, s.Tk - s.Tq + row + 8};

  // Softmax state in log2 units, as in prefill_tile.cuh: a sink starts the running max and joins the sum last.
  const float sink_log2 = p.sinks ? p.sinks[head] * kLog2e : -INFINITY;
  const float slope_log2 = p.alibi_slopes ? p.alibi_slopes[head] * kLog2e : 0.f;
  float row_max[2] = {sink_log2, sink_log2};
  float row_sum[2] = {0.f, 0.f};
  float acc[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.f;

  // This warpgroup's 64 rows of Q: the K-major A operand, 32 bytes further per k16 step within a box.
  const uint32_t q_rows = ring.base + L::kQ + uint32_t(consumer) * 64 * 128;
  // The item's i-th key tile is the ring's (first + i)-th.
  auto stage_of = [&](int i) { return Ring::stage(first + i); };
  auto parity_of = [&](int i) { return Ring::parity(first + i); };

  // S = Q K^T of the i-th key tile into sc, issued and committed (not waited for).
  float sc[Bc / 8][4];
  auto issue_scores = [&](int i) {
    sm90::mbarrier_wait(ring.k_full(stage_of(i)), parity_of(i));
    sm90::fence_operand(sc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t step = uint32_t(kk % 4) * 32;
      const uint64_t a = sm90::smem_descriptor(q_rows + uint32_t(kk / 4) * L::kQBox + step, 16, 1024);
      const uint64_t b =
          sm90::smem_descriptor(ring.k_tile(stage_of(i)) + uint32_t(kk / 4) * L::kKVBox + step, 16, 1024);
      sm90::wgmma_ss<Elem, Bc, 0>(sc, a, b, kk > 0);
    }
    sm90::wgmma_commit();
  };
  // The landed scores of key tile n into weights and the factor the output rows must be rescaled by.
  float alpha[2];
  auto weigh = [&](int n) {
    sm90::fence_operand(sc);
    score_tile(p, s, range, n * Bc, qpos, t, slope_log2, sc);
    sm80::online_softmax_weights(sc, row_max, row_sum, alpha);
  };
  // P rounded to Elem as the A fragments of P V (key columns 16kk..16kk+15 are n-blocks 2kk and 2kk+1): only
  // once the previous P V has landed, since a wgmma reads its A registers asynchronously too.
  uint32_t pf[Bc / 16][4];
  auto pack_weights = [&] {
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      pf[kk][0] = sm80::pack2<Elem>(sc[2 * kk][0], sc[2 * kk][1]);
      pf[kk][1] = sm80::pack2<Elem>(sc[2 * kk][2], sc[2 * kk][3]);
      pf[kk][2] = sm80::pack2<Elem>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      pf[kk][3] = sm80::pack2<Elem>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
    }
  };

  sm90::mbarrier_wait(ring.q_full(), uint32_t(round) & 1);
  const int tiles = range.n_end - range.n_begin;
  if (tiles > 0) {
    if (consumer == 1) pass_turn();
    wait_turn();
    issue_scores(0);
    pass_turn();
    sm90::wgmma_wait<0>();
    weigh(range.n_begin);
    sm80::rescale_rows(acc, alpha);
    pack_weights();
  }
  // O += P V for key tile i, issued and committed.
  auto issue_values = [&](int i) {
    // V [key][dim] is B = V (k = key, n = dim) with n contiguous: MN-major, 16 key rows (2048 bytes) per step,
    // the next 64 dims one box (leading byte offset) further.
    sm90::mbarrier_wait(ring.v_full(stage_of(i)), parity_of(i));
    sm90::fence_operand(acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk)
      sm90::wgmma_rs<Elem, D, 1>(acc, pf[kk],
                                 sm90::smem_descriptor(ring.v_tile(stage_of(i)) + uint32_t(kk) * 2048, L::kKVBox, 1024), 1);
    sm90::wgmma_commit();
  };
  // FlashAttention-3's intra-warpgroup pipeline: tile i + 1's Q K^T and tile i's P V are in flight together, and
  // tile i + 1's softmax runs while P V still does; its rescale of O and its P wait for P V to land.
  for (int i = 0; i + 1 < tiles; ++i) {
    wait_turn();
    issue_scores(i + 1);
    issue_values(i);
    pass_turn();  // the other consumer's GEMMs go in while this one's softmax runs
    sm90::wgmma_wait<1>();  // Q K^T of tile i + 1 (the older group) has landed; P V may still run
    weigh(range.n_begin + i + 1);
    sm90::wgmma_wait<0>();
    sm90::fence_operand(acc);
    sm90::mbarrier_arrive(ring.empty(stage_of(i)));  // this thread is done with the stage; the producer may refill it
    sm80::rescale_rows(acc, alpha);
    pack_weights();
  }
  // Every Q K^T of the item has landed: the producer may load the next item's Q while P V and the epilogue run.
  sm90::mbarrier_arrive(ring.q_empty());
  if (tiles > 0) {
    wait_turn();
    issue_values(tiles - 1);
    if (consumer == 0) pass_turn();  // consumer 1's last turn is the last one
    sm90::wgmma_wait<0>();
    sm90::fence_operand(acc);
    sm90::mbarrier_arrive(ring.empty(stage_of(tiles - 1)));
  }

  finish_rows<D>(p, s, head, row, t, acc, row_max, row_sum, sink_log2);
  return tiles;
}

// The persistent CTA `cta` of `ctas`: it takes items of the flat (work item, head) list, heads innermost, by
// schedule S; the plan's work list is costliest first, so the longest causal tiles start first and the short
// ones fill in at the end. The barriers are set up once; the ring and the turns carry over from one item to the
// next, so the producer loads the next item while the consumers finish this one.
template <class Elem, int D, PrefillSchedule S>
__device__ __forceinline__ void attend_tiles_sm90(const PrefillSm90Params& params, int cta, int ctas,
                                                  unsigned char* smem) {
  using L = Sm90Layout<D>;
  const int tid = sm80::thread_index(), group = tid / 128;
  const uint32_t raw = sm80::smem_u32(smem);
  const Sm90Ring<D> ring{(raw + 1023u) & ~1023u};  // 128-byte swizzle: 1024-aligned
  if (tid == 0) {
    sm90::mbarrier_init(ring.q_full(), 1);
    sm90::mbarrier_init(ring.q_empty(), 128 * kSm90Consumers);
    for (int stage = 0; stage < L::kStages; ++stage) {
      sm90::mbarrier_init(ring.k_full(stage), 1);
      sm90::mbarrier_init(ring.v_full(stage), 1);
      sm90::mbarrier_init(ring.empty(stage), 128 * kSm90Consumers);
    }
    sm90::mbarrier_init(ring.item_full(), 1);
    sm90::fence_barrier_init();
  }
  sm80::sync_threads();  // the last CTA-wide barrier: the roles part here

  if (group == 0) {
    sm90::setmaxnreg_dec<24>();
    if (tid == 0) produce_sm90<D, S>(params, ring, cta, ctas);
    return;
  }
  sm90::setmaxnreg_inc<240>();
  if constexpr (S == PrefillSchedule::static_stride) {
    for (int item = cta, round = 0, first = 0; item < params.items; item += ctas, ++round)
      first += consume_item_sm90<Elem, D>(params, ring, item / params.heads, item % params.heads, round, first);
  } else {
    for (int round = 0, first = 0;; ++round) {
      // item_full's phase `round` cannot run ahead of this read: the producer writes the next item only once
      // q_empty says both consumers are past this one. An unsigned compare, so anything but an item (the slot's
      // stale bytes, params.items) stops.
      sm90::mbarrier_wait(ring.item_full(), uint32_t(round) & 1);
      const uint32_t item = sm90::ld_shared_u32(ring.item_slot());
      if (item >= uint32_t(params.items)) break;
      first += consume_item_sm90<Elem, D>(params, ring, int(item) / params.heads, int(item) % params.heads, round,
                                          first);
    }
  }
}

}  // namespace attnzoo::cuda_prefill
