#pragma once
// The CUDA MLA decode's launches, decided on the host: the split of long contexts into chunks, the metadata the
// kernels read (work, merges, block table) and the scratch between the kernels (q_lat, ctx, partial results),
// and the parameters. Plain C++: mla_decode.cu uploads and launches; the kernel emulator runs the same plan
// through the same kernel code.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/softmax/cuda/mla_decode_params.h"
#include "kernels/softmax/mla_problem.h"

namespace attnzoo::cuda_mla {

// Rows below this are not worth a chunk of their own: the merge would cost more than the parallelism gains.
constexpr int64_t kMinChunk = 256;

struct MlaLaunchPlan {
  std::vector<MlaWork> work;     // the attention kernel's grid x
  std::vector<MlaMerge> merges;  // the merge kernel's grid x (empty: no sequence was split)
  int64_t num_slots = 0;
  unsigned head_groups = 0;      // the attention kernel's grid y
  unsigned batch_groups = 0;     // the absorb / expand kernels' grid y
  std::vector<unsigned char> metadata;  // work, merges, block table: the device buffer's head
  size_t device_bytes = 0;
  size_t merges_at = 0, table_at = 0, q_lat_at = 0, ctx_at = 0, part_o_at = 0, part_m_at = 0, part_l_at = 0;
  bool has_table = false;
  bool tensor_cores = false;     // mla_attend_mma (a bf16 / f16 cache of aligned rows) instead of mla_attend
  MlaDecodeParams params{};  // complete except the pointers into the device buffer
};

// Whether the attention runs on tensor cores (mla_decode_mma.cuh): a bf16 / f16 cache with 16-byte aligned rows,
// r a multiple of 64 and dr of 16. Otherwise the scalar mla_attend.
bool mla_uses_tensor_cores(const MlaProblem& p);

// For a problem check_cuda_mla_decode accepted and `slots` attention CTAs resident at once on the GPU; chunks
// are never shorter than `min_chunk` rows (the tests lower it to split short contexts).
MlaLaunchPlan plan_mla_decode_launch(const MlaProblem& p, int64_t slots, int64_t min_chunk = kMinChunk);

// The plan's parameters pointing into `device`, a buffer of plan.device_bytes whose head holds plan.metadata.
MlaDecodeParams bind_device_buffer(const MlaLaunchPlan& plan, unsigned char* device);
// The same over two buffers: `metadata` holding plan.metadata (uploaded once, read by every launch of the plan) and
// `scratch` of plan.device_bytes - plan.metadata.size() bytes (q_lat, ctx, the partial results).
MlaDecodeParams bind_device_buffers(const MlaLaunchPlan& plan, const unsigned char* metadata, unsigned char* scratch);

// What differs between launches of one plan: the tensors' addresses (a model step's MLA layers: the same rows
// over the same blocks, each layer its own weights and latent cache).
struct MlaTensors {
  const void* q = nullptr;
  void* o = nullptr;
  const void* w = nullptr;
  const void* latent = nullptr;
};
MlaTensors mla_tensors(const MlaProblem& p);
MlaDecodeParams with_tensors(MlaDecodeParams params, const MlaTensors& t);

// Whether the expand reads W_UV in 16-byte pieces (expand_kernel<true>): the bound weights' every row starts on a
// 16-byte boundary and r fills whole pieces. Asked at launch, of the params with the tensors bound: the layers
// sharing a plan each bring their own weights.
bool mla_expand_is_wide(const MlaDecodeParams& params);

}  // namespace attnzoo::cuda_mla
