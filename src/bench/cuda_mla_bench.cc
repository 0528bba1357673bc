#include "bench/cuda_mla_bench.h"

#include <cstdint>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "kernels/softmax/mla.h"

namespace attnzoo::bench {

std::vector<LinearCase> mla_decode_cases(Scale s) {
  if (s == Scale::tiny)
    return {{"mla_decode", {{"B", 2}, {"ctx", 70}, {"H", 16}, {"r", 64}, {"dr", 16}, {"dn", 16}, {"dv", 16}, {"block", 16}}}};
  const int64_t ctx2 = s == Scale::full ? 8192 : 4096;
  std::vector<LinearCase> out;
  for (int64_t ctx : {int64_t(4096), ctx2}) {
    out.push_back({"mla_decode",
                   {{"B", 32}, {"ctx", ctx}, {"H", 128}, {"r", 512}, {"dr", 64}, {"dn", 128}, {"dv", 128}, {"block", 64}}});
    if (ctx2 == 4096) break;
  }
  return out;
}

double mla_decode_bytes(const LinearCase& c) {
  return 2.0 * (double(c["B"] * c["ctx"] * (c["r"] + c["dr"])) + double(c["H"] * (c["dn"] + c["dv"]) * c["r"]));
}

namespace {

LinearRow mla_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t B = c["B"], ctx = c["ctx"], H = c["H"], r = c["r"], dr = c["dr"], dn = c["dn"], dv = c["dv"];
    const int64_t block = c["block"], per_seq = (ctx + block - 1) / block, blocks = B * per_seq;
    const DeviceBuffer latent = noise_buffer(device, size_t(blocks * block * (r + dr)) * 2, 11, stream);
    const DeviceBuffer w = noise_buffer(device, size_t(H * (dn + dv) * r) * 2, 12, stream);
    const DeviceBuffer q = noise_buffer(device, size_t(B * H * (dn + dr)) * 2, 13, stream);
    const DeviceBuffer o(device, size_t(B * H * dv) * 2);
    // Each sequence's blocks scattered over the cache (a pool after some churn), as the paged decode rows do.
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    for (int64_t i = 0; i < blocks; ++i) table[size_t(i)] = int32_t((i * 7919) % blocks);
    const std::vector<int32_t> seqlens(static_cast<size_t>(B), static_cast<int32_t>(ctx));
    LatentCacheView cache;
    cache.latent = view_on(latent, DType::bf16, {blocks, block, r + dr});
    cache.cache_seqlens = seqlens.data();
    cache.block_table = table.data();
    cache.max_blocks_per_seq = per_seq;
    MlaWeights weights;
    weights.w_kv_b = view_on(w, DType::bf16, {H * (dn + dv), r});
    weights.num_heads = H;
    weights.qk_nope_head_dim = dn;
    weights.qk_rope_head_dim = dr;
    weights.v_head_dim = dv;
    weights.kv_lora_rank = r;
    const TensorView qv = view_on(q, DType::bf16, {B, 1, H, dn + dr}), ov = view_on(o, DType::bf16, {B, 1, H, dv});
    // Timed as an engine calls it: the host checks, plan and metadata upload of each step included.
    return timer([&] { mla_decode(qv, cache, weights, ov, {}); });
  });
}

}  // namespace

std::vector<LinearRow> run_mla_decode_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  return case_rows(mla_decode_cases(s), mla_row, device, stream, timer);
}

std::string format_mla_decode_text(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_text(
      "MLA absorbed decode (1 token, bf16 latent, paged)          median ms   GB/s of latent + W_UK/W_UV read   of copy\n",
      rows, mla_decode_bytes, copy_gbps);
}

std::string format_mla_decode_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, mla_decode_bytes, "bytes", copy_gbps);
}

}  // namespace attnzoo::bench
