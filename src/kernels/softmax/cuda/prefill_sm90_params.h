#pragma once
// What the Hopper prefill's host side and its kernel (prefill_sm90_tile.cuh) share: the tile geometry, the shared
// memory layout and the parameters. Plain C++ like prefill_params.h, so the plan builds in every configuration.
#include <cstddef>
#include <cstdint>

#include "kernels/softmax/cuda/prefill_params.h"
#include "kernels/softmax/cuda/tensor_map.h"

namespace attnzoo::cuda_prefill {

// FlashAttention-3's shape: one producer warpgroup (one thread of it issues the TMA copies) and two consumer
// warpgroups of 64 query rows each, over a ring of K and V tiles: 128 keys, 64 at D = 256, where the ring would
// not fit shared memory and O's 128 accumulator registers leave room for 32 of scores only.
constexpr int kSm90Consumers = 2;
constexpr int kSm90Threads = 128 * (1 + kSm90Consumers);
constexpr int kSm90QueryTile = 64 * kSm90Consumers;
constexpr int sm90_key_tile(int64_t D) { return D <= 128 ? 128 : 64; }
// The ring's stages: as many as the 227 KiB of shared memory a CTA may have hold beside Q, up to 4 (one CTA per
// SM either way: the registers allow no second). D = 64: 16 KiB of Q + 4 x 32 KiB; D = 128: 32 + 3 x 64 KiB;
// D = 256: 64 + 2 x 64 KiB. More stages let the producer run further ahead of the consumers, over TMA latency
// and the uneven pace the ping-pong gives them.
constexpr int sm90_stages(int64_t D) { return D == 64 ? 4 : D == 128 ? 3 : 2; }
constexpr size_t kSm90MaxSmemBytes = 227 * 1024;

// Every tile is stored as D / 64 boxes of 64 columns (128 bytes: the widest row a 128-byte swizzle spans), each
// box its rows at 128-byte pitch, swizzled; every box starts 1024-byte aligned.
template <int D>
struct Sm90Layout {
  static_assert(D == 64 || D == 128 || D == 256, "the Hopper path covers head dims 64, 128 and 256");
  static constexpr int kBoxes = D / 64, kKeyTile = sm90_key_tile(D), kStages = sm90_stages(D);
  static constexpr uint32_t kQBox = kSm90QueryTile * 128, kKVBox = kKeyTile * 128;  // bytes of one box
  static constexpr uint32_t kQBytes = kBoxes * kQBox, kKVBytes = kBoxes * kKVBox;      // bytes of one tile
  static constexpr uint32_t kQ = 0, kK = kQBytes, kV = kK + kStages * kKVBytes;
  // q_full, q_empty, k_full[S], v_full[S], empty[S], item_full; then the dynamic schedule's item slot (an int32
  // in 8 bytes).
  static constexpr uint32_t kBarriers = kV + kStages * kKVBytes;
  static constexpr uint32_t kItemSlot = kBarriers + 8 * (3 + 3 * kStages);
  static constexpr size_t kSmemBytes = kItemSlot + 8 + 1024;  // + slack to align to 1024
  static_assert(kSmemBytes <= kSm90MaxSmemBytes, "the ring does not fit shared memory");
};

// Q, K and V as TMA maps: 3-D (head dim, head, token) over the whole tensor, each sequence's rows from the token
// its offset names; rows past the tensor read as zeros, rows past a sequence inside it are its neighbour's
// (finite data, masked out or never stored).
// How the persistent CTAs share the `items` = work items x `heads` (prefill_sm90_tile.cuh). static_stride: CTA c
// takes items c, c + grid, c + 2 grid, ... of the list (costliest first), fixed before the launch. dynamic
// (FlashAttention-3's dynamic persistent scheduler): CTA c takes item c first, then whichever item an atomic
// counter in global memory hands it when its producer has issued the previous one's loads, so a CTA that drew
// cheap items takes more of them; the producer passes each item to the consumers through shared memory.
enum class PrefillSchedule : int { static_stride, dynamic };

struct PrefillSm90Params {
  PrefillParams p;
  sm90::TensorMap q, k, v;
  int32_t heads, items;
  // dynamic: two counters in the plan's metadata, zero between launches (the plan uploads them as zeros and the
  // launch's last CTA zeroes them again): [0] the items handed out past the first grid's, [1] the CTAs done
  // drawing. Unused (may be null) under static_stride.
  uint32_t* schedule;
};

}  // namespace attnzoo::cuda_prefill
