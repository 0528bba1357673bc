#pragma once
// The CUDA decode's launches, decided on the host: the split-KV plan (FlashInfer's rule: the shortest chunks
// that still fit every CTA into one wave of the GPU's resident slots), the bytes of metadata the kernels read,
// the workspace of split sequences' partial results, and the parameters. Plain C++: decode.cu uploads and
// launches; the kernel emulator (testing/cuda_emulation) runs the same plan through the same kernel code.
#include <cstddef>
#include <vector>

#include "kernels/softmax/cuda/decode_params.h"
#include "kernels/softmax/decode_problem.h"

namespace attnzoo::cuda_decode {

struct DecodeLaunchPlan {
  std::vector<WorkItem> work;      // the chunk kernel's grid x, longest chunks first
  std::vector<MergeItem> merges;   // the merge kernel's grid x (empty: no sequence was split)
  int64_t num_slots = 0;           // partial results, one per chunk of a split sequence
  unsigned row_groups = 0;         // the chunk kernel's grid y; the merge kernel's is params.rows
  std::vector<unsigned char> metadata;  // work, merges, block table, sinks, slopes: the device buffer's head
  size_t device_bytes = 0;              // metadata, then the partial results
  size_t merges_at = 0, table_at = 0, sinks_at = 0, slopes_at = 0, part_m_at = 0, part_l_at = 0, part_o_at = 0;
  bool has_table = false, has_sinks = false, has_slopes = false;
  DecodeParams params{};  // complete except the pointers into the device buffer
};

// For a problem check_cuda_decode accepted, a kernel of `tile` keys and `rows_per_cta` query rows, and `slots`
// CTAs resident at once on the whole GPU. B == 0: nothing to launch (empty work).
DecodeLaunchPlan plan_decode_launch(const DecodeProblem& p, int64_t tile, int64_t rows_per_cta, int64_t slots);

// The plan's parameters pointing into `device`, a buffer of plan.device_bytes whose head holds plan.metadata.
DecodeParams bind_device_buffer(const DecodeLaunchPlan& plan, unsigned char* device);
// The same with the partial results in a buffer of their own (plan.device_bytes - plan.metadata.size() bytes), so
// that the metadata can travel inside a larger upload (a model step's one copy) and the partials stay on the device.
DecodeParams bind_device_buffers(const DecodeLaunchPlan& plan, unsigned char* metadata, unsigned char* partials);

// The addresses in which the attention layers of one model step differ. Everything else a plan holds (sequences,
// lengths, block table, heads, options, strides) is the same for every layer of one block group, so one plan and
// its uploaded metadata serve them all, each launch rebinding only these.
struct DecodeTensors {
  const void* q = nullptr;
  void* o = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* k_scale = nullptr;  // null unless the cache is int8 / e4m3
  const float* v_scale = nullptr;
};
DecodeTensors decode_tensors(const DecodeProblem& p);
DecodeParams with_tensors(DecodeParams params, const DecodeTensors& t);

}  // namespace attnzoo::cuda_decode
