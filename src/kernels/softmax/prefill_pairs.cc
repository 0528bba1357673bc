#include "kernels/softmax/prefill_pairs.h"

#include <algorithm>
#include <cstring>

#include "core/threads.h"
#include "kernels/common/bf16_dot.h"

namespace attnzoo {
namespace {

// One tile: the keys' rows gathered into `rows` ([block_k][D2] pairs, zero past the sequence and past D), then
// transposed into K^T pairs in 16 x 16 register blocks; V rows two by two into pairs along keys.
void pack_tile(const AttentionProblem& p, const SeqSpan& seq, int64_t kv_head, int64_t k0, int64_t block_k,
               int64_t dv_padded, uint32_t* rows, uint32_t* kt, uint32_t* vp) {
  const int64_t D = p.D, Dv = p.Dv, D2 = (D + 1) / 2, cols = std::min(block_k, seq.Tk - k0);
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + kv_head * p.ks.head;
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + kv_head * p.vs.head;
  std::memset(rows, 0, size_t(block_k * D2) * sizeof(uint32_t));
  for (int64_t j = 0; j < cols; ++j) std::memcpy(rows + j * D2, k + p.k_row(seq, k0 + j), size_t(D) * 2);
  transpose_pairs(rows, size_t(D2), size_t(block_k), size_t(D2), kt, size_t(block_k));
  for (int64_t jj = 0; jj < block_k / 2; ++jj) {
    const int64_t j0 = k0 + 2 * jj, j1 = j0 + 1;
    uint32_t* dst = vp + jj * dv_padded;
    if (j0 - k0 >= cols) {
      std::fill(dst, dst + dv_padded, 0u);
      continue;
    }
    const uint16_t* v0 = v + p.v_row(seq, j0);
    const uint16_t* v1 = j1 - k0 < cols ? v + p.v_row(seq, j1) : nullptr;
    if (v1) {
      for (int64_t d = 0; d < Dv; ++d) dst[d] = uint32_t(v0[d]) | uint32_t(v1[d]) << 16;
    } else {
      for (int64_t d = 0; d < Dv; ++d) dst[d] = v0[d];
    }
    std::fill(dst + Dv, dst + dv_padded, 0u);
  }
}

}  // namespace

PackedKeyValues::PackedKeyValues(const AttentionProblem& p, int64_t block_k, int64_t dv_padded) {
  const int64_t D2 = (p.D + 1) / 2;
  key_size_ = D2 * block_k;
  tile_size_ = key_size_ + block_k / 2 * dv_padded;
  const MaskGeometry mask = mask_geometry(p.opts);
  int64_t total = 0;
  for (const SeqSpan& s : p.seqs) {
    // Every query of the sequence together (bottom-right aligned, as the tasks walk them).
    const int64_t offset = s.Tk - s.Tq;
    const KeyRange r = visible_key_range(mask, offset, offset + s.Tq - 1, s.Tk, block_k);
    const int64_t begin = r.begin / block_k, end = (r.end + block_k - 1) / block_k;
    tile_begin_.push_back(begin);
    seq_begin_.push_back(total);
    seq_size_.push_back((end - begin) * tile_size_);
    total += seq_size_.back() * p.Hkv;
  }
  data_.resize(size_t(std::max<int64_t>(total, 1)));
  const int64_t units = int64_t(p.seqs.size()) * p.Hkv;
  ThreadPool::global().parallel_for(units, [&](int64_t u, int) {
    thread_local AlignedBuffer<uint32_t> rows;
    rows.resize(size_t(block_k * D2));
    const int64_t s = u / p.Hkv, h = u % p.Hkv;
    const SeqSpan& seq = p.seqs[size_t(s)];
    uint32_t* tile = data_.data() + first_tile(s, h);
    for (int64_t t = first_packed_tile(s); t < end_packed_tile(s); ++t, tile += tile_size_)
      pack_tile(p, seq, h, t * block_k, block_k, dv_padded, rows.data(), tile, tile + key_size_);
  });
}

}  // namespace attnzoo
