// write_kv_paged / write_paged_rows against a scalar element-by-element scatter (store_from_f32 rounding),
// for every cache dtype, both the whole-token and the per-head copy, skipped (negative) slots, and the checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "core/device.h"
#include "core/error.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/kv_write.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {
using testing::HostTensor;

// Slots for T tokens: distinct, shuffled over the whole cache, every 5th token skipped (-1).
std::vector<int64_t> shuffled_slots(int64_t T, int64_t num_slots, uint64_t seed) {
  std::vector<int64_t> all(static_cast<size_t>(num_slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  all.resize(size_t(T));
  for (int64_t t = 4; t < T; t += 5) all[size_t(t)] = -1;
  return all;
}

// Expected cache: a copy of `cache` with each written row stored element by element.
void expect_scattered(const HostTensor& rows, const std::vector<int64_t>& slots, const HostTensor& before,
                      const TensorView& cache) {
  const int64_t T = rows.view.shape[0], H = rows.view.shape[1], D = rows.view.shape[2];
  const int64_t bs = cache.shape[1];
  HostTensor want(cache.dtype, {before.numel()}, 0, 0.f);
  want.bytes = before.bytes;
  want.view.data = want.bytes.data();
  for (int64_t t = 0; t < T; ++t) {
    if (slots[size_t(t)] < 0) continue;
    const int64_t base = (slots[size_t(t)] / bs) * cache.strides[0] + (slots[size_t(t)] % bs) * cache.strides[1];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        store_from_f32(want.view.data, cache.dtype, base + h * cache.strides[2] + d, rows.at((t * H + h) * D + d));
  }
  int64_t mismatches = 0;
  for (int64_t i = 0; i < before.numel(); ++i)
    mismatches += load_as_f32(cache.data, cache.dtype, i) != want.at(i);
  EXPECT_EQ(mismatches, 0) << dtype_name(cache.dtype);
}

TEST(WriteKvPaged, EveryCacheDtype) {
  const int64_t T = 200, Hkv = 3, D = 40, Dv = 24, num_blocks = 20, bs = 16;
  for (DType cache_dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (DType new_dtype : {DType::f32, DType::bf16}) {
      HostTensor k_new(new_dtype, {T, Hkv, D}, 1), v_new(new_dtype, {T, Hkv, Dv}, 2);
      HostTensor k_cache(cache_dtype, {num_blocks, bs, Hkv, D}, 3), v_cache(cache_dtype, {num_blocks, bs, Hkv, Dv}, 4);
      const HostTensor k_before = k_cache, v_before = v_cache;
      const std::vector<int64_t> slots = shuffled_slots(T, num_blocks * bs, 5);
      write_kv_paged(k_new.view, v_new.view, slots.data(), k_cache.view, v_cache.view);
      expect_scattered(k_new, slots, k_before, k_cache.view);
      expect_scattered(v_new, slots, v_before, v_cache.view);
    }
  }
}

TEST(WriteKvPaged, PerHeadRowsAndOddBlocks) {
  // The cache's heads are not back to back (a wider padded row viewed narrower): one copy per head.
  const int64_t T = 50, H = 2, D = 16, Dpad = 20, num_blocks = 9, bs = 7;
  HostTensor rows(DType::f32, {T, H, D}, 1);
  HostTensor storage(DType::bf16, {num_blocks, bs, H, Dpad}, 2);
  TensorView cache = storage.view;
  cache.shape[3] = D;
  const std::vector<int64_t> slots = shuffled_slots(T, num_blocks * bs, 3);
  const HostTensor before = storage;
  write_paged_rows(rows.view, slots.data(), cache, "k_new", "k_cache");
  expect_scattered(rows, slots, before, cache);
}

TEST(WriteKvPaged, LatentRowsWithoutHeadAxis) {
  const int64_t T = 30, L = 72, num_blocks = 6, bs = 48;
  HostTensor rows(DType::f32, {T, L}, 1), cache(DType::bf16, {num_blocks, bs, L}, 0, 0.f);
  std::vector<int64_t> slots = shuffled_slots(T, num_blocks * bs, 2);
  write_paged_rows(rows.view, slots.data(), cache.view);
  for (int64_t t = 0; t < T; ++t) {
    if (slots[size_t(t)] < 0) continue;
    for (int64_t d = 0; d < L; ++d) {
      HostTensor one(DType::bf16, {1}, 0, 0.f);
      store_from_f32(one.view.data, DType::bf16, 0, rows.at(t * L + d));
      ASSERT_EQ(cache.at(slots[size_t(t)] * L + d), one.at(0));
    }
  }
}

TEST(WriteKvPaged, BadArgumentsWriteNothing) {
  const int64_t T = 4, num_blocks = 2, bs = 4;
  HostTensor k_new(DType::f32, {T, 2, 8}, 1), v_new(DType::f32, {T, 2, 8}, 2);
  HostTensor k_cache(DType::bf16, {num_blocks, bs, 2, 8}, 0, 0.f), v_cache(DType::bf16, {num_blocks, bs, 2, 8}, 0, 0.f);
  std::vector<int64_t> slots = {0, 3, 8, 1};  // slot 8 is past the 8 slots
  testing::expect_error<ArgumentError>([&] { write_kv_paged(k_new.view, v_new.view, slots.data(), k_cache.view, v_cache.view); },
                              "slot_mapping: entry 2 = 8 is past the cache's 8 slots");
  for (int64_t i = 0; i < k_cache.numel(); ++i) ASSERT_EQ(k_cache.at(i), 0.f);
  slots[2] = 5;
  HostTensor v_wide(DType::f32, {T, 2, 9}, 2);
  testing::expect_error<ArgumentError>([&] { write_kv_paged(k_new.view, v_wide.view, slots.data(), k_cache.view, v_cache.view); },
                              "v_cache: shape");
  for (int64_t i = 0; i < k_cache.numel(); ++i) ASSERT_EQ(k_cache.at(i), 0.f);
  HostTensor v_f16(DType::f16, {num_blocks, bs, 2, 8}, 0, 0.f);
  testing::expect_error<ArgumentError>([&] { write_kv_paged(k_new.view, v_new.view, slots.data(), k_cache.view, v_f16.view); },
                              "v_cache: dtype float16");
  HostTensor ints(DType::i32, {T, 2, 8}, 0, 0.f);
  EXPECT_THROW(write_kv_paged(ints.view, v_new.view, slots.data(), k_cache.view, v_cache.view), DTypeError);
  testing::expect_error<ArgumentError>([&] { write_kv_paged(k_new.view, v_new.view, nullptr, k_cache.view, v_cache.view); },
                              "slot_mapping");
}

// The CUDA scatter's host-side refusals (kernels/softmax/cuda/kv_write_cuda.h), in every build: the views below
// claim device memory but are never read.
TEST(WriteKvPagedCuda, RefusesNamingTheArgument) {
  HostTensor k_new(DType::bf16, {3, 2, 8}, 1), v_new(DType::bf16, {3, 2, 8}, 2);
  HostTensor k_cache(DType::i8, {2, 4, 2, 8}, 0, 0.f), v_cache(DType::i8, {2, 4, 2, 8}, 0, 0.f);
  HostTensor k_scale(DType::f32, {2, 4, 2}, 0, 0.f), v_scale(DType::f32, {2, 4, 2}, 0, 0.f);
  auto on_gpu = [](TensorView t, Device d = Device::cuda()) {
    t.device = d;
    return t;
  };
  const PagedRowsCuda ok{on_gpu(k_new.view), on_gpu(k_cache.view), on_gpu(k_scale.view), "k_new", "k_cache", "k_scale"};
  EXPECT_NO_THROW(check_paged_rows_cuda(ok));
  PagedRowsCuda bad = ok;
  bad.rows = k_new.view;
  testing::expect_error<ArgumentError>([&] { check_paged_rows_cuda(bad); },
                                       "k_new: lives on cpu; the CUDA KV write needs device memory");
  bad = ok;
  bad.cache = on_gpu(k_cache.view, Device::cuda(1));
  testing::expect_error<ArgumentError>([&] { check_paged_rows_cuda(bad); },
                                       "k_cache: lives on cuda:1, the other operands on cuda:0");
  bad = ok;
  bad.scale = k_scale.view;
  testing::expect_error<ArgumentError>([&] { check_paged_rows_cuda(bad); }, "k_scale: lives on cpu");
  bad = ok;
  bad.scale = {};
  testing::expect_error<ArgumentError>([&] { check_paged_rows_cuda(bad); }, "k_scale: is required");
  bad = ok;
  HostTensor wide(DType::i8, {2, 4, 2, 9}, 0, 0.f);
  bad.cache = on_gpu(wide.view);
  testing::expect_error<ArgumentError>([&] { check_paged_rows_cuda(bad); }, "k_cache: shape");
  HostTensor ints(DType::i32, {2, 4, 2, 8}, 0, 0.f);
  bad.cache = on_gpu(ints.view);
  testing::expect_error<DTypeError>([&] { check_paged_rows_cuda(bad); }, "k_cache: expected float32");
  bad = ok;
  bad.rows = on_gpu(ints.view);
  testing::expect_error<DTypeError>([&] { check_paged_rows_cuda(bad); }, "k_new");

  // The entries branch to the device for device tensors and refuse there by the same names.
  const int64_t slots[3] = {0, 5, -1};
  testing::expect_error<ArgumentError>(
      [&] {
        write_kv_paged(on_gpu(k_new.view), v_new.view, slots, on_gpu(k_cache.view), on_gpu(v_cache.view),
                       on_gpu(k_scale.view), on_gpu(v_scale.view));
      },
      "v_new: lives on cpu");
  testing::expect_error<ArgumentError>(
      [&] {
        write_kv_paged(on_gpu(k_new.view), on_gpu(v_new.view), nullptr, on_gpu(k_cache.view), on_gpu(v_cache.view),
                       on_gpu(k_scale.view), on_gpu(v_scale.view));
      },
      "slot_mapping: is required");
  testing::expect_error<ArgumentError>(
      [&] { write_paged_rows(on_gpu(k_new.view), slots, k_cache.view, "kv", "kv_cache", k_scale.view, "kv_scale"); },
      "kv_cache: lives on cpu");
  if (cuda_device_count() > 0) return;  // the fake device pointers below would be read by a real GPU
  EXPECT_THROW(write_kv_paged(on_gpu(k_new.view), on_gpu(v_new.view), slots, on_gpu(k_cache.view),
                              on_gpu(v_cache.view), on_gpu(k_scale.view), on_gpu(v_scale.view)),
               DeviceError);
}

}  // namespace
}  // namespace attnzoo
