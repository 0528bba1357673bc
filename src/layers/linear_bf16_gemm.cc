// Prefill projections with bf16 products (matmul_precision.h: "medium", or "auto" for block-quantized and
// bf16-stored weights): y = x W^T on AMX tiles (amx_gemm, linear_amx_gemm.h) where the CPU has them, else on
// AVX-512-BF16 (vdpbf16ps) tiles as follows.
// x is rounded to bf16 pairs once per call (prepare_bf16_activations; or once for several projections of the same x,
// Linear::forward_shared). Few rows (few_rows): W is the A operand as it lies. Otherwise each
// task takes a panel of W's rows, transposes it into the
// [K/2][N] pair layout the tile kernel multiplies against (with gathers: see transpose_pairs), and multiplies it
// block by block: kKc pairs of the
// reduction (the B block, kKc x panel x 4 bytes, stays in L2; a 64-column strip of it in L1) times kMc
// activation rows (the A block stays in L2).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/aligned_buffer.h"
#include "core/amx.h"
#include "core/dispatch.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/common/bf16_dot.h"
#include "kernels/quant/row_group_pairs.h"
#include "kernels/quant/row_groups.h"
#include "layers/linear.h"
#include "layers/linear_amx_gemm.h"
#include "layers/linear_bf16_pairs_route.h"

namespace attnzoo {
namespace {

constexpr size_t kKc = 128;  // reduction pairs per block
constexpr size_t kMc = 192;  // activation rows per block (a multiple of the tile kernel's 6)

// The activations as bf16 pairs and their transpose (prepare_bf16_activations), held per calling thread and grown
// once: allocated fresh per call, each projection of a prefill faulted its megabytes of new pages in (perf,
// 512-token Qwen3-0.6B prefill, one thread: ~2% of the time in the kernel's page-fault path, under the
// transposes). Tasks on other threads reach them through the pointer returned, never by name (a thread_local
// named in a task is that worker's own).
enum class Scratch { pairs, transposed };
uint32_t* caller_scratch(Scratch which, size_t n) {
  thread_local AlignedBuffer<uint32_t> buffers[2];
  AlignedBuffer<uint32_t>& b = buffers[int(which)];
  b.resize(n);
  return b.data();
}

// One row of W as bf16 pairs (f32 rounded; f16 and block formats widened to f32 first); the last pair's high
// half is zero when K is odd.
void row_pairs(const QuantMatrix& w, int64_t row, size_t K, uint32_t* out) {
  if (w.type == QuantType::BF16 && K % 2 == 0) {  // already pairs (element 2i the low half of pair i)
    std::memcpy(out, w.row(row), K * 2);
    return;
  }
  if (w.type == QuantType::BF16) {
    const uint16_t* r = reinterpret_cast<const uint16_t*>(w.row(row));
    for (size_t i = 0; i < (K + 1) / 2; ++i)
      out[i] = uint32_t(r[2 * i]) | (2 * i + 1 < K ? uint32_t(r[2 * i + 1]) << 16 : 0u);
    return;
  }
  if (w.type == QuantType::F32) {
    pack_f32_to_bf16_pairs(reinterpret_cast<const float*>(w.row(row)), K, out);
    return;
  }
  thread_local AlignedBuffer<float> widened;  // GGUF rows: regrouped ones go through rows_pairs
  widened.resize(K);
  dequantize_row(w.type, w.row(row), widened.data(), int64_t(K));
  pack_f32_to_bf16_pairs(widened.data(), K, out);
}

std::atomic<uint64_t> g_amx_gemms{0}, g_dot_gemms{0}, g_amx_staged{0}, g_prepared{0}, g_straight_pairs{0};
std::atomic<bool> g_straight_allowed{true};

// Rows n0 .. n0 + nb of W as bf16 pairs, `stride` pairs apart. Regrouped block rows go straight to pairs where
// row_group_pairs takes them; the others (ranges off runs of four) are dequantized in place four at a time
// (dequantize_rows decodes runs of four rows from the group's slices), whose f32 stays in L1 for the packing; 16
// at a time (192 KiB at K = 3072) measured slower for the Q4_K file's short prefill on AMX.
void rows_pairs(const QuantMatrix& w, size_t n0, size_t nb, uint32_t* out, size_t stride) {
  const size_t K = size_t(w.cols);
  if (!w.row_group) {
    for (size_t r = 0; r < nb; ++r) row_pairs(w, int64_t(n0 + r), K, out + r * stride);
    return;
  }
  // Straight into pairs where the format allows (row_group_pairs.h): the f32 route below stores, reloads and packs
  // every weight, about twice the time for Q4_0 / Q4_K (docs/benchmarks/cpu-classes.md, Intel).
  if (g_straight_allowed.load(std::memory_order_relaxed) && row_group_pairs(w, int64_t(n0), int64_t(nb), out, stride)) {
    g_straight_pairs.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  constexpr size_t kChunk = 4;
  thread_local AlignedBuffer<float> widened;
  widened.resize(kChunk * K);
  for (size_t r = 0; r < nb;) {
    const size_t rows = std::min(kChunk - (n0 + r) % kChunk, nb - r);
    dequantize_rows(w, int64_t(n0 + r), int64_t(rows), widened.data());
    for (size_t i = 0; i < rows; ++i) pack_f32_to_bf16_pairs(widened.data() + i * K, K, out + (r + i) * stride);
    r += rows;
  }
}

// Rows n0 .. n0 + nb of W as bf16 pairs [nb][K2]: bf16 rows of even length already are pairs (little-endian:
// element 2i is the low half of pair i) and are read in place; others are converted into `pairs`.
const uint32_t* panel_pairs(const QuantMatrix& w, size_t n0, size_t nb, AlignedBuffer<uint32_t>& pairs) {
  const size_t K = size_t(w.cols), K2 = (K + 1) / 2;
  if (w.type == QuantType::BF16 && K % 2 == 0) return reinterpret_cast<const uint32_t*>(w.row(int64_t(n0)));
  pairs.resize(nb * K2);
  rows_pairs(w, n0, nb, pairs.data(), K2);
  return pairs.data();
}

// Up to this many activation rows (a batch of decodes, a short chunk) the roles swap: W's rows are the A
// operand, read as they lie, and the activations, transposed, the small B operand. Transposing W instead cost as
// much as the product itself at 32 rows (perf on a 32-client serve). Same pair products in the same order.
constexpr int64_t kFewRows = 64;

void few_rows(const QuantMatrix& w, const float* bias, const uint32_t* xt, int64_t T, float* y, int64_t ldy,
              int64_t panel, int64_t tasks) {
  const size_t N = size_t(w.rows), K2 = (size_t(w.cols) + 1) / 2, Tp = (size_t(T) + 15) / 16 * 16;
  ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
    const size_t n0 = size_t(task * panel), nb = std::min(N, n0 + size_t(panel)) - n0;
    thread_local AlignedBuffer<uint32_t> pairs;
    thread_local AlignedBuffer<float> ct;  // [nb][Tp]: y's panel transposed
    const uint32_t* src = panel_pairs(w, n0, nb, pairs);
    ct.resize(nb * Tp);
    for (size_t r = 0; r < nb; ++r) std::fill_n(ct.data() + r * Tp, Tp, bias ? bias[n0 + r] : 0.f);
    for (size_t k0 = 0; k0 < K2; k0 += kKc)
      bf16_pair_gemm(nb, Tp, std::min(kKc, K2 - k0), src + k0, K2, xt + k0 * Tp, Tp, ct.data(), Tp,
                     /*accumulate=*/true);
    for (int64_t t = 0; t < T; ++t) {
      float* yt = y + t * ldy + int64_t(n0);
      for (size_t r = 0; r < nb; ++r) yt[r] = ct[r * Tp + size_t(t)];
    }
  });
}

// Bytes of converted W pairs per AMX chunk (amx_gemm): with a block of activations (~512 KiB) well inside L2.
constexpr size_t kStagedChunkBytes = size_t(256) << 10;

// On AMX tiles: the orientation of few_rows for every T (W in place as A), C kept in the tiles over the whole
// reduction (linear_amx_gemm.h). The activations are cut into blocks of ~512 KiB of transposed pairs, so a block
// stays in L2 while a panel's rows stream past it (at T=512, K=2048 the whole of them is the size of L2).
void amx_gemm(const QuantMatrix& w, const float* bias, const uint32_t* xt, int64_t T, float* y, int64_t ldy,
              int64_t panel, int64_t tasks) {
  const size_t N = size_t(w.rows), K = size_t(w.cols), K2 = (K + 1) / 2, K2p = amx_padded_pairs(K2);
  const size_t group_pairs = K2p * kAmxTokenGroup;
  const size_t block_tokens = std::max<size_t>(1, (size_t(512) << 10) / (group_pairs * 4)) * kAmxTokenGroup;
  // bf16 rows whose pairs fill whole 16-pair steps are read where they lie if they start on a cache line; others
  // are converted, zero-padded, into a panel of aligned rows. A tile row is 64 bytes: off a line it straddles two,
  // and the A loads pull twice the lines (safetensors places tensors at 8-byte offsets, so a checkpoint's
  // projections are usually off: the random Qwen3 file's by 24 bytes). Measured on Emerald Rapids, one thread,
  // rows 24 bytes off: copying them made the GEMM 7-26% faster at T=512 and 10-18% at T=256, while at T=128 the
  // copy cost as much as it saved or more (0.83-1.05x), so shorter prompts read them in place. A Linear's weights
  // never come here off a line: it copies such rows onto lines once at load (linear.cc, aligned_copy_pays).
  constexpr int64_t kRealignMinTokens = 256;
  const bool aligned = reinterpret_cast<uintptr_t>(w.data) % 64 == 0 && w.row_bytes % 64 == 0;
  const bool in_place =
      w.type == QuantType::BF16 && K2 == K2p && K % 2 == 0 && (aligned || T < kRealignMinTokens);
  if (!in_place) g_amx_staged.fetch_add(1, std::memory_order_relaxed);
  // Staged rows of a prompt whose activations are one block are converted a chunk at a time and multiplied while
  // the chunk is in L2: a whole panel's pairs (1-1.5 MiB for the Qwen3-0.6B shapes on one thread) beside the
  // activations left L2 before the tiles read them. Chunks of whole 32-row blocks, so each block's products are the
  // ones a whole panel gave. Longer prompts keep whole panels: each chunk would read every activation block again.
  const bool chunked = !in_place && size_t(T) <= block_tokens;
  const size_t chunk = chunked ? std::max<size_t>(32, kStagedChunkBytes / (K2p * 4) / 32 * 32) : size_t(panel);
  ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
    const size_t n0 = size_t(task * panel), nb = std::min(N, n0 + size_t(panel)) - n0;
    thread_local AlignedBuffer<uint32_t> pairs;
    for (size_t c0 = 0; c0 < nb; c0 += chunk) {
      const size_t cb = std::min(chunk, nb - c0);
      const uint32_t* src = in_place ? reinterpret_cast<const uint32_t*>(w.row(int64_t(n0 + c0))) : nullptr;
      if (!in_place) {
        pairs.resize(cb * K2p);
        rows_pairs(w, n0 + c0, cb, pairs.data(), K2p);
        for (size_t r = 0; r < cb; ++r) std::fill(pairs.data() + r * K2p + K2, pairs.data() + (r + 1) * K2p, 0u);
        src = pairs.data();
      }
      for (size_t t0 = 0; t0 < size_t(T); t0 += block_tokens)
        amx_linear_rows(src, K2p, cb, K2p, xt + t0 / kAmxTokenGroup * group_pairs,
                        std::min(block_tokens, size_t(T) - t0), bias ? bias + n0 + c0 : nullptr,
                        y + t0 * size_t(ldy) + n0 + c0, size_t(ldy));
    }
  });
}

}  // namespace

LinearBf16GemmCounts linear_bf16_gemm_counts() {
  return {g_amx_gemms.load(), g_dot_gemms.load(), g_amx_staged.load(), g_prepared.load(), g_straight_pairs.load()};
}

void linear_bf16_allow_straight_pairs(bool allow) { g_straight_allowed.store(allow, std::memory_order_relaxed); }
bool linear_bf16_straight_pairs_allowed() { return g_straight_allowed.load(std::memory_order_relaxed); }

void linear_bf16_weight_pairs(const QuantMatrix& w, int64_t n0, int64_t nb, uint32_t* out, size_t stride) {
  require(n0 >= 0 && nb >= 0 && n0 + nb <= w.rows, "rows", [&] {
    return "[" + std::to_string(n0) + ", " + std::to_string(n0 + nb) + ") is not within the matrix's " +
           std::to_string(w.rows) + " rows";
  });
  require(stride >= (size_t(w.cols) + 1) / 2, "stride", "shorter than a row's pairs");
  rows_pairs(w, size_t(n0), size_t(nb), out, stride);
}

Bf16Activations prepare_bf16_activations(const float* x, int64_t T, int64_t K) {
  g_prepared.fetch_add(1, std::memory_order_relaxed);
  const size_t K2 = (size_t(K) + 1) / 2;
  uint32_t* const a = caller_scratch(Scratch::pairs, size_t(T) * K2);
  const int64_t rows_per_task = 64;
  ThreadPool::global().parallel_for((T + rows_per_task - 1) / rows_per_task, [&](int64_t task, int) {
    for (int64_t t = task * rows_per_task; t < std::min(T, (task + 1) * rows_per_task); ++t)
      pack_f32_to_bf16_pairs(x + t * K, size_t(K), a + size_t(t) * K2);
  });
  Bf16Activations prepared{a, nullptr, T, K, amx_bf16_enabled()};
  if (prepared.amx) {
    // The AMX B operand: groups of tokens, each [K2p][group] pairs.
    const size_t group_pairs = amx_padded_pairs(K2) * kAmxTokenGroup, groups = amx_token_groups(size_t(T));
    uint32_t* const xt = caller_scratch(Scratch::transposed, groups * group_pairs);
    const int64_t groups_per_task = 2;
    ThreadPool::global().parallel_for((int64_t(groups) + groups_per_task - 1) / groups_per_task, [&](int64_t task, int) {
      const size_t g0 = size_t(task * groups_per_task), t0 = g0 * kAmxTokenGroup;
      const size_t tokens = std::min(size_t(T) - t0, size_t(groups_per_task) * kAmxTokenGroup);
      amx_transpose_activations(a + t0 * K2, tokens, K2, xt + g0 * group_pairs);
    });
    prepared.transposed = xt;
  } else if (T <= kFewRows) {
    const size_t Tp = (size_t(T) + 15) / 16 * 16;
    uint32_t* const xt = caller_scratch(Scratch::transposed, K2 * Tp);
    transpose_pairs(a, K2, size_t(T), K2, xt, Tp);
    prepared.transposed = xt;
  }
  return prepared;
}

void linear_gemm_bf16(const QuantMatrix& w, const float* bias, const float* x, int64_t T, float* y, int64_t ldy,
                      int64_t panel) {
  linear_gemm_bf16(w, bias, prepare_bf16_activations(x, T, w.cols), y, ldy, panel);
}

void linear_gemm_bf16(const QuantMatrix& w, const float* bias, const Bf16Activations& x, float* y, int64_t ldy,
                      int64_t panel) {
  require(x.K == w.cols, "x", [&] {
    return "prepared for K = " + std::to_string(x.K) + ", the weights have " + std::to_string(w.cols) + " columns";
  });
  require(x.amx == amx_bf16_enabled(), "x", "prepared for another bf16 engine than the one that now runs");
  (amx_bf16_enabled() ? g_amx_gemms : g_dot_gemms).fetch_add(1, std::memory_order_relaxed);  // bf16_pair_gemm's choice
  const int64_t T = x.T;
  const size_t N = size_t(w.rows), K2 = (size_t(w.cols) + 1) / 2;
  const uint32_t* const a = x.pairs;
  const int64_t tasks = (int64_t(N) + panel - 1) / panel;
  if (amx_bf16_enabled()) return amx_gemm(w, bias, x.transposed, T, y, ldy, panel, tasks);
  if (T <= kFewRows) return few_rows(w, bias, x.transposed, T, y, ldy, panel, tasks);
  ThreadPool::global().parallel_for(tasks, [&](int64_t task, int) {
    const size_t n0 = size_t(task * panel), nb = std::min(N, n0 + size_t(panel)) - n0, nbp = (nb + 15) / 16 * 16;
    thread_local AlignedBuffer<uint32_t> b, pairs;
    thread_local AlignedBuffer<float> staged;
    b.resize(K2 * nbp);
    // The tile kernel writes whole 16-column groups: straight into y when the panel is made of them (every
    // panel but perhaps the last), else into a staging buffer copied out at the end.
    const bool direct = nb == nbp;
    if (!direct) staged.resize(size_t(T) * nbp);
    float* const c = direct ? y + n0 : staged.data();
    const size_t ldc = direct ? size_t(ldy) : nbp;
    transpose_pairs(panel_pairs(w, n0, nb, pairs), K2, nb, K2, b.data(), nbp);
    for (int64_t t = 0; t < T; ++t) {
      float* ct = c + size_t(t) * ldc;
      if (bias)
        std::copy(bias + n0, bias + n0 + nb, ct);
      else
        std::fill(ct, ct + nb, 0.f);
      std::fill(ct + nb, ct + nbp, 0.f);
    }
    for (size_t k0 = 0; k0 < K2; k0 += kKc) {
      const size_t kc = std::min(kKc, K2 - k0);
      for (size_t m0 = 0; m0 < size_t(T); m0 += kMc)
        bf16_pair_gemm(std::min(kMc, size_t(T) - m0), nbp, kc, a + m0 * K2 + k0, K2, b.data() + k0 * nbp,
                       nbp, c + m0 * ldc, ldc, /*accumulate=*/true);
    }
    if (!direct)
      for (int64_t t = 0; t < T; ++t) std::copy_n(staged.data() + size_t(t) * nbp, nb, y + t * ldy + int64_t(n0));
  });
}

}  // namespace attnzoo
