#include "kernels/softmax/cuda/mla_decode_launch_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/softmax/cuda/mla_decode_cuda.h"

namespace attnzoo {
namespace {
std::string str(int64_t v) { return std::to_string(v); }
size_t align256(size_t n) { return (n + 255) / 256 * 256; }
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
}  // namespace

namespace cuda_mla {
namespace {

// Every sequence's rows cut into chunks of one length, a multiple of the tile: the shortest (at least
// min_chunk) that keeps every attention CTA inside one wave of `slots`, so a split costs a merge only where
// the GPU would otherwise idle. When whole sequences already overflow a wave, a slot's fair share of all rows,
// so that one long sequence does not run alone after the short ones are done.
int64_t chunk_length(const MlaProblem& p, int64_t tile, int64_t head_groups, int64_t slots, int64_t min_chunk) {
  int64_t longest = 0, total = 0;
  for (const MlaSeq& s : p.seqs) longest = std::max(longest, s.Tk), total += s.Tk;
  auto ctas = [&](int64_t L) {
    int64_t n = 0;
    for (const MlaSeq& s : p.seqs) n += std::max<int64_t>(1, (s.Tk + L - 1) / L);
    return n * head_groups;
  };
  const int64_t whole = round_up(std::max<int64_t>(longest, 1), tile);
  if (ctas(whole) > slots) {
    const int64_t share = (total * head_groups + slots - 1) / slots;
    return std::min(whole, round_up(std::max(min_chunk, share), tile));
  }
  int64_t lo = (min_chunk + tile - 1) / tile, hi = whole / tile;  // in tiles; ctas(hi * tile) fits
  if (lo >= hi) return whole;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (ctas(mid * tile) <= slots) hi = mid; else lo = mid + 1;
  }
  return lo * tile;
}

}  // namespace

// It copies rows in 16-byte pieces and steps over whole 16-column k steps and pairs of 8-column value blocks
// per warp.
bool mla_uses_tensor_cores(const MlaProblem& p) {
  const MlaDims& d = p.dims;
  return (p.latent_dtype == DType::bf16 || p.latent_dtype == DType::f16) && d.r % (16 * kWarps) == 0 &&
         d.dr % 16 == 0 && reinterpret_cast<uintptr_t>(p.latent) % 16 == 0 && p.latent_token % 8 == 0 &&
         p.latent_block % 8 == 0;
}

MlaLaunchPlan plan_mla_decode_launch(const MlaProblem& p, int64_t slots, int64_t min_chunk) {
  MlaLaunchPlan plan;
  const MlaDims& d = p.dims;
  const int64_t B = int64_t(p.seqs.size());
  plan.head_groups = unsigned((d.H + kHeadsPerCta - 1) / kHeadsPerCta);
  plan.batch_groups = unsigned((B + kBatchPerCta - 1) / kBatchPerCta);
  plan.tensor_cores = mla_uses_tensor_cores(p);
  const int64_t tile = plan.tensor_cores ? kMmaTile : kTile;
  const int64_t L = B ? chunk_length(p, tile, plan.head_groups, std::max<int64_t>(slots, 1), min_chunk) : tile;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = p.seqs[size_t(b)].Tk, n = std::max<int64_t>(1, (len + L - 1) / L);
    if (n == 1) {
      plan.work.push_back({int32_t(b), 0, int32_t(len), -1});
      continue;
    }
    plan.merges.push_back({int32_t(b), int32_t(plan.num_slots), int32_t(n)});
    for (int64_t c = 0; c < n; ++c)
      plan.work.push_back({int32_t(b), int32_t(c * L), int32_t(std::min(len, (c + 1) * L)),
                           int32_t(plan.num_slots + c)});
    plan.num_slots += n;
  }

  const size_t work_bytes = plan.work.size() * sizeof(MlaWork), merge_bytes = plan.merges.size() * sizeof(MlaMerge);
  plan.has_table = p.block_table != nullptr;
  const size_t table_bytes = plan.has_table ? size_t(B * p.max_blocks_per_seq) * sizeof(int32_t) : 0;
  plan.merges_at = align256(work_bytes);
  plan.table_at = align256(plan.merges_at + merge_bytes);
  const size_t meta_bytes = align256(plan.table_at + table_bytes);
  plan.q_lat_at = meta_bytes;
  plan.ctx_at = align256(plan.q_lat_at + size_t(B * d.H * d.latent_dim()) * 4);
  plan.part_o_at = align256(plan.ctx_at + size_t(B * d.H * d.r) * 4);
  plan.part_m_at = align256(plan.part_o_at + size_t(plan.num_slots * d.H * d.r) * 4);
  plan.part_l_at = align256(plan.part_m_at + size_t(plan.num_slots * d.H) * 4);
  plan.device_bytes = align256(plan.part_l_at + size_t(plan.num_slots * d.H) * 4);

  plan.metadata.assign(meta_bytes, 0);
  unsigned char* host = plan.metadata.data();
  if (work_bytes) std::memcpy(host, plan.work.data(), work_bytes);
  if (merge_bytes) std::memcpy(host + plan.merges_at, plan.merges.data(), merge_bytes);
  if (table_bytes) std::memcpy(host + plan.table_at, p.block_table, table_bytes);

  MlaDecodeParams& params = plan.params;
  params.q = p.q;
  params.o = p.o;
  params.w = p.w;
  params.latent = p.latent;
  params.q_type = cuda_linear::elem_of(p.q_dtype), params.o_type = cuda_linear::elem_of(p.o_dtype);
  params.w_type = cuda_linear::elem_of(p.w_dtype), params.latent_type = cuda_linear::elem_of(p.latent_dtype);
  // Padded q and out: sequence b's token sits at b times the batch stride (make_mla_cache_problem's offsets).
  params.q_batch = B > 1 ? p.seqs[1].q_offset : 0;
  params.o_batch = B > 1 ? p.seqs[1].o_offset : 0;
  params.q_head = p.q_head, params.o_head = p.o_head, params.w_row = p.w_row;
  params.latent_block = p.latent_block, params.latent_token = p.latent_token;
  params.B = int32_t(B);
  params.H = int32_t(d.H), params.dn = int32_t(d.dn), params.dr = int32_t(d.dr), params.dv = int32_t(d.dv);
  params.r = int32_t(d.r);
  params.block_size = int32_t(p.block_size);
  params.max_blocks_per_seq = p.max_blocks_per_seq;
  params.scale_log2 = p.scale * kLog2e;
  return plan;
}

MlaDecodeParams bind_device_buffer(const MlaLaunchPlan& plan, unsigned char* device) {
  return bind_device_buffers(plan, device, device + plan.metadata.size());
}

MlaDecodeParams bind_device_buffers(const MlaLaunchPlan& plan, const unsigned char* metadata, unsigned char* scratch) {
  MlaDecodeParams params = plan.params;
  params.work = reinterpret_cast<const MlaWork*>(metadata);
  params.merges = reinterpret_cast<const MlaMerge*>(metadata + plan.merges_at);
  params.block_table = plan.has_table ? reinterpret_cast<const int32_t*>(metadata + plan.table_at) : nullptr;
  // The scratch offsets count from the metadata's end (plan_mla_decode_launch lays q_lat out right after it).
  auto at = [&](size_t offset) { return reinterpret_cast<float*>(scratch + (offset - plan.metadata.size())); };
  params.q_lat = at(plan.q_lat_at);
  params.ctx = at(plan.ctx_at);
  params.part_o = at(plan.part_o_at);
  params.part_m = at(plan.part_m_at);
  params.part_l = at(plan.part_l_at);
  return params;
}

MlaTensors mla_tensors(const MlaProblem& p) { return {p.q, p.o, p.w, p.latent}; }

MlaDecodeParams with_tensors(MlaDecodeParams params, const MlaTensors& t) {
  params.q = t.q;
  params.o = t.o;
  params.w = t.w;
  params.latent = t.latent;
  return params;
}

bool mla_expand_is_wide(const MlaDecodeParams& params) {
  const int64_t size = params.w_type == cuda_linear::Elem::f32 ? 4 : 2;
  return reinterpret_cast<uintptr_t>(params.w) % 16 == 0 && params.w_row * size % 16 == 0 &&
         params.r * size % 16 == 0;
}

}  // namespace cuda_mla

// Declared in mla_decode_cuda.h; defined with the rest of the host side so that it exists in every build.
void check_cuda_mla_decode(const MlaProblem& p, bool packed) {
  require(!packed, "cu_seqlens",
          "packed (varlen) queries for mla_decode run on the CPU only for now; on CUDA pass padded q "
          "[batch, 1, heads, qk_nope_head_dim + qk_rope_head_dim]");
  for (const MlaSeq& s : p.seqs)
    require(s.Tq == 1, "q", [&] {
      return "mla_decode on CUDA takes one new token per sequence (plain decode), got " + str(s.Tq) +
             "; speculative verification (Tq > 1) runs on the CPU only for now";
    });
  const MlaDims& d = p.dims;
  require(d.H <= 65535, "num_heads", [&] { return "at most 65535 on CUDA (the merge's grid y), got " + str(d.H); });
  require(d.r <= cuda_mla::kMaxRank, "kv_lora_rank",
          [&] { return "at most " + str(cuda_mla::kMaxRank) + " on CUDA, got " + str(d.r); });
  require(d.dn <= 512, "qk_nope_head_dim", [&] { return "at most 512 on CUDA, got " + str(d.dn); });
  require(d.dr <= 128, "qk_rope_head_dim", [&] { return "at most 128 on CUDA, got " + str(d.dr); });
  require(p.block_size <= (int64_t(1) << 30), "latent_cache",
          [&] { return "at most 2^30 rows per block (or per sequence) on CUDA, got " + str(p.block_size); });
  require(int64_t(p.seqs.size()) <= int64_t(65535) * cuda_mla::kBatchPerCta, "q",
          [&] { return "at most " + str(int64_t(65535) * cuda_mla::kBatchPerCta) + " sequences on CUDA"; });
}

}  // namespace attnzoo
