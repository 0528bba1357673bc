#pragma once
// What the emulated RWKV-7 step cases (rwkv7_step_cases.cc, rwkv7_norm_shift_cases.cc) share: host values of an
// operand, NaN-filled outputs, bf16 rounding, and the token shift's ragged batch on pool slots: its metadata in
// emulated device memory (each token's sequence, cu_seqlens, the slots, as the runner uploads them) and the CPU's
// shift deltas over a host copy of the pool.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "layers/batch.h"
#include "layers/rwkv7_state.h"
#include "testing/cuda_emulation/cta.h"
#include "testing/cuda_emulation/strided_operand.h"

namespace attnzoo::cuda_emulation {

inline std::vector<float> values(const StridedOperand& t) {
  std::vector<float> v(size_t(t.view.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.at(int64_t(i));
  return v;
}

inline void fill_nan(StridedOperand& t) {
  t.for_each([&](int64_t off) { t.set(off, NAN); });
  t.upload();
}

inline float bf16_round(float v) {
  uint16_t b;
  store_from_f32(&b, DType::bf16, 0, v);
  return load_as_f32(&b, DType::bf16, 0);
}

// A ragged batch of `lens` sequences at pool slots `slots` (-1: a pad).
struct ShiftBatch {
  Batch batch;
  std::vector<int32_t> slots;
  int64_t T = 0, S = 0, pool_rows = 0;  // tokens, sequences, pool rows up to the highest slot
  DeviceMemory meta;
  const int32_t *seq_of = nullptr, *cu = nullptr, *slots_d = nullptr;  // in `meta`

  ShiftBatch(const std::vector<int32_t>& lens, const std::vector<int32_t>& pool_slots)
      : slots(pool_slots), meta(bytes(lens, pool_slots)) {
    for (int32_t n : lens) batch.cu_seqlens.push_back(batch.cu_seqlens.back() + n);
    T = batch.cu_seqlens.back(), S = int64_t(lens.size());
    batch.tokens.assign(size_t(T), 0);
    batch.state_slots = slots;
    for (int32_t s : slots) pool_rows = std::max<int64_t>(pool_rows, s + 1);
    auto* p = reinterpret_cast<int32_t*>(meta.data());
    seq_of = p;
    for (int64_t s = 0; s < S; ++s) p = std::fill_n(p, lens[size_t(s)], int32_t(s));
    cu = p, p = std::copy(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), p);
    slots_d = p, std::copy(slots.begin(), slots.end(), p);
  }

  // The CPU's shift deltas of rows `x` [T, C], the shift rows `stride` floats apart at `offset` in `pool`, which
  // they advance; a pad shifts in zeros of its own and leaves the pool alone.
  std::vector<float> deltas(const float* x, int64_t C, std::vector<float>& pool, int64_t stride,
                            int64_t offset) const {
    std::vector<float> delta(size_t(T * C));
    std::vector<std::vector<float>> pad_rows(size_t(S), std::vector<float>(size_t(C), 0.f));
    rwkv7_token_shift(x, batch, C, [&](int64_t s) {
      return slots[size_t(s)] < 0 ? pad_rows[size_t(s)].data() : pool.data() + slots[size_t(s)] * stride + offset;
    }, delta.data());
    return delta;
  }

 private:
  static size_t bytes(const std::vector<int32_t>& lens, const std::vector<int32_t>& slots) {
    int64_t T = 0;
    for (int32_t n : lens) T += n;
    return size_t(T + int64_t(lens.size()) + 1 + int64_t(slots.size())) * sizeof(int32_t);
  }
};

}  // namespace attnzoo::cuda_emulation
