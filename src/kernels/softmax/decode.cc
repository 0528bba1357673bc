// Decode attention on CPU: a few new queries against a long KV cache, which makes it memory-bound.
// One task = (sequence, chunk of keys, kv heads - normally all of them). The task holds every query row that
// shares those kv heads (Tq new tokens x G = Hq / Hkv heads each), so each cached K and V row is read from
// memory once and serves all of them. Keys stream in tiles: each K row is widened to f32 in registers and
// dotted with the head's query rows, key by key across heads so the cache is read in memory order; then per
// head an online-softmax update, and the tile's V rows are widened in registers straight into the output
// accumulators (decode_rows-inl.h holds these row helpers). bf16 queries against a bf16, int8 or fp8 cache on
// AVX-512-BF16 CPUs score with vdpbf16ps instead (decode_avx512bf16.cc), which is exact for those inputs; bf16
// queries against an int8 cache on VNNI CPUs score as int16 queries with vpdpwssd (decode_avx512vnni.cc). A paged cache is
// walked block by block (one block-table lookup per block). Chunks of one sequence leave (max, sum,
// unnormalised output) behind and are merged with the log-sum-exp rule. int8 / fp8 caches (kv_quant.h) are read as
// bytes and widened in registers; each key's scale multiplies its scores, each value's scale its softmax weights.
//
// Measured on the 2-core Zen 5 VM (Hq=32, Hkv=8, D=128, bf16, 32k keys, same-process A/B against the previous
// kernel): the P * V fold without an f32 V tile, pair-order bf16 widening and vdpbf16ps scores took
// contiguous decode from ~4.6 ms to ~3.2 ms and paged from ~5.6 ms to ~3.9 ms. Paged stays ~20% behind
// contiguous (as before); prefetching one span of all heads' K lines then one of V lines instead of the
// head-by-head interleave below made paged decode ~25% slower, so keep the interleave. Prefetching each next
// page whole into L2 on entering a page (RowPrefetcher::PrefetchNextBlock) gained 0-20% more (more under load);
// it is now the vdpbf16ps path's alone: the two-key path's L2 lead walks the block table key by key instead
// (RowPrefetcher::kL2LeadTwoKeys says why).
// Blocks smaller than 16 keys keep 16 keys past the current block in L2 instead of one block: at 7-token blocks
// (bf16, 16k keys, same-process paired runs on the loaded 2-core VM) paged decode went from 1.65-1.9x the
// contiguous time to 1.15-1.3x; 16- and 48-token blocks are unaffected.
// Quantized caches (Hq=32, Hkv=8, D=128, 16-token pages, 8k keys, one thread, same-process runs on the loaded
// 2-core Zen 5 VM): bf16-query scores with vdpbf16ps on int8 / fp8 keys, fp8 widened through f16 and the scales'
// prefetch took int8 from 0.98-1.06x to 1.03-1.06x the bf16 cache's speed and fp8 from 0.74-0.81x to 0.90-0.92x.
// A vpdpwssd P * V over int8 values (weights rounded to 15 bits) and 15-bit queries with vpdpwssd scores cut
// the arithmetic of both halves several times over and changed nothing measurable (paged or contiguous), and
// neither did a longer prefetch distance for byte rows. Contiguous int8 takes about as long as contiguous bf16
// (1.1-1.2 ms vs 1.0-1.1 ms) while reading half the bytes, so neither the bytes nor the arithmetic alone bound it
// there; what does is not found yet (the profile charges the first use of each loaded K / V vector).
// Where the time goes (8k keys, one thread, the stages switched off one at a time): the softmax, the scales and
// the prefetch alone take ~40% of the int8 time, scores and P * V ~20-25% each; without the L1 prefetch every
// cache type takes twice as long, and a perf profile of the 4-sequence bench row charges about a third of the
// int8 kernel's samples to the next-page L2 prefetch loop, i.e. to waiting for memory. Scoring int8 keys with
// int16 queries (vpdpwssd, one vpmovsxbw per 32 key bytes) instead of converting them to bf16 took int8 3-10%
// faster (same-process A/B, 4 x 8k and 1 x 32k keys). int8 queries with vpdpbusd took 13-18% but put the outputs
// of kv_quant_test.cc up to 0.09 from the double reference on the dequantized cache (the other paths: < 8e-4),
// so they are not taken. vpdpwssd P * V with 16-bit weights (pairs of keys per instruction, V rows
// interleaved with vpermt2w) was 20-30% slower than the f32 FMAs, and spreading the next-page prefetch over
// the keys of the current page (one key's lines per step, 16 or 32 keys ahead) was 4% faster for int8 / fp8
// and 16% slower for bf16.
// The hand-written score loops (decode_avx512_scores.h) take the head dim as a compile-time bound and int8
// keys two at a time: same-process A/B (Zen 5, 2 threads, 4 x 8k keys, 16-token pages, 21 alternating rounds)
// int8 0.89-0.92x the time of the one-key loop with a run-time D, bf16 and fp8 unchanged (one key per call).
// The softmax weights take the scans' fast 2^x (kernels/common/fast_exp2-inl.h) instead of Highway's Exp:
// 2-3% less time for bf16 and int8 (same-process A/B, 2k keys in L3, one thread), fp8 unchanged.
// Targets without vdpbf16ps (AVX2, AVX-512 without BF16; bf16 cache, 32k keys, one thread, same-process A/B
// on the Zen 5 VM with the dispatch forced): scoring two keys per pass and an L2-only lead of 24 keys took
// AVX2 from 13.2-14.3 to 14.5-15.5 GB/s and AVX-512 from 16.2-18.6 to 16.4-19.5 GB/s; with the cache in L3
// (4k keys) +10% on both. In the profile the rest is the f32 FMAs themselves (AVX2: about half the cycles
// with the cache in L2) and, from memory, the P * V loop's first use of each V vector.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/batch_invariance.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/softmax/decode_problem.h"
#include "kernels/softmax/tiling.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/decode.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/softmax/decode_rows-inl.h"

namespace attnzoo {
// decode_avx512bf16.cc: one key's scores for H heads x R rows of bf16 queries, unscaled, with vdpbf16ps.
void decode_score_key_bf16(const uint16_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                           float* s, size_t lds_head, size_t lds);
void decode_score_key_i8_bf16(const int8_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                              float* s, size_t lds_head, size_t lds);
void decode_score_key_f8_bf16(const uint8_t* k, int64_t k_head, size_t H, size_t D, const uint16_t* q, size_t R,
                              float* s, size_t lds_head, size_t lds);
// decode_avx512vnni.cc: the scores of key k0 (and k1 unless null) for int16 queries against int8 keys, with
// vpdpwssd.
void decode_score_keys_i8_i16(const int8_t* k0, const int8_t* k1, int64_t k_head, size_t H, size_t D,
                              const int16_t* q, size_t R, float* s, size_t lds_head, size_t lds);
}  // namespace attnzoo

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Walks a chunk's keys a few positions ahead of the arithmetic and prefetches their K rows into L1 and their
// V rows into L2 (V rows are consumed after the tile's K pass, head by head, so they must survive a whole tile).
// Hardware prefetchers stop at page edges and follow one stream at a time; K, V and the block table make three.
template <class T>
class RowPrefetcher {
 public:
  static constexpr int64_t kAhead = 8;  // keys: enough to cover memory latency, few enough not to flood L1
  // Keys scored two at a time (ScoreTwoKeys) go faster through the same bytes and need a longer lead, and
  // a second, L2-only lead further out: the L1 prefetches alone hold about as many lines in flight as L1 can
  // track (same-process A/B, 32k keys, one thread: +5-9% AVX2, +15-18% AVX-512; 48 keys: no better; the
  // vdpbf16ps path measured 7% slower with it, so it keeps the one lead). On a paged cache that lead goes
  // through the block table key by key, in place of the whole next block at each block edge (below): on the
  // Emerald Rapids VM (bf16, 16-token pages, 32k keys, one thread, same-process A/B) the burst of 1024 L2
  // prefetches at every page edge stalled the loop on full fill buffers (~40% of the kernel's samples sat on
  // them) and paged decode went from 1.13-1.22x the contiguous time to 0.98-1.07x (AVX2 forced: 1.12x to 1.02x).
  static constexpr int64_t kAheadTwoKeys = 12;
  static constexpr int64_t kL2LeadTwoKeys = 24;
  static constexpr size_t kNextBlockBytes = 128 << 10;
  static constexpr int64_t kMinL2Lead = 16;  // keys of L2 lead past the current block, for blocks smaller than this

  // ahead: keys of L1 lead; l2_lead: keys of L2-only lead (0: none, and a paged cache's next block whole instead).
  RowPrefetcher(const DecodeProblem& p, int64_t b, int64_t hk_begin, int64_t heads, int64_t end, int64_t ahead,
                int64_t l2_lead)
      : p_(p), b_(b), hk_(hk_begin), heads_(heads), end_(end), ahead_(ahead),
        l2_lead_(l2_lead), k_bytes_(size_t(p.D) * sizeof(T)), v_bytes_(size_t(p.Dv) * sizeof(T)),
        k_span_(size_t(heads - 1) * size_t(p.k_head) * sizeof(T) + k_bytes_),
        v_span_(size_t(heads - 1) * size_t(p.v_head) * sizeof(T) + v_bytes_) {}

  // Called before processing keys from `pos` on: keeps the prefetched window `ahead` keys past pos.
  void Seek(int64_t pos) {
    if (pos_ < pos) Reposition(pos);
    while (pos_ < end_ && pos_ < pos + ahead_) Step();
  }
  // Called once per key processed: prefetches one more key (all heads of the task).
  void Step() {
    if (pos_ >= end_) return;
    // Head by head, K and V interleaved: measured clearly faster (up to 1.6x on a Zen 5 VM) than one span
    // of all heads' K lines followed by one of their V lines, although the lines are the same.
    for (int64_t h = 0; h < heads_; ++h) {
      PrefetchSpan<3>(k_ + h * p_.k_head, k_bytes_);
      PrefetchSpan<2>(v_ + h * p_.v_head, v_bytes_);
    }
    if (l2_lead_ > 0 && pos_ + l2_lead_ < end_) {
      if (p_.block_table) {
        const int64_t t = pos_ + l2_lead_;
        const int64_t phys = p_.physical_block(b_, t / p_.block_size), row = t % p_.block_size;
        const T* k = static_cast<const T*>(p_.k) + phys * p_.k_block + row * p_.k_token + hk_ * p_.k_head;
        const T* v = static_cast<const T*>(p_.v) + phys * p_.v_block + row * p_.v_token + hk_ * p_.v_head;
        PrefetchSpan<1>(k, k_span_);
        PrefetchSpan<1>(v, v_span_);
      } else {  // one block of S_max rows: the lead stays in it
        PrefetchSpan<1>(k_ + l2_lead_ * p_.k_token, k_span_);
        PrefetchSpan<1>(v_ + l2_lead_ * p_.v_token, v_span_);
      }
    }
    ++pos_;
    if (++off_ == p_.block_size) {
      Reposition(pos_);
    } else {
      k_ += p_.k_token;
      v_ += p_.v_token;
    }
  }

 private:
  // Every cache line of [p, p + bytes), into L1 (locality 3) or L2 (locality 2).
  template <int kLocality>
  static void PrefetchSpan(const T* p, size_t bytes) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
#pragma GCC unroll 8
    for (uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63); a < end; a += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(a), /*write=*/0, kLocality);
  }
  // Paged caches without the L2 lead (the vdpbf16ps path): on entering a block, the whole next block (this
  // task's heads) goes to L2, since the hardware prefetcher restarts on every block. Same-process A/B at
  // 16-token blocks, 32k keys, bf16 on the 2-core Zen 5 VM: paged decode 0-20% faster (the more other traffic,
  // the larger the gain); still 20-40% behind contiguous, so the rest is not prefetch distance (MADV_HUGEPAGE on
  // the buffers changed nothing either).
  void PrefetchNextBlock(int64_t pos) {
    const int64_t next = (pos / p_.block_size + 1) * p_.block_size;
    if (next >= end_) return;
    const size_t k_span = k_span_, v_span = v_span_;
    if (p_.block_size < kMinL2Lead) {
      // Small blocks: one block ahead is too little lead, so keep kMinL2Lead keys past this block in flight,
      // walking as many blocks as that takes; every key is prefetched once.
      const int64_t target = std::min(end_, next + kMinL2Lead);
      for (int64_t t = std::max(l2_next_, next); t < target; ++t) {
        const int64_t phys = p_.physical_block(b_, t / p_.block_size), row = t % p_.block_size;
        PrefetchSpan<1>(static_cast<const T*>(p_.k) + phys * p_.k_block + row * p_.k_token + hk_ * p_.k_head, k_span);
        PrefetchSpan<1>(static_cast<const T*>(p_.v) + phys * p_.v_block + row * p_.v_token + hk_ * p_.v_head, v_span);
      }
      l2_next_ = std::max(l2_next_, target);
      return;
    }
    const int64_t phys = p_.physical_block(b_, next / p_.block_size);
    const T* k = static_cast<const T*>(p_.k) + phys * p_.k_block + hk_ * p_.k_head;
    const T* v = static_cast<const T*>(p_.v) + phys * p_.v_block + hk_ * p_.v_head;
    // Large blocks: only their start (the prefetcher takes over within a block); L2 must also hold the tile.
    const int64_t tokens = std::min({p_.block_size, end_ - next, int64_t(kNextBlockBytes / (k_span + v_span)) + 1});
    for (int64_t t = 0; t < tokens; ++t) {
      PrefetchSpan<1>(k + t * p_.k_token, k_span);
      PrefetchSpan<1>(v + t * p_.v_token, v_span);
    }
  }
  void Reposition(int64_t pos) {
    pos_ = pos;
    if (pos >= end_) return;
    off_ = pos % p_.block_size;
    const int64_t phys = p_.physical_block(b_, pos / p_.block_size);
    if (p_.block_table && l2_lead_ == 0) PrefetchNextBlock(pos);
    k_ = static_cast<const T*>(p_.k) + phys * p_.k_block + off_ * p_.k_token + hk_ * p_.k_head;
    v_ = static_cast<const T*>(p_.v) + phys * p_.v_block + off_ * p_.v_token + hk_ * p_.v_head;
  }

  const DecodeProblem& p_;
  const int64_t b_, hk_, heads_, end_, ahead_, l2_lead_;
  const size_t k_bytes_, v_bytes_;
  const size_t k_span_, v_span_;  // bytes from this task's first head's row to the end of its last's
  int64_t pos_ = -1, off_ = 0;
  int64_t l2_next_ = 0;  // small blocks: first key not yet prefetched into L2
  const T* k_ = nullptr;
  const T* v_ = nullptr;
};

// Only this target's code may run on a CPU with AVX-512-BF16 or VNNI (the caller also checks the CPU).
constexpr bool kTargetMayDotBf16 = HWY_TARGET == HWY_AVX3;
constexpr bool kTargetMayDotInt = HWY_TARGET == HWY_AVX3;

// x[0, n) as int16 steps of |x|max / 32767 (round to nearest); returns the step (0 for an all-zero row, NaN for a
// row holding NaN or Inf, which then reaches the scores as it would through the f32 path).
// Vectorised: the scalar loop (std::lrint per element) took most of a short-context int8 decode call (32 query
// rows x 128 per chunk); NearestInt rounds to nearest even as lrint does in the default rounding mode.
inline float round_to_i16(const float* x, size_t n, int16_t* out) {
  const DF df;
  const hn::Rebind<int16_t, DF> d16;
  const size_t L = hn::Lanes(df);
  auto vmax = hn::Zero(df), nonfinite = hn::Zero(df);  // x - x is NaN exactly where x is NaN or Inf
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(df, x + i);
    vmax = hn::Max(vmax, hn::Abs(v));
    nonfinite = hn::Add(nonfinite, hn::Sub(v, v));
  }
  float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
  bool finite = std::isfinite(hn::GetLane(hn::SumOfLanes(df, nonfinite)));
  for (size_t t = i; t < n; ++t) {
    amax = std::max(amax, std::fabs(x[t]));
    finite = finite && std::isfinite(x[t]);
  }
  if (!finite) {
    std::fill(out, out + n, int16_t(0));
    return NAN;
  }
  const float to_int = amax > 0.f ? 32767.f / amax : 0.f;
  const auto vs = hn::Set(df, to_int);
  for (i = 0; i + L <= n; i += L)
    hn::StoreU(hn::DemoteTo(d16, hn::NearestInt(hn::Mul(hn::LoadU(df, x + i), vs))), d16, out + i);
  for (; i < n; ++i) out[i] = int16_t(std::lrint(x[i] * to_int));
  return amax / 32767.f;
}

struct DecodeScratch {
  AlignedBuffer<float> q, s, o, m, l;
  AlignedBuffer<float> k_scale, v_scale, pv;  // quantized caches: per (head, key) scales, weights times V scales
  AlignedBuffer<uint16_t> q_bf16;  // the bf16 queries as they are, for vdpbf16ps
  AlignedBuffer<int16_t> q_i16;  // int8 caches on VNNI CPUs: the queries rounded to int16, and
  AlignedBuffer<float> q_unit;  // each row's scale (the value of one int16 step)
  std::vector<int64_t> krow, vrow;  // per key of the tile: element offset of its row (kv head 0)
  std::vector<VisibleRun> runs;     // the tile's keys by the new tokens that see them
};

template <class T>
void RunChunk(const DecodeProblem& p, const DecodePlan& plan, const DecodeChunk& c, float* partials,
              bool bf16_dot, bool int_dot) {
  static thread_local DecodeScratch sc;
  const size_t G = size_t(p.group()), R = size_t(p.rows()), H = size_t(plan.heads_per_task), HR = H * R;
  const size_t D = size_t(p.D), Dv = size_t(p.Dv);
  const size_t Dp = (D + 15) / 16 * 16, Dvp = (Dv + 15) / 16 * 16, Bc = size_t(plan.block_k);
  const size_t q_paired = PairedPrefix<T>(D), o_paired = PairedPrefix<T>(Dv);
  // bf16 queries against a bf16 / int8 / fp8 cache: exact products either way, so the faster dot product is
  // taken; the softmax scale then goes onto the scores (scaling bf16 queries would round them).
  // int8 caches on VNNI CPUs: int16 queries and integer dot products (decode_avx512vnni.cc) instead.
  const bool idot = kTargetMayDotInt && std::is_same_v<T, int8_t> && int_dot;
  const bool dot = !idot && kTargetMayDotBf16 && (kPairOrder<T> || kQuantized<T>) && bf16_dot;
  sc.q.resize(HR * Dp);
  if (dot) sc.q_bf16.resize(HR * D);
  if (idot) {
    sc.q_i16.resize(HR * D);
    sc.q_unit.resize(HR);
  }
  sc.s.resize(HR * Bc);
  sc.o.resize(HR * Dvp);
  sc.m.resize(HR);
  sc.l.resize(HR);
  sc.krow.resize(Bc);
  sc.vrow.resize(Bc);
  constexpr bool quantized = kQuantized<T>;
  if constexpr (quantized) {
    sc.k_scale.resize(H * Bc);
    sc.v_scale.resize(H * Bc);
    sc.pv.resize(R * Bc);
  }

  const int64_t b = c.b, hk0 = c.hk_begin;
  const int64_t len = p.seqlens[b];
  const int64_t q_first = len - p.Tq, q_last = len - 1;
  // State row x = (kv head hk0 + x / R, new token (x % R) / G, head in group x % G); its query is
  // pre-multiplied by the softmax scale and laid out in the order the cache rows are widened in.
  auto head_of = [&](size_t x) { return (hk0 + int64_t(x / R)) * int64_t(G) + int64_t(x % G); };
  auto token_of = [&](size_t x) { return int64_t((x % R) / G); };
  const size_t q_elem = dtype_size(p.q_dtype);
  const bool with_sink = p.opts.sinks != nullptr && c.slot < 0;  // split chunks: the merge adds the sink
  for (size_t x = 0; x < HR; ++x) {
    const int64_t h = head_of(x);
    float* dst = sc.q.data() + x * Dp;
    const int64_t src = b * p.q_batch + token_of(x) * p.q_token + h * p.q_head;
    convert_to_f32(static_cast<const char*>(p.q) + src * int64_t(q_elem), p.q_dtype, dst, D);
    for (size_t d = 0; d < D; ++d) dst[d] *= p.scale;
    std::fill(dst + D, dst + Dp, 0.f);
    PermutePairs(dst, q_paired, /*inverse=*/false);
    if (dot) std::memcpy(sc.q_bf16.data() + x * D, static_cast<const char*>(p.q) + src * 2, D * 2);
    if (idot) sc.q_unit[x] = round_to_i16(dst, D, sc.q_i16.data() + x * D);
    sc.m[x] = with_sink ? p.opts.sinks[h] : -INFINITY;
    sc.l[x] = with_sink ? 1.f : 0.f;  // the sink's own exp(sink - m) at m = sink
  }
  std::fill(sc.o.data(), sc.o.data() + HR * Dvp, 0.f);

  const T* kcache = static_cast<const T*>(p.k);
  const T* vcache = static_cast<const T*>(p.v);
  const MaskGeometry mask = mask_geometry(p.opts);
  // Without a dot-product instruction, keys are scored two at a time (below).
  const bool two_keys = !dot && !idot;
  RowPrefetcher<T> prefetch(p, b, hk0, int64_t(H), c.k_end,
                            two_keys ? RowPrefetcher<T>::kAheadTwoKeys : RowPrefetcher<T>::kAhead,
                            two_keys ? RowPrefetcher<T>::kL2LeadTwoKeys : 0);
  // Widened rows hold value * kWidened<T> (a power of two): their scales take the inverse, exactly. The
  // dot-product scores see the keys' true values.
  const float k_unwiden = (dot || idot) ? 1.f : 1.f / kWidened<T>, v_unwiden = 1.f / kWidened<T>;
  for (int64_t k0 = c.k_begin; k0 < c.k_end; k0 += plan.block_k) {
    const int64_t k1 = std::min(c.k_end, k0 + plan.block_k);
    const TileClass cls = classify_tile(mask, q_first, q_last, k0, k1 - 1);
    if (cls == TileClass::skipped) continue;
    const size_t cols = size_t(k1 - k0);
    // Where each key's rows are: one block-table lookup per cache block.
    for (int64_t pos = k0; pos < k1;) {
      const int64_t off = pos % p.block_size, phys = p.physical_block(b, pos / p.block_size);
      const int64_t n = std::min(p.block_size - off, k1 - pos);
      for (int64_t i = 0; i < n; ++i) {
        sc.krow[size_t(pos - k0 + i)] = phys * p.k_block + (off + i) * p.k_token;
        sc.vrow[size_t(pos - k0 + i)] = phys * p.v_block + (off + i) * p.v_token;
      }
      if constexpr (quantized) {
        for (size_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < n; ++i) {
            const size_t j = h * Bc + size_t(pos - k0 + i);
            sc.k_scale[j] = p.k_scale.at(phys, off + i, hk0 + int64_t(h)) * k_unwiden;
            sc.v_scale[j] = p.v_scale.at(phys, off + i, hk0 + int64_t(h)) * v_unwiden;
          }
      }
      pos += n;
    }
    if constexpr (quantized) {  // the next tile's scales (one 4-byte read per key and head, block by block)
      const int64_t n1 = std::min(c.k_end, k1 + plan.block_k);
      for (int64_t pos = k1; pos < n1; pos += p.block_size - pos % p.block_size) {
        const int64_t off = pos % p.block_size, phys = p.physical_block(b, pos / p.block_size);
        const int64_t n = std::min(p.block_size - off, n1 - pos);
        for (const KvScaleView* sv : {&p.k_scale, &p.v_scale}) {
          const float* first = &sv->data[phys * sv->block + off * sv->token + hk0 * sv->head];
          const float* last = &sv->data[phys * sv->block + (off + n - 1) * sv->token + (hk0 + int64_t(H) - 1) * sv->head];
          for (uintptr_t a = reinterpret_cast<uintptr_t>(first) & ~uintptr_t(63); a <= reinterpret_cast<uintptr_t>(last); a += 64)
            __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
        }
      }
    }
    // Scores, key by key over all heads of the task: the K rows stream in memory order.
    prefetch.Seek(k0);
    for (size_t j = 0; j < cols; ++j) {
      if (two_keys && j + 1 < cols) {
        // Two keys per pass share each query load and one reduction tree (decode_rows-inl.h). Their two keys'
        // prefetches are issued half the heads apart: back to back, the burst of lines made AVX2 and AVX-512
        // decode 10-25% slower from memory than one key at a time.
        const T* k0 = kcache + sc.krow[j] + hk0 * p.k_head;
        const T* k1 = kcache + sc.krow[j + 1] + hk0 * p.k_head;
        prefetch.Step();
        for (size_t h = 0; h < H; ++h) {
          if (h == H / 2) prefetch.Step();
          ScoreTwoKeys(k0 + int64_t(h) * p.k_head, k1 + int64_t(h) * p.k_head, D, q_paired,
                       sc.q.data() + h * R * Dp, Dp, R, sc.s.data() + h * R * Bc + j, Bc);
        }
        ++j;
        continue;
      }
      if (dot || idot) {
        // int8 keys against int16 queries go two keys per call (one prefetch step each): cheap enough per key
        // that the shared query loads pay (same-process A/B, 4 x 8k keys from memory, 2 threads: -10%); the
        // bf16-dot caches, bound by memory there, measured 5-12% slower in pairs and take one key per call.
        const bool pair = idot && j + 1 < cols;
        const T* k0 = kcache + sc.krow[j] + hk0 * p.k_head;
        const T* k1 = pair ? kcache + sc.krow[j + 1] + hk0 * p.k_head : nullptr;
        float* s = sc.s.data() + j;
        prefetch.Step();
        if (pair) prefetch.Step();
        if constexpr (std::is_same_v<T, int8_t>) {
          if (idot)
            decode_score_keys_i8_i16(k0, k1, p.k_head, H, D, sc.q_i16.data(), R, s, R * Bc, Bc);
          else
            decode_score_key_i8_bf16(k0, p.k_head, H, D, sc.q_bf16.data(), R, s, R * Bc, Bc);
        } else if constexpr (std::is_same_v<T, Fp8E4M3>) {
          decode_score_key_f8_bf16(&k0->bits, p.k_head, H, D, sc.q_bf16.data(), R, s, R * Bc, Bc);
        } else {
          decode_score_key_bf16(reinterpret_cast<const uint16_t*>(k0), p.k_head, H, D, sc.q_bf16.data(), R, s,
                                R * Bc, Bc);
        }
        j += pair;
        continue;
      }
      prefetch.Step();
      const T* krow = kcache + sc.krow[j] + hk0 * p.k_head;
      for (size_t h = 0; h < H; ++h)
        ScoreKey(krow + int64_t(h) * p.k_head, D, q_paired, sc.q.data() + h * R * Dp, Dp, R,
                 sc.s.data() + h * R * Bc + j, Bc);
    }
    if constexpr (quantized) {  // each key's scale (and int16 query's), once per score rather than per element
      for (size_t x = 0; x < HR; ++x) {
        float* s_row = sc.s.data() + x * Bc;
        const float* ks = sc.k_scale.data() + (x / R) * Bc;
        const float qs = idot ? sc.q_unit[x] : 1.f;
        for (size_t j = 0; j < cols; ++j) s_row[j] *= ks[j] * qs;
      }
    }
    // P * V multiplies only the (token, key) pairs the mask shows: a hidden key's weight is 0, but a NaN or Inf
    // in its value row would still reach the rows through 0 * NaN, and the cache is never scanned.
    static_assert(kMaxDecodeQueries <= 32, "a run's tokens are the bits of a uint32_t");
    if (cls == TileClass::full)
      sc.runs.assign(1, VisibleRun{0, int32_t(cols), uint32_t((uint64_t(1) << p.Tq) - 1)});
    else
      visible_runs(mask, q_first, p.Tq, k0, int64_t(cols), sc.runs);
    RowContext ctx{dot ? p.scale : 1.f, p.opts.softcap, 0.f, cls == TileClass::partial, &mask, 0, k0};
    for (size_t h = 0; h < H; ++h) {
      float* s_head = sc.s.data() + h * R * Bc;
      float* o_head = sc.o.data() + h * R * Dvp;
      for (size_t r = 0; r < R; ++r) {
        const size_t x = h * R + r;
        ctx.alibi_slope = p.opts.alibi_slopes ? p.opts.alibi_slopes[head_of(x)] : 0.f;
        ctx.qpos = q_first + token_of(x);
        const float alpha = SoftmaxRow(s_head + r * Bc, cols, ctx, &sc.m[x], &sc.l[x]);
        if (alpha != 1.f) ScaleRow(o_head + r * Dvp, Dvp, alpha);
      }
      // This head's V rows (prefetched into L2 during the K pass) serve all its R rows.
      const float* weights = s_head;
      if constexpr (quantized) {  // the softmax weights times each value row's scale
        const float* vs = sc.v_scale.data() + h * Bc;
        for (size_t r = 0; r < R; ++r)
          for (size_t j = 0; j < cols; ++j) sc.pv[r * Bc + j] = s_head[r * Bc + j] * vs[j];
        weights = sc.pv.data();
      }
      AccumulateRuns(vcache + (hk0 + int64_t(h)) * p.v_head, sc.vrow.data(), sc.runs, Dv, o_paired, G, weights, Bc,
                     o_head, Dvp);
    }
  }

  for (size_t x = 0; x < HR; ++x) PermutePairs(sc.o.data() + x * Dvp, o_paired, /*inverse=*/true);
  if (c.slot >= 0) {  // partial state for the merge: m[HR], l[HR], o[HR][Dv]
    float* dst = partials + size_t(c.slot) * HR * (Dv + 2);
    std::copy(sc.m.data(), sc.m.data() + HR, dst);
    std::copy(sc.l.data(), sc.l.data() + HR, dst + HR);
    for (size_t x = 0; x < HR; ++x)
      std::copy(sc.o.data() + x * Dvp, sc.o.data() + x * Dvp + Dv, dst + 2 * HR + x * Dv);
    return;
  }
  const size_t o_elem = dtype_size(p.o_dtype);
  for (size_t x = 0; x < HR; ++x) {
    float* orow = sc.o.data() + x * Dvp;
    ScaleRow(orow, Dvp, sc.l[x] > 0.f ? 1.f / sc.l[x] : 0.f);
    const int64_t dst = b * p.o_batch + token_of(x) * p.o_token + head_of(x) * p.o_head;
    convert_from_f32(orow, static_cast<char*>(p.o) + dst * int64_t(o_elem), p.o_dtype, Dv);
  }
}

void RunDecodeChunk(const DecodeProblem& p, const DecodePlan& plan, int64_t index, float* partials,
                    bool bf16_dot, bool int_dot) {
  const DecodeChunk& c = plan.chunks[size_t(index)];
  switch (p.kv_dtype) {
    case DType::bf16: return RunChunk<hwy::bfloat16_t>(p, plan, c, partials, bf16_dot, false);
    case DType::f16: return RunChunk<hwy::float16_t>(p, plan, c, partials, false, false);
    case DType::i8: return RunChunk<int8_t>(p, plan, c, partials, bf16_dot, int_dot);
    case DType::f8_e4m3: return RunChunk<Fp8E4M3>(p, plan, c, partials, bf16_dot, false);
    default: return RunChunk<float>(p, plan, c, partials, false, false);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunDecodeChunk);

void attention_decode_run(const DecodeProblem& p) {
  active_target();  // applies ATTNZOO_TARGET before the first dispatch
  ThreadPool& pool = ThreadPool::global();
  // Per calling thread and kept between calls (their capacity with them): a warm decode step allocates nothing.
  // Named through references, which the tasks below capture: a thread_local named inside a task would be the
  // worker's own, empty one.
  static thread_local DecodePlan thread_plan;
  static thread_local std::vector<float> thread_partials;
  DecodePlan& plan = thread_plan;
  std::vector<float>& partials = thread_partials;
  make_decode_plan(p, pool.num_threads(), plan, /*min_chunk=*/256, batch_invariant());
  partials.resize(size_t(plan.num_slots * plan.heads_per_task * p.rows() * (p.Dv + 2)));
  const bool dot_cache = p.kv_dtype == DType::bf16 || p.kv_dtype == DType::i8 || p.kv_dtype == DType::f8_e4m3;
  const bool bf16_dot = p.q_dtype == DType::bf16 && dot_cache && p.D % 32 == 0 && bf16_dot_enabled();
  // bf16 queries only: f32 queries keep every bit through the f32 path (int16 would round their low bits).
  const bool int_dot =
      p.q_dtype == DType::bf16 && p.kv_dtype == DType::i8 && p.D % 32 == 0 && p.D <= 512 && vnni_int8_enabled();
  pool.parallel_for(int64_t(plan.chunks.size()), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunDecodeChunk)(p, plan, task, partials.data(), bf16_dot, int_dot);
  });
  if (plan.merges.empty()) return;
  pool.parallel_for(int64_t(plan.merges.size()), [&](int64_t task, int) {
    merge_decode_chunks(p, plan, plan.merges[size_t(task)], partials.data());
  });
}

}  // namespace attnzoo
#endif
