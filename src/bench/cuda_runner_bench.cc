#include "bench/cuda_runner_bench.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_rwkv7_bench.h"
#include "bench/device_fill.h"
#include "core/error.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/gpt_oss_moe.h"
#include "layers/head_rows.h"

namespace attnzoo::bench {
namespace {

constexpr float kSwigluAlpha = 1.702f, kSwigluLimit = 7.f;  // gpt-oss's

// Each expert's share of n grouped rows: offsets [E + 1] of an even split (the bias rows' boundaries).
std::vector<int32_t> even_offsets(int64_t n, int64_t E) {
  std::vector<int32_t> offsets(size_t(E + 1));
  for (int64_t e = 0; e <= E; ++e) offsets[size_t(e)] = int32_t(e * n / E);
  return offsets;
}

LinearRow gpt_oss_moe_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t n = c["n"], E = c["E"], I = c["I"], N = 2 * I;
    // The gate | up GEMM output [n, 2I] f32 as DeviceMoe holds it. Constants: the work does not depend on the
    // values, and the SwiGLU run in place rep after rep stays finite (the clamp bounds the gate).
    const DeviceBuffer y = f32_buffer(device, size_t(n * N), 0.5f, stream);
    const DeviceBuffer bias = f32_buffer(device, size_t(E * N), 0.25f, stream);
    const std::vector<int32_t> offsets = even_offsets(n, E);
    const DeviceBuffer offsets_d(device, offsets.size() * 4);
    offsets_d.upload(offsets.data(), offsets.size() * 4, stream);
    const bool swiglu = c.kernel == "gpt_oss_swiglu";
    if (!device.is_cuda()) {  // GptOssMoe's experts: the Linear's bias per expert row, the activation per row
      return timer([&] {
        float* ys = y.as<float>();
        for (int64_t e = 0; e < E && !swiglu; ++e)
          for (int64_t r = offsets[size_t(e)]; r < offsets[size_t(e + 1)]; ++r)
            for (int64_t i = 0; i < N; ++i) ys[r * N + i] += bias.as<float>()[e * N + i];
        for (int64_t r = 0; r < n && swiglu; ++r)
          gpt_oss_clamped_swiglu(ys + r * N, ys + r * N + I, kSwigluAlpha, kSwigluLimit, ys + r * N, I);
      });
    }
    const TensorView yv = view_on(y, DType::f32, {n, N}), bv = view_on(bias, DType::f32, {E, N});
    const TensorView ov = view_on(offsets_d, DType::i32, {E + 1});
    TensorView gate = view_on(y, DType::f32, {n, I}), up = gate;
    up.data = y.as<float>() + I;
    gate.strides[0] = up.strides[0] = N;
    if (swiglu) check_gpt_oss_swiglu_cuda(gate, up, kSwigluAlpha, kSwigluLimit, gate);
    else check_grouped_bias_cuda(yv, bv, &ov);
#if ATTNZOO_WITH_CUDA
    if (swiglu) return timer([&] { gpt_oss_swiglu_cuda(gate, up, kSwigluAlpha, kSwigluLimit, gate, stream); });
    return timer([&] { grouped_bias_cuda(yv, bv, &ov, stream); });
#else
    throw DeviceError(c.kernel + ": this build has no CUDA");
#endif
  });
}

LinearRow head_rows_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t N = c["N"], H = c["H"], src_heads = c["src_heads"], cols = c["cols"], width = c["width"];
    // k_nope and v are column slices of kv_b_proj's rows, [nope 128 | v 128] per head; the shared rope key a
    // row of its own. K and V are laid out at the prefill's head dim of 256 ([k_nope | k_pe | 0], [v | 0]).
    const int64_t src_row = src_heads == 1 ? cols : 256, dst_row = 256;
    const DeviceBuffer src = noise_buffer(device, size_t(N * src_heads * src_row) * 2, 95, stream);
    const DeviceBuffer dst(device, size_t(N * H * dst_row) * 2);
    HeadRowCopy copy;
    copy.src = view_on(src, DType::bf16, {N, src_heads, cols});
    copy.src.strides[1] = src_row, copy.src.strides[0] = src_heads * src_row;
    copy.dst = view_on(dst, DType::bf16, {N, H, width});
    copy.dst.strides[1] = dst_row, copy.dst.strides[0] = H * dst_row;
    if (c.kernel == "head_rows_k_rope") copy.dst.data = dst.as<uint16_t>() + 128;  // after k_nope's 128 columns
    copy.rows = N;
    if (!device.is_cuda()) return timer([&] { copy_head_rows(copy); });
    check_head_rows_cuda(copy);
#if ATTNZOO_WITH_CUDA
    return timer([&] { copy_head_rows_cuda(copy, stream); });
#else
    throw DeviceError("copy_head_rows: this build has no CUDA");
#endif
  });
}

LinearRow moe_group_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t T = c["T"], k = c["top_k"], E = c["E"], n = T * k;
    // Each token's k distinct experts, uniform: the load an auxiliary-loss-balanced router aims at.
    std::vector<int32_t> ids(static_cast<size_t>(n)), all(static_cast<size_t>(E));
    std::mt19937 rng(96);
    for (int64_t e = 0; e < E; ++e) all[size_t(e)] = int32_t(e);
    for (int64_t t = 0; t < T; ++t) {
      std::shuffle(all.begin(), all.end(), rng);
      std::copy_n(all.begin(), k, ids.begin() + t * k);
    }
    const DeviceBuffer ids_d(device, size_t(n) * 4), source(device, size_t(n) * 4), dest(device, size_t(n) * 4);
    const DeviceBuffer offsets(device, size_t(E + 1) * 4), tiles(device, size_t(E + 1) * 4);
    ids_d.upload(ids.data(), size_t(n) * 4, stream);
    const cuda_gemm::TileKind tile = moe_tile(n, E);
    const int64_t tile_rows = moe_tile_rows(tile);
    if (!device.is_cuda()) {
      return timer([&] {
        moe_group_host(ids.data(), n, E, tile_rows, offsets.as<int32_t>(), tiles.as<int32_t>(), source.as<int32_t>(),
                       dest.as<int32_t>());
      });
    }
    const int64_t scratch = moe_group_scratch(n, E);
    const DeviceBuffer counts(device, size_t(std::max<int64_t>(scratch, 1)) * 4);
    const MoeGroupingCuda g{view_on(offsets, DType::i32, {E + 1}), view_on(tiles, DType::i32, {E + 1}),
                            view_on(source, DType::i32, {n}), view_on(dest, DType::i32, {n}),
                            scratch > 0 ? view_on(counts, DType::i32, {scratch}) : TensorView{}};
    const TensorView idv = view_on(ids_d, DType::i32, {T, k});
    check_moe_group_cuda(idv, E, tile_rows, g);
#if ATTNZOO_WITH_CUDA
    return timer([&] { moe_group_cuda(idv, E, tile_rows, g, stream); });
#else
    throw DeviceError("moe_group: this build has no CUDA");
#endif
  });
}

}  // namespace

void moe_group_host(const int32_t* ids, int64_t n, int64_t E, int64_t tile_rows, int32_t* offsets, int32_t* tiles,
                    int32_t* source, int32_t* dest) {
  // The CPU MoE's grouping (moe.cc's per-expert lists of entries in order), written out as the kernel's arrays.
  std::fill_n(offsets, E + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++offsets[ids[i] + 1];
  tiles[0] = 0;
  for (int64_t e = 0; e < E; ++e) {
    tiles[e + 1] = tiles[e] + int32_t((offsets[e + 1] + tile_rows - 1) / tile_rows);
    offsets[e + 1] += offsets[e];
  }
  std::vector<int32_t> next(offsets, offsets + E);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = next[size_t(ids[i])]++;
    source[r] = int32_t(i), dest[i] = r;
  }
}

std::vector<LinearCase> gpt_oss_moe_cases(Scale s) {
  const bool tiny = s == Scale::tiny;
  const int64_t n = tiny ? 20 : 4096 * 4, E = tiny ? 3 : 32, I = tiny ? 48 : 2880;
  return {{"grouped_bias", {{"n", n}, {"E", E}, {"I", I}}}, {"gpt_oss_swiglu", {{"n", n}, {"E", E}, {"I", I}}}};
}

std::vector<LinearCase> head_rows_cases(Scale s) {
  const int64_t N = s == Scale::tiny ? 9 : 4096, H = s == Scale::tiny ? 4 : 128;
  return {{"head_rows_k_nope", {{"N", N}, {"H", H}, {"src_heads", H}, {"cols", 128}, {"width", 128}}},
          {"head_rows_k_rope", {{"N", N}, {"H", H}, {"src_heads", 1}, {"cols", 64}, {"width", 128}}},
          {"head_rows_v", {{"N", N}, {"H", H}, {"src_heads", H}, {"cols", 128}, {"width", 256}}}};
}

std::vector<LinearCase> moe_group_cases(Scale s) {
  if (s == Scale::tiny)
    return {{"moe_group", {{"T", 5}, {"top_k", 2}, {"E", 8}}}, {"moe_group", {{"T", 300}, {"top_k", 8}, {"E", 16}}}};
  return {{"moe_group", {{"T", 64}, {"top_k", 8}, {"E", 128}}}, {"moe_group", {{"T", 4096}, {"top_k", 8}, {"E", 128}}}};
}

double gpt_oss_moe_bytes(const LinearCase& c) {
  const double n = double(c["n"]), I = double(c["I"]);
  if (c.kernel == "grouped_bias") return n * 2 * I * 8 + double(c["E"]) * 2 * I * 4;  // y in place, the biases
  return n * I * 12;  // gate and up read, out written
}

double head_rows_bytes(const LinearCase& c) {
  return 2.0 * double(c["N"]) * (double(c["src_heads"] * c["cols"]) + double(c["H"] * c["width"]));
}

double moe_group_bytes(const LinearCase& c) {
  return double(c["T"] * c["top_k"]) * 12 + double(c["E"] + 1) * 8;
}

const std::vector<BandwidthTable>& runner_tables() {
  static const std::vector<BandwidthTable> tables = {
      rwkv7_step_table(),
      {"gpt_oss_moe", "gpt-oss experts' bias and clamped SwiGLU (f32 rows)", gpt_oss_moe_cases, gpt_oss_moe_row,
       gpt_oss_moe_bytes},
      {"head_rows", "MLA head rows (DeepSeek-V3 prefill, bf16)", head_rows_cases, head_rows_row, head_rows_bytes},
      {"moe_group", "MoE grouping by expert (int32 ids)", moe_group_cases, moe_group_row, moe_group_bytes}};
  return tables;
}

}  // namespace attnzoo::bench
