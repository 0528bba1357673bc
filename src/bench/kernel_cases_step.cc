#include "bench/kernel_cases_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "bench/case_io.h"
#include "core/quant_type.h"
#include "engine/sample_rows.h"
#include "engine/sampler.h"
#include "kernels/quant/gemv_tensors.h"
#include "kernels/quant/quant.h"
#include "kernels/quant/quantize.h"
#include "kernels/softmax/kv_write.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/deepseek_moe.h"
#include "layers/embedding.h"

namespace attnzoo::bench {

// N(0, 1) values with every row scaled by 2^(r % 7 - 3), so rows differ in magnitude (and quantized rows in
// scale), then quantized to `t` by the CPU's quantizer: the blocks a GGUF file holds.
std::vector<uint8_t> quantized_rows(QuantType t, int64_t rows, int64_t cols, uint32_t seed) {
  const HostArray f = random_array(DType::f32, {rows, cols}, seed);
  std::vector<float> x(size_t(rows * cols));
  std::memcpy(x.data(), f.bytes.data(), x.size() * 4);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[size_t(r * cols + c)] *= std::exp2(float(r % 7) - 3.f);
  return quantize_matrix(t, x.data(), rows, cols, nullptr, "case");
}

HostArray bytes_array(const std::vector<uint8_t>& bytes, int64_t rows) {
  HostArray a = make_array(DType::u8, {rows, int64_t(bytes.size()) / rows});
  a.bytes = bytes;
  return a;
}

namespace {

namespace fs = std::filesystem;

std::string entry_head(const std::string& name, const char* kind) {
  return "{\"name\": " + json_string(name) + ", \"kind\": " + json_string(kind);
}

// --- quantized GEMV: y [M, N] = x [M, K] w^T over w's GGUF blocks --------------------------------------------
std::string run_gemv(QuantType t, int64_t M, int64_t N, int64_t K, const fs::path& dir, Device device,
                     uint32_t seed, bool& refused) {
  const std::string stem = std::string("gemv_") + quant_type_name(t);
  const HostArray w = bytes_array(quantized_rows(t, N, K, seed), N);
  const HostArray x = random_array(DType::f32, {M, K}, seed + 1);
  const HostArray y = make_array(DType::f32, {M, N});
  write_npy(dir / (stem + "_w.npy"), w);
  write_npy(dir / (stem + "_x.npy"), x);
  const std::string entry = entry_head(stem, "gemv") + ", \"format\": " + json_string(quant_type_name(t)) +
                            ", \"M\": " + std::to_string(M) + ", \"N\": " + std::to_string(N) +
                            ", \"K\": " + std::to_string(K);
  return finish_case(entry, refused, [&] {
    const Placed dw = place(w, device), dx = place(x, device), dy = place(y, device);
    QuantMatrix wm;
    wm.data = dw.buffer.data();
    wm.type = t;
    wm.rows = N, wm.cols = K;
    wm.row_bytes = *quant_row_bytes(t, K);
    quant_gemv_tensors(wm, device, dx.view, dy.view);
    write_npy(dir / (stem + "_out.npy"), fetch(dy, y));
  });
}

// --- paged KV write: T new rows scattered into caches that already hold other tokens --------------------------
std::string run_kv_write(DType cache_dtype, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = std::string("kv_write_") + dtype_name(cache_dtype);
  const int64_t T = 45, H = 4, D = 128, bs = 16, num_blocks = 6;
  // Rows of differing magnitude (their scales differ), one all zero (a zero scale, zero bytes).
  HostArray k = random_array(DType::bf16, {T, H, D}, seed), v = random_array(DType::bf16, {T, H, D}, seed + 1);
  for (HostArray* a : {&k, &v})
    for (int64_t r = 0; r < T * H; ++r)
      for (int64_t d = 0; d < D; ++d) {
        const float x = r == 5 ? 0.f : load_as_f32(a->bytes.data(), DType::bf16, r * D + d) * std::exp2(float(r % 9) - 4.f);
        store_from_f32(a->bytes.data(), DType::bf16, r * D + d, x);
      }
  // Slots over shuffled physical slots, every fourth token padding (-1, skipped).
  std::vector<int64_t> free_slots(static_cast<size_t>(num_blocks * bs));
  std::iota(free_slots.begin(), free_slots.end(), int64_t(0));
  std::shuffle(free_slots.begin(), free_slots.end(), std::mt19937(seed + 2));
  HostArray slots = make_array(DType::i64, {T});
  auto* slot = reinterpret_cast<int64_t*>(slots.bytes.data());
  for (int64_t t = 0; t < T; ++t) slot[t] = t % 4 == 3 ? -1 : free_slots[size_t(t)];
  // The caches' earlier contents: a write must leave every slot it was not given as it was.
  const bool quantized = is_quantized_kv(cache_dtype);
  const HostArray k_cache = random_array(cache_dtype, {num_blocks, bs, H, D}, seed + 3);
  const HostArray v_cache = random_array(cache_dtype, {num_blocks, bs, H, D}, seed + 4);
  const HostArray k_scale = random_array(DType::f32, {num_blocks, bs, H}, seed + 5);
  const HostArray v_scale = random_array(DType::f32, {num_blocks, bs, H}, seed + 6);
  const std::pair<const char*, const HostArray*> inputs[] = {{"k", &k}, {"v", &v}, {"slot_mapping", &slots},
      {"k_cache_before", &k_cache}, {"v_cache_before", &v_cache}, {"k_scale_before", &k_scale},
      {"v_scale_before", &v_scale}};
  for (const auto& [what, a] : inputs)
    if (quantized || std::strstr(what, "scale") == nullptr) write_npy(dir / (stem + "_" + what + ".npy"), *a);
  const std::string entry = entry_head(stem, "kv_write") + ", \"dtype\": \"bfloat16\", \"kv_dtype\": " +
                            json_string(dtype_name(cache_dtype)) + ", \"block_size\": " + std::to_string(bs);
  return finish_case(entry, refused, [&] {
    const Placed dk = place(k, device), dv = place(v, device), dkc = place(k_cache, device), dvc = place(v_cache, device);
    const Placed dks = place(k_scale, device), dvs = place(v_scale, device);
    // A device cache takes its slot_mapping in the device's memory, the CPU's on the host.
    const Placed dslots = place(slots, device);
    write_kv_paged(dk.view, dv.view, static_cast<const int64_t*>(dslots.buffer.data()), dkc.view, dvc.view,
                   quantized ? dks.view : TensorView{}, quantized ? dvs.view : TensorView{});
    write_npy(dir / (stem + "_k_cache.npy"), fetch(dkc, k_cache));
    write_npy(dir / (stem + "_v_cache.npy"), fetch(dvc, v_cache));
    if (quantized) {
      write_npy(dir / (stem + "_k_scale.npy"), fetch(dks, k_scale));
      write_npy(dir / (stem + "_v_scale.npy"), fetch(dvs, v_scale));
    }
  });
}

// --- embedding gather: out [T, dim] = table[ids] * scale --------------------------------------------------------
std::string run_embedding(QuantType t, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = std::string("embedding_") + quant_type_name(t);
  const int64_t vocab = 50, dim = 512, T = 23;
  const float scale = 1.5f;
  const std::vector<uint8_t> bytes = quantized_rows(t, vocab, dim, seed);
  const HostArray table = bytes_array(bytes, vocab);
  HostArray ids = make_array(DType::i32, {T});
  auto* id = reinterpret_cast<int32_t*>(ids.bytes.data());
  std::mt19937 rng(seed + 1);
  for (int64_t i = 0; i < T; ++i) id[i] = i == 0 ? 0 : i == 1 ? int32_t(vocab - 1) : int32_t(rng() % uint32_t(vocab));
  const HostArray out = make_array(DType::f32, {T, dim});
  write_npy(dir / (stem + "_table.npy"), table);
  write_npy(dir / (stem + "_ids.npy"), ids);
  const std::string entry = entry_head(stem, "embedding") + ", \"format\": " + json_string(quant_type_name(t)) +
                            ", \"vocab\": " + std::to_string(vocab) + ", \"dim\": " + std::to_string(dim) +
                            ", \"scale\": " + number(scale);
  return finish_case(entry, refused, [&] {
    const Embedding embedding = Embedding::from_quantized(bytes.data(), bytes.size(), t, vocab, dim, "embedding");
    HostArray got = out;
    if (!device.is_cuda()) {
      embedding.lookup(id, T, reinterpret_cast<float*>(got.bytes.data()), scale);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dids = place(ids, device), dout = place(out, device);
      EmbeddingCuda(embedding, device).lookup(dids.view, dout.view, scale);
      got = fetch(dout, out);
#else
      throw DeviceError("embedding: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_out.npy"), got);
  });
}

// --- DeepSeek's grouped routing ----------------------------------------------------------------------------------
struct RoutingSpec {
  const char* name;
  int64_t T, E;
  DeepseekMoeConfig config;
  bool bias;
};

std::string run_grouped_routing(const RoutingSpec& c, const fs::path& dir, Device device, uint32_t seed,
                                bool& refused) {
  const int64_t K = c.config.top_k;
  const HostArray logits = random_array(DType::f32, {c.T, c.E}, seed);
  HostArray bias = random_array(DType::f32, {c.E}, seed + 1);
  for (int64_t e = 0; e < c.E; ++e)
    store_from_f32(bias.bytes.data(), DType::f32, e, c.bias ? 0.1f * load_as_f32(bias.bytes.data(), DType::f32, e) : 0.f);
  HostArray experts = make_array(DType::i32, {c.T, K}), weights = make_array(DType::f32, {c.T, K});
  const std::string stem = c.name;
  write_npy(dir / (stem + "_logits.npy"), logits);
  write_npy(dir / (stem + "_bias.npy"), bias);
  const DeepseekMoeConfig& g = c.config;
  const std::string entry =
      entry_head(stem, "grouped_routing") + ", \"scoring\": " +
      (g.scoring == DeepseekScoring::sigmoid ? "\"sigmoid\"" : "\"softmax\"") + ", \"group_score\": " +
      (g.group_score == DeepseekGroupScore::max ? "\"max\"" : "\"top2_sum\"") + ", \"top_k\": " + std::to_string(K) +
      ", \"n_group\": " + std::to_string(g.n_group) + ", \"topk_group\": " + std::to_string(g.topk_group) +
      ", \"norm_topk_prob\": " + (g.norm_topk_prob ? "true" : "false") +
      ", \"routed_scaling_factor\": " + number(g.routed_scaling_factor);
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      MoeRouting r;
      route_grouped_top_k(reinterpret_cast<const float*>(logits.bytes.data()),
                          reinterpret_cast<const float*>(bias.bytes.data()), c.T, c.E, g, r);
      std::memcpy(experts.bytes.data(), r.experts.data(), experts.bytes.size());
      std::memcpy(weights.bytes.data(), r.weights.data(), weights.bytes.size());
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dl = place(logits, device), db = place(bias, device);
      const Placed de = place(experts, device), dw = place(weights, device);
      route_grouped_top_k_cuda(dl.view, db.view, de.view, dw.view, grouped_route_options(g));
      experts = fetch(de, experts);
      weights = fetch(dw, weights);
#else
      throw DeviceError("grouped routing: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_experts.npy"), experts);
    write_npy(dir / (stem + "_weights.npy"), weights);
  });
}

std::vector<RoutingSpec> routing_specs() {
  DeepseekMoeConfig v3;  // DeepSeek-V3: sigmoid scores, a correction bias, groups by their two best, normalized
  v3.top_k = 8, v3.n_group = 8, v3.topk_group = 4, v3.routed_scaling_factor = 2.5f;
  DeepseekMoeConfig v2;  // DeepSeek-V2: softmax scores, groups by their best, the weights as chosen
  v2.scoring = DeepseekScoring::softmax;
  v2.group_score = DeepseekGroupScore::max;
  v2.top_k = 6, v2.n_group = 8, v2.topk_group = 3, v2.norm_topk_prob = false, v2.routed_scaling_factor = 16.f;
  return {{"grouped_routing_v3", 37, 256, v3, true}, {"grouped_routing_v2", 19, 160, v2, false}};
}

// --- sampling: one row per mode, greedy rows exact, seeded rows within their filters' set ------------------------
std::string run_sampling(const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = "sampling_rows";
  const int64_t V = 1000;
  // temperature, top_k, top_p per row: greedy twice, then top-k, top-p, both, and temperature alone.
  struct Mode { float temperature; int64_t top_k; float top_p; };
  const Mode modes[] = {{0.f, 0, 1.f}, {0.f, 0, 1.f}, {0.8f, 20, 1.f}, {1.f, 0, 0.5f}, {0.7f, 50, 0.9f}, {1.2f, 0, 1.f}};
  const int64_t B = int64_t(std::size(modes));
  HostArray logits = random_array(DType::f32, {B, V}, seed);
  for (int64_t i = 0; i < B * V; ++i)  // a model's spread of a few units
    store_from_f32(logits.bytes.data(), DType::f32, i, 3.f * load_as_f32(logits.bytes.data(), DType::f32, i));
  write_npy(dir / (stem + "_logits.npy"), logits);
  std::string rows = "[";
  for (int64_t b = 0; b < B; ++b)
    rows += std::string(b ? ", " : "") + "{\"temperature\": " + number(modes[b].temperature) + ", \"top_k\": " +
            std::to_string(modes[b].top_k) + ", \"top_p\": " + number(modes[b].top_p) + ", \"seed\": " +
            std::to_string(seed + uint32_t(b)) + "}";
  const std::string entry = entry_head(stem, "sampling") + ", \"rows\": " + rows + "]";
  return finish_case(entry, refused, [&] {
    std::vector<Sampler> samplers;
    samplers.reserve(size_t(B));
    std::vector<Sampler*> row_samplers;
    for (int64_t b = 0; b < B; ++b) {
      SamplingParams p;
      p.temperature = modes[b].temperature, p.top_k = modes[b].top_k, p.top_p = modes[b].top_p;
      p.seed = seed + uint32_t(b);
      row_samplers.push_back(&samplers.emplace_back(p));
    }
    const Placed dl = place(logits, device);
    const std::vector<std::span<const int32_t>> contexts(static_cast<size_t>(B));
    HostArray ids = make_array(DType::i32, {B});
    sample_rows(dl.view, row_samplers, contexts, {reinterpret_cast<int32_t*>(ids.bytes.data()), size_t(B)});
    write_npy(dir / (stem + "_ids.npy"), ids);
  });
}

}  // namespace

void write_step_cases(const fs::path& dir, Device device, uint32_t& seed,
                      const std::function<void(const std::string& entry, bool refused)>& add) {
  bool refused = false;
  auto run = [&](const std::string& entry) { add(entry, refused); };
  // M 3 rows; K 2304 = 9 super-blocks (not a power of two), N 40 rows.
  for (QuantType t : {QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K})
    run(run_gemv(t, 3, 40, 2304, dir, device, seed += 10, refused));
  for (DType t : {DType::bf16, DType::i8, DType::f8_e4m3}) run(run_kv_write(t, dir, device, seed += 10, refused));
  for (QuantType t : {QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K})
    run(run_embedding(t, dir, device, seed += 10, refused));
  for (const RoutingSpec& c : routing_specs()) run(run_grouped_routing(c, dir, device, seed += 10, refused));
  run(run_sampling(dir, device, seed += 10, refused));
}

}  // namespace attnzoo::bench
