#pragma once
// What the CUDA prefill's host side and its kernel share: the tile geometry, the metadata records and the
// kernel's parameters. Plain C++ (no CUDA headers), so the host planning (prefill_launch_plan.cc) builds in every
// configuration and the kernel emulator (testing/cuda_emulation) reads the same layout.
#include <cstdint>

namespace attnzoo::cuda_prefill {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kQueryTile = 16 * kWarps;  // Br: 16 rows per warp, the M of one MMA
constexpr float kLog2e = 1.4426950408889634f;

enum class OutType : int { f32, bf16, f16 };

struct SeqDesc {
  int64_t q_offset, k_offset, v_offset, o_offset;  // elements to token 0, head 0
  int32_t Tq, Tk;
};

struct WorkItem {
  int32_t seq, q_start;  // one CTA (per head): rows [q_start, q_start + kQueryTile) of sequence `seq`
};

struct PrefillParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_token, q_head, k_token, k_head, v_token, v_head, o_token, o_head;  // elements
  const SeqDesc* seqs;
  const WorkItem* work;
  const float* sinks;         // device [Hq] or null
  const float* alibi_slopes;  // device [Hq] or null
  int group;                  // Hq / Hkv
  int causal;
  int window;  // 0: none; clamped by the host to at most max Tk + 1, which means the same
  OutType out_type;
  float scale_log2;          // scale * log2(e): exp(x) is computed as exp2(x * log2 e)
  float softcap;             // 0: none
  float softcap_log2;        // softcap * log2(e)
  float scale_over_softcap;  // scale / softcap
};

// Tile shapes per head dim. Bc shrinks for D = 256 so K and V tiles, double-buffered, stay near 100 KB; Q stays in
// shared memory there (re-read per key tile, as FlashAttention-2 does) because its 64 registers on top of a
// 128-register accumulator would spill. D = 96 (Phi-3 / Phi-3.5 mini) takes 64's and 128's tiles: six k16 steps.
template <int D>
struct TileShape {
  static_assert(D == 64 || D == 96 || D == 128 || D == 256);
  static constexpr int kBr = kQueryTile;
  static constexpr int kBc = D <= 128 ? 64 : 32;
  // Row pitch in elements: 16 bytes of padding shift each row by four banks, so the eight 16-byte rows one
  // ldmatrix phase reads fall in eight different bank quads instead of all in the same one.
  static constexpr int kPitch = D + 8;
  static constexpr bool kQInRegisters = D <= 128;
  static constexpr int kSmemBytes = (kBr + 4 * kBc) * kPitch * 2;  // Q + 2 x (K, V)
};

}  // namespace attnzoo::cuda_prefill
