#pragma once
// What the CUDA decode's host side and its kernels share: the chunk geometry, the work and merge records and the
// kernels' parameters. Plain C++ (no CUDA headers), so the split-KV planning (decode_launch_plan.cc) builds in
// every configuration and the kernel emulator (testing/cuda_emulation) reads the same layout.
#include <cstdint>

namespace attnzoo::cuda_decode {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;

enum class OutType : int { f32, bf16, f16 };

struct WorkItem {
  int32_t b, hk;
  int32_t k_begin, k_end;  // this chunk's keys
  int32_t len;             // seqlens[b]: query t of the sequence sits at len - Tq + t
  int32_t slot;            // -1: the sequence's only chunk, writes out; else its partial-result slot
};

struct MergeItem {
  int32_t b, hk, first_slot, num_slots;
};

struct DecodeParams {
  const void* q;
  void* o;
  const void* k;
  const void* v;
  const float* k_scale;  // null unless the cache is int8 / e4m3
  const float* v_scale;
  int64_t q_batch, q_token, q_head, o_batch, o_token, o_head;  // elements
  int64_t k_block, k_token, k_head, v_block, v_token, v_head;
  int64_t ks_block, ks_token, ks_head, vs_block, vs_token, vs_head;
  const WorkItem* work;
  const MergeItem* merges;
  const int32_t* block_table;  // device [B, max_blocks_per_seq]; null: contiguous (block = sequence)
  int64_t max_blocks_per_seq;
  int32_t block_size;          // S_max for a contiguous cache
  int32_t Tq, group, rows, D;  // rows = Tq * group
  int32_t causal, window;      // window clamped by the host to at most the longest sequence + 1
  const float* sinks;          // device [Hq] or null
  const float* alibi_slopes;   // device [Hq] or null
  float* part_o;               // [slot][rows][D]
  float* part_m;               // [slot][rows], log2 units
  float* part_l;               // [slot][rows]
  OutType out_type;
  float scale_log2;            // scale * log2(e): softmax in exp2
  float softcap_log2;          // softcap * log2(e); 0: no softcap
  float scale_over_softcap;
};

template <int D, int M, class KvT>
struct ChunkShape {
  static_assert(D == 64 || D == 96 || D == 128 || D == 256);  // 96: Phi-3 / Phi-3.5 mini, on 64's and 128's tiles
  static_assert(M == 1 || M == 4);
  static constexpr bool kQuant = sizeof(KvT) == 1;
  // Head dim 256 halves the tile so K and V of two stages (and 64 query rows) stay inside sm_80's 163 KB.
  static constexpr int kTile = D == 256 ? 32 : 64;
  static constexpr int kStages = D == 256 ? 2 : 3;
  static constexpr int kRows = 16 * M;
  static constexpr int kSlices = kWarps / M;          // warps that share one 16-row block, each its own keys
  static constexpr int kWarpKeys = kTile / kSlices;
  static_assert(kWarpKeys % 16 == 0, "a warp's keys must fill whole k16 steps of P V");
  // 16 bytes of padding per row: the eight rows one ldmatrix phase reads fall into eight different bank quads.
  static constexpr int kPitch = D + 8;
  // Q in registers costs D / 4 of them; at D = 256 the output accumulator alone takes 128.
  static constexpr bool kQInRegisters = D <= 128;
  static constexpr int kTileBytes = kTile * kPitch * 2;  // one K or V tile in q's type
  static constexpr int kRawBytes = kTile * D;            // one K or V tile of bytes
  static constexpr int kQBytes = kRows * kPitch * 2;
  static constexpr int kRowsBytes = 2 * kTile * 8;       // int2 (block, row) per key, two tiles
  static constexpr int kPipeBytes =
      kQuant ? kStages * (2 * kRawBytes + 2 * kTile * 4) + 2 * kTileBytes : kStages * 2 * kTileBytes;
  static constexpr int kScratchPitch = D + 8;  // floats; the pad spreads a warp's float2 stores over all banks
  static constexpr int kScratchBytes = kWarps * 16 * kScratchPitch * 4 + 2 * kWarps * 16 * 4;
  static constexpr int kSmemBytes = kQBytes + kRowsBytes + (kPipeBytes > kScratchBytes ? kPipeBytes : kScratchBytes);
};

// Query rows one CTA serves: 16 (one m16 block shared by the 4 warps, which split the keys) when they suffice,
// else 64 (a block per warp). Head dim 256 always takes 64: its 32-key tile cannot be cut into four 16-key
// slices. Head dim 96 always takes 16, more row groups where there are more rows: its models (Phi-3 / Phi-3.5
// mini) are MHA, so a step's rows (new tokens x heads per kv head) are at most kMaxDecodeQueries = 8, and one
// instantiation per cache format keeps the build lean. 16 * M of ChunkShape.
constexpr int rows_per_cta(int64_t D, int64_t rows) { return D == 96 ? 16 : D == 256 || rows > 16 ? 64 : 16; }

}  // namespace attnzoo::cuda_decode
