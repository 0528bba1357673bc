#include "kernels/linear/common/cuda/chunk_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/linear/common/cuda/delta_chunk_launch.h"

namespace attnzoo::cuda_delta_chunk {
namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

int64_t chunk_count(const SequenceSpans& seqs, int64_t chunk_size) {
  int64_t n = 0;
  for (int64_t len : seqs.length) n += (len + chunk_size - 1) / chunk_size;
  return n;
}

void check_chunk_shape(int64_t K, const char* key_arg, const char* key_dim, int64_t V, const char* value_arg,
                       const char* value_dim, int64_t chunk_size) {
  require(K <= kMaxDim, key_arg, [&] {
    return std::string(key_dim) + "=" + str(K) + " exceeds " + str(kMaxDim) +
           ", the widest keys the CUDA chunked kernels stage";
  });
  require(V <= kMaxDim, value_arg, [&] {
    return std::string(value_dim) + "=" + str(V) + " exceeds " + str(kMaxDim) +
           ", the widest values the CUDA chunked kernels stage";
  });
  require(chunk_size <= 64, "chunk_size", [&] {
    return "the CUDA chunked kernels run chunks of 16, 32 or 64 tokens, got " + str(chunk_size);
  });
}

bool ChunkPlan::split(const SequenceSpans& seqs, int64_t tokens, bool writes_state, int64_t chunk_size) {
  const int64_t N = seqs.count();
  if (N == 0 || (tokens == 0 && !writes_state)) return false;
  empty = false;
  C = int(chunk_size);
  seq_chunks.reserve(size_t(N) + 1);
  for (int64_t n = 0; n < N; ++n) {
    seq_chunks.push_back(int32_t(chunks.size()));
    const int64_t begin = seqs.begin[size_t(n)], len = seqs.length[size_t(n)];
    for (int64_t t0 = 0; t0 < len; t0 += C)
      chunks.push_back({begin + t0, int32_t(n), int32_t(std::min<int64_t>(C, len - t0))});
  }
  seq_chunks.push_back(int32_t(chunks.size()));
  return true;
}

void ChunkPlan::take_table(ScratchLayout& at) {
  chunks_at = at.take(chunks.size() * sizeof(ChunkDesc));
  seq_chunks_at = at.take(seq_chunks.size() * sizeof(int32_t));
}

std::vector<unsigned char> ChunkPlan::table_bytes() const {
  std::vector<unsigned char> bytes(metadata_bytes, 0);
  if (!chunks.empty()) std::memcpy(bytes.data() + chunks_at, chunks.data(), chunks.size() * sizeof(ChunkDesc));
  std::memcpy(bytes.data() + seq_chunks_at, seq_chunks.data(), seq_chunks.size() * sizeof(int32_t));
  return bytes;
}

}  // namespace attnzoo::cuda_delta_chunk
