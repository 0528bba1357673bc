#include "bench/cuda_step_bench.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/device_fill.h"
#include "core/error.h"
#include "kernels/quant/quant.h"
#include "kernels/softmax/cuda/kv_write_cuda.h"
#include "kernels/softmax/kv_write.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/deepseek_moe.h"
#include "layers/embedding.h"

namespace attnzoo::bench {
namespace {

struct KvFormat {
  const char* kernel;
  DType dtype;
};
const KvFormat kKvFormats[] = {
    {"kv_write_bfloat16", DType::bf16}, {"kv_write_int8", DType::i8}, {"kv_write_float8_e4m3fn", DType::f8_e4m3}};

DType kv_dtype_of(const LinearCase& c) {
  for (const KvFormat& f : kKvFormats)
    if (c.kernel == f.kernel) return f.dtype;
  throw ArgumentError("kernel: " + c.kernel + " is not a KV write case");
}

const QuantType kTableFormats[] = {QuantType::BF16, QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K};

QuantType table_format_of(const LinearCase& c) {
  for (QuantType t : kTableFormats)
    if (c.kernel == std::string("embedding_") + quant_type_name(t)) return t;
  throw ArgumentError("kernel: " + c.kernel + " is not an embedding case");
}

// Slots of whole blocks taken in a shuffled order (a pool after some churn), each token its own slot.
std::vector<int64_t> scattered_slots(int64_t T, int64_t block_size, int64_t num_blocks) {
  std::vector<int64_t> blocks(static_cast<size_t>(num_blocks));
  std::iota(blocks.begin(), blocks.end(), int64_t(0));
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(31));
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[size_t(t)] = blocks[size_t(t / block_size)] * block_size + t % block_size;
  return slots;
}

LinearRow kv_write_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const DType dtype = kv_dtype_of(c);
    const int64_t T = c["T"], H = c["Hkv"], D = c["D"], bs = c["block_size"];
    const int64_t num_blocks = 2 * ((T + bs - 1) / bs);  // half the cache unused, as a pool's would be
    const size_t rows = size_t(T * H * D), cache = size_t(num_blocks * bs * H * D);
    const DeviceBuffer k = noise_buffer(device, rows * 2, 41, stream), v = noise_buffer(device, rows * 2, 42, stream);
    const DeviceBuffer k_cache(device, cache * dtype_size(dtype)), v_cache(device, cache * dtype_size(dtype));
    const bool scaled = is_quantized_kv(dtype);
    const DeviceBuffer k_scale(device, scaled ? cache / size_t(D) * 4 : 0), v_scale(device, scaled ? cache / size_t(D) * 4 : 0);
    const std::vector<int64_t> slots = scattered_slots(T, bs, num_blocks);
    const DeviceBuffer slot_buffer(device, slots.size() * 8);
    slot_buffer.upload(slots.data(), slots.size() * 8, stream);
    const TensorView kv = view_on(k, DType::bf16, {T, H, D}), vv = view_on(v, DType::bf16, {T, H, D});
    const TensorView kc = view_on(k_cache, dtype, {num_blocks, bs, H, D}), vc = view_on(v_cache, dtype, {num_blocks, bs, H, D});
    const TensorView ks = scaled ? view_on(k_scale, DType::f32, {num_blocks, bs, H}) : TensorView{};
    const TensorView vs = scaled ? view_on(v_scale, DType::f32, {num_blocks, bs, H}) : TensorView{};
    if (!device.is_cuda()) return timer([&] { write_kv_paged(kv, vv, slots.data(), kc, vc, ks, vs); });
#if ATTNZOO_WITH_CUDA
    // As a model step writes its layer's rows: the slots come from the pool, so no device-side scan and no sync.
    const PagedRowsCuda writes[] = {{kv, kc, ks, "k", "k_cache", "k_scale"}, {vv, vc, vs, "v", "v_cache", "v_scale"}};
    for (const PagedRowsCuda& w : writes) check_paged_rows_cuda(w);
    return timer([&] { write_paged_rows_cuda(writes, slot_buffer.as<const int64_t>(), false, stream); });
#else
    return timer([&] { write_kv_paged(kv, vv, slot_buffer.as<const int64_t>(), kc, vc, ks, vs); });  // DeviceError
#endif
  });
}

LinearRow embedding_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const QuantType type = table_format_of(c);
    const int64_t T = c["T"], vocab = c["vocab"], dim = c["dim"];
    // Zero bytes: the gather reads each looked-up row whole whatever it holds.
    const std::vector<uint8_t> table(size_t(vocab * c["row_bytes"]));
    const Embedding embedding = Embedding::from_quantized(table.data(), table.size(), type, vocab, dim, "embedding");
    std::vector<int32_t> ids(static_cast<size_t>(T));
    std::mt19937 rng(51);
    for (int32_t& id : ids) id = int32_t(rng() % uint32_t(vocab));
    const DeviceBuffer id_buffer(device, ids.size() * 4), out(device, size_t(T * dim) * 4);
    id_buffer.upload(ids.data(), ids.size() * 4, stream);
    if (!device.is_cuda()) return timer([&] { embedding.lookup(ids.data(), T, out.as<float>()); });
#if ATTNZOO_WITH_CUDA
    const EmbeddingCuda on_device(embedding, device, stream);
    const TensorView idv = view_on(id_buffer, DType::i32, {T}), outv = view_on(out, DType::f32, {T, dim});
    // A model step's call: device ids unchecked (no status read back, so no sync inside the timing).
    return timer([&] { on_device.lookup(idv, outv, 1.f, /*check_ids=*/false, stream); });
#else
    throw DeviceError("embedding: this build has no CUDA");
#endif
  });
}

LinearRow grouped_routing_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer) {
  return timed_row(c, [&] {
    const int64_t T = c["T"], E = c["E"];
    DeepseekMoeConfig config;  // DeepSeek-V3's router
    config.scoring = DeepseekScoring::sigmoid;
    config.group_score = DeepseekGroupScore::top2_sum;
    config.top_k = c["top_k"];
    config.n_group = c["n_group"];
    config.topk_group = c["topk_group"];
    config.routed_scaling_factor = 2.5f;
    std::vector<float> logits(static_cast<size_t>(T * E)), bias(static_cast<size_t>(E));
    std::mt19937 rng(61);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& x : logits) x = normal(rng);
    for (float& x : bias) x = 0.1f * normal(rng);
    if (!device.is_cuda()) {
      MoeRouting out;
      return timer([&] { route_grouped_top_k(logits.data(), bias.data(), T, E, config, out); });
    }
    const DeviceBuffer lb(device, logits.size() * 4), bb(device, bias.size() * 4);
    lb.upload(logits.data(), logits.size() * 4, stream);
    bb.upload(bias.data(), bias.size() * 4, stream);
    const DeviceBuffer experts(device, size_t(T * config.top_k) * 4), weights(device, size_t(T * config.top_k) * 4);
    const TensorView lv = view_on(lb, DType::f32, {T, E}), bv = view_on(bb, DType::f32, {E});
    const TensorView ev = view_on(experts, DType::i32, {T, config.top_k});
    const TensorView wv = view_on(weights, DType::f32, {T, config.top_k});
    const GroupedRouteCudaOptions opts = grouped_route_options(config);
    check_route_grouped_top_k_cuda(lv, bv, ev, wv, opts);
#if ATTNZOO_WITH_CUDA
    return timer([&] { route_grouped_top_k_cuda(lv, bv, ev, wv, opts, stream); });
#else
    throw DeviceError("grouped routing: this build has no CUDA");
#endif
  });
}

}  // namespace

std::vector<LinearCase> kv_write_cases(Scale s) {
  std::vector<LinearCase> out;
  for (const KvFormat& f : kKvFormats) {
    if (s == Scale::tiny) {
      out.push_back({f.kernel, {{"T", 37}, {"Hkv", 2}, {"D", 128}, {"block_size", 16}}});
      continue;
    }
    // Llama-3-8B's layer (8 kv heads x 128): a decode step of 32 sequences (launch-bound) and a 4096-token prefill.
    for (int64_t T : {int64_t(32), int64_t(4096)})
      out.push_back({f.kernel, {{"T", T}, {"Hkv", 8}, {"D", 128}, {"block_size", 16}}});
  }
  return out;
}

double kv_write_bytes(const LinearCase& c) {
  const DType t = kv_dtype_of(c);
  const double rows = 2.0 * double(c["T"]) * double(c["Hkv"]);  // k and v
  return rows * (double(c["D"]) * 2 + double(c["D"]) * double(dtype_size(t)) + (is_quantized_kv(t) ? 4.0 : 0.0));
}

std::vector<LinearCase> embedding_cases(Scale s) {
  std::vector<LinearCase> out;
  for (QuantType t : kTableFormats) {
    const std::string kernel = std::string("embedding_") + quant_type_name(t);
    // Llama-3-8B's width; 32768 rows (a table past the L2 cache: 256 MiB in bf16); a 4096-token prefill's ids.
    const int64_t vocab = s == Scale::tiny ? 100 : 32768, dim = s == Scale::tiny ? 512 : 4096;
    const int64_t T = s == Scale::tiny ? 9 : 4096;
    out.push_back({kernel, {{"T", T}, {"vocab", vocab}, {"dim", dim}, {"row_bytes", *quant_row_bytes(t, dim)}}});
  }
  return out;
}

double embedding_bytes(const LinearCase& c) {
  return double(c["T"]) * (double(c["row_bytes"]) + 4.0 * double(c["dim"]));
}

std::vector<LinearCase> grouped_routing_cases(Scale s) {
  std::vector<LinearCase> out;
  // DeepSeek-V3: 256 routed experts in 8 groups, the best 4 groups, 8 experts; a decode step of 64 sequences and a
  // 4096-token prefill.
  for (int64_t T : s == Scale::tiny ? std::vector<int64_t>{5} : std::vector<int64_t>{64, 4096})
    out.push_back({"grouped_routing", {{"T", T}, {"E", 256}, {"n_group", 8}, {"topk_group", 4}, {"top_k", 8}}});
  return out;
}

double grouped_routing_bytes(const LinearCase& c) {
  return double(c["T"]) * (4.0 * double(c["E"]) + 8.0 * double(c["top_k"]));
}

const std::vector<BandwidthTable>& step_tables() {
  static const std::vector<BandwidthTable> tables = {
      {"kv_write", "paged KV write (bf16 k, v -> cache; slots scattered by block)", kv_write_cases, kv_write_row,
       kv_write_bytes},
      {"embedding", "embedding gather (f32 rows out, device ids)", embedding_cases, embedding_row, embedding_bytes},
      {"grouped_routing", "grouped routing (DeepSeek-V3, f32 logits; tokens/s = T / median)", grouped_routing_cases,
       grouped_routing_row, grouped_routing_bytes, "of logits + ids"}};
  return tables;
}

}  // namespace attnzoo::bench
