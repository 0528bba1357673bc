#pragma once
// The CUDA chunked gated linear recurrence's launch, decided on the host: the three kernels' parameters, grids,
// shared memory and scratch layout for a validated problem. Plain C++: gla_chunk.cu uploads the metadata,
// allocates the scratch and launches; the kernel emulator (testing/cuda_emulation) runs the same plan through
// the same device code (gla_chunk_{prep,state,output}.cuh). Tiles, chunk descriptors and the MMA helpers are the
// chunked delta rule's (delta_chunk_launch.h, delta_chunk_mma.cuh).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/linear/common/cuda/chunk_plan.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"
#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo::cuda_gla_chunk {

using cuda_delta_chunk::align16;
using cuda_delta_chunk::ChunkDesc;
using cuda_delta_chunk::kMaxDim;
using cuda_delta_chunk::kStateCols;
using cuda_delta_chunk::kThreads;
using cuda_delta_chunk::kWarps;
using cuda_delta_chunk::pitch;
using cuda_linear::Elem;
using cuda_linear::elem_of;

// Mamba-2's SSD on these kernels (mamba2/cuda/mamba2_chunk_launch.h plans it): q = C, k = B, v = x, and the
// step dt' = clamp(softplus?(dt + dt_bias)) formed in the prep, which scales V (v = dt' x) and makes the scalar
// log decay A dt'; the output kernel adds D x and gates by silu(z) as it stores. dt null: not an SSD problem.
struct SsdParams {
  const void *dt, *A, *dt_bias, *D, *z;  // dt [B * T, HV], A [HV], dt_bias [HV], D [HV] or [HV, V], z like o
  Elem dt_t, A_t, dt_bias_t, D_t, z_t;
  bool D_per_channel, dt_softplus, dt_limit;
  float dt_min, dt_max;
};

struct Params {
  const void *q, *k, *v, *g;  // g: null without a data-dependent gate
  void* o;
  Elem q_t, k_t, v_t, g_t, o_t;
  const float* g_gamma;        // [HV] on the device: constant log decay added to a scalar gate; null: none
  const float* initial_state;  // [N, HV, K, V]; null: zeros
  float* final_state;          // [N, HV, K, V]; null: not written; may be initial_state
  // Pool states (ssm_state_indices): sequence n's state is row state_indices[n], state_stride floats apart;
  // a negative row is a pad whose chunks touch nothing. Null: row n of the dense states (stride HV K V).
  const int32_t* state_indices;
  int64_t state_stride;
  // Element (key row r, value column c) of a state sits at r * state_row + c * state_col: (V, 1) for the
  // gated-linear family's [K, V] states, (1, K) for Mamba-2's [P, N] ones (K = N, V = P).
  int64_t state_row, state_col;
  const ChunkDesc* chunks;     // [n_chunks]
  const int32_t* seq_chunks;   // [N + 1]: sequence n owns chunks [seq_chunks[n], seq_chunks[n + 1])
  // Scratch per (chunk, value head); bf16 held as raw bits so this header needs no CUDA.
  // With shared_keys (decays per value head, several value heads per key head: Mamba-2's groups, GQA-style
  // GLA) what depends only on the key head is formed once per (chunk, key head) by the keys kernel and read by
  // every value head of its group: kd holds phi(K) undecayed, the decay to the chunk's end moves onto the values
  // (vscale, which the state pass applies to v as it stages it), qb holds phi(Q) scale in bf16 and scores Q K^T.
  // Without it (GLA's per-channel decays, or one value head per key head) kd is per (chunk, value head) and
  // decayed, and the output kernel forms Q K^T itself.
  bool shared_keys;
  uint16_t* kd;      // [C, Kp]: phi(K) exp(G_last - G), the keys decayed to the chunk's end (shared_keys: phi(K));
                     // rows past it zero
  uint16_t* vb;      // [C, Vp] (without shared_keys): V in bf16, rows past the chunk zero
  float* vscale;     // [C] (shared_keys only): exp(G_last - G) (times dt' for the SSD), each value row's factor to
                     // the chunk's end, zero past the chunk's tokens; the state pass and the output kernel stage
                     // V from the inputs then, and no bf16 copy of it exists
  uint16_t* qb;      // [C, Kp] per (chunk, key head) (shared_keys only): phi(Q) scale, rows past the chunk zero;
                     // the output kernel copies it rather than loading and converting Q again per value head
  float* scores;     // [C, C] per (chunk, key head) (shared_keys only): phi(Q) scale phi(K)^T, the 16 x 16 blocks
                     // on and below the diagonal (the others unwritten)
  float* decay;  // [Kp]: exp(G_last), the state rows' decay across the chunk (1 without a gate)
  uint16_t* h;   // [Kp, Vp]: the state before the chunk
  float* G;      // [B * T, HV] ([B * T, HV, K] for GLA): cumulative log decay within each chunk; null: no decay
  int64_t n_chunks;
  int H, HV, K, V, Kp, Vp, group;  // Kp: K rounded up to 16; Vp: V rounded up to kStateCols
  float scale;
  FeatureMap feature_map;
  bool channel;  // GLA: g [B, T, HV, K], one decay per key channel
  SsdParams ssd;
};

// The prep kernel's G: [C] f32, [C x Kp] for GLA, or G and the steps dt' ([2][C]) for the SSD.
constexpr size_t prep_smem_bytes(int C, int Kp, bool channel, bool ssd) {
  return align16(size_t(C) * (channel ? Kp : ssd ? 2 : 1) * 4);
}

// The keys kernel's Q and K tiles, per (chunk, key head).
constexpr size_t keys_smem_bytes(int C, int Kp) { return align16(2 * size_t(C) * pitch(Kp) * 2); }

// Per (sequence, value head, 32 state columns): Kd, the slice of V and the row decays of two chunks (the next
// one's arrive by cp.async, or with shared_keys its values through registers, while this one is worked on).
struct StateSmem {
  size_t kd, v, decay, bytes;
  constexpr StateSmem(int C, int Kp)
      : kd(0),
        v(align16(kd + 2 * size_t(C) * pitch(Kp) * 2)),
        decay(align16(v + 2 * size_t(C) * pitch(kStateCols) * 2)),
        bytes(align16(decay + 2 * size_t(Kp) * 4)) {}
};

// The output kernel's layout is the delta rule's (Q, K, scores, h, values, G, GLA's sub-chunk tiles).
using OutputSmem = cuda_delta_chunk::OutputSmem;

constexpr int64_t kd_elems(int C, int Kp) { return int64_t(C) * Kp; }
constexpr int64_t v_elems(int C, int Vp) { return int64_t(C) * Vp; }
constexpr int64_t h_elems(int Kp, int Vp) { return int64_t(Kp) * Vp; }

struct ChunkLaunch : cuda_delta_chunk::ChunkPlan {
  Params params{};  // metadata and scratch pointers still null: see bind_scratch()
  std::vector<float> gamma;  // a host g_gamma's HV values, uploaded after the chunk table
  // One-dimensional grids: prep and output (chunk, value head); keys (chunk, key head; 0 without shared_keys);
  // state (sequence, value head, column slice).
  unsigned prep_grid = 0, keys_grid = 0, state_grid = 0, output_grid = 0;
  size_t prep_smem = 0, keys_smem = 0, state_smem = 0, output_smem = 0;
  // Byte offsets in the allocation, after the chunk table; gamma's is the last uploaded.
  size_t gamma_at = 0, kd_at = 0, vb_at = 0, vscale_at = 0, qb_at = 0, scores_at = 0, decay_at = 0, h_at = 0,
         G_at = 0;
};

// For a problem check_cuda_gla_chunk accepts. With `ssd` (Mamba-2, whose caller checks it instead) p.gate is
// scalar with no g: the prep forms the decays from ssd.dt and ssd.A.
ChunkLaunch plan_gla_chunk(const GlaProblem& p, const SsdParams& ssd = {});

// Points the plan's parameters into one device allocation of l.scratch_bytes at `base` (after the caller
// uploads the l.metadata_bytes of metadata_bytes_of(l) to its start).
void bind_scratch(ChunkLaunch& l, unsigned char* base);
std::vector<unsigned char> metadata_bytes_of(const ChunkLaunch& l);

}  // namespace attnzoo::cuda_gla_chunk
