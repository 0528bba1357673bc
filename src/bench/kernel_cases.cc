#include "bench/kernel_cases.h"

#include "bench/case_io.h"
#include "bench/kernel_cases_linear.h"
#include "bench/kernel_cases_layers.h"
#include "bench/kernel_cases_step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "kernels/softmax/kv_quant.h"

namespace attnzoo::bench {
namespace {

// The options every case may set, and their manifest fields.
struct Masking {
  bool causal = true;
  int64_t window = 0;
  float softcap = 0.f;
  bool sinks = false, alibi = false;
};

struct HeadExtras {
  std::vector<float> sinks, slopes;
};

HeadExtras head_extras(const Masking& m, int64_t Hq) {
  HeadExtras e;
  for (int64_t h = 0; h < Hq; ++h) {
    if (m.sinks) e.sinks.push_back(0.5f * float(h % 5) - 1.f);
    if (m.alibi) e.slopes.push_back(std::exp2(-8.f * float(h + 1) / float(Hq)));  // ALiBi's geometric slopes
  }
  return e;
}

AttentionOptions options_for(const Masking& m, const HeadExtras& e) {
  AttentionOptions o;
  o.causal = m.causal;
  o.window = m.window;
  o.softcap = m.softcap;
  o.sinks = m.sinks ? e.sinks.data() : nullptr;
  o.alibi_slopes = m.alibi ? e.slopes.data() : nullptr;
  return o;
}

std::string masking_json(const Masking& m, const HeadExtras& e) {
  return "\"causal\": " + std::string(m.causal ? "true" : "false") + ", \"window\": " + std::to_string(m.window) +
         ", \"softcap\": " + number(m.softcap) + ", \"sinks\": " + (m.sinks ? list(e.sinks) : "null") +
         ", \"alibi_slopes\": " + (m.alibi ? list(e.slopes) : "null");
}

struct PrefillCase {
  const char* name;
  DType dtype, out_dtype;
  int64_t Hq, Hkv, D;
  std::vector<int32_t> q_lens, k_lens;  // k_lens empty: the same as q_lens
  Masking mask;
};

struct DecodeCase {
  const char* name;
  DType kv_dtype;
  int64_t Tq, Hq, Hkv, D, block_size;
  std::vector<int32_t> cache_lens;
  Masking mask;
};

// Shapes chosen to cross every path's edges at a size torch's eager attention checks in seconds on a CPU:
// ragged sequences of 1 and odd lengths, GQA / MQA / MHA, every head dim, bottom-right alignment, windows
// shorter than the sequence, softcap, sinks and ALiBi, block sizes 16 and 64, bf16 / int8 / fp8 caches.
std::vector<PrefillCase> prefill_cases() {
  return {
      {"prefill_gqa_causal_d128", DType::bf16, DType::bf16, 8, 2, 128, {1, 77, 300, 129}, {}, {}},
      {"prefill_window_d64", DType::bf16, DType::f32, 4, 4, 64, {200, 65}, {}, {true, 48, 0.f, false, false}},
      {"prefill_mqa_softcap_sinks_d256", DType::f16, DType::f16, 4, 1, 256, {150, 3}, {}, {true, 0, 30.f, true, false}},
      {"prefill_alibi_noncausal_d128", DType::bf16, DType::f32, 4, 2, 128, {17, 90}, {100, 90}, {false, 0, 0.f, false, true}},
      {"prefill_bottom_right_causal_d128", DType::bf16, DType::bf16, 8, 8, 128, {64}, {256}, {}},
      {"prefill_mha_causal_d96", DType::bf16, DType::bf16, 4, 4, 96, {130, 7}, {}, {}},  // Phi-3 mini's head dim
  };
}

std::vector<DecodeCase> decode_cases() {
  return {
      {"decode_bf16_bs16", DType::bf16, 1, 8, 2, 128, 16, {1, 17, 500, 1000}, {}},
      {"decode_bf16_bs64_tq4_window", DType::bf16, 4, 8, 2, 128, 64, {300, 90}, {true, 100, 0.f, false, false}},
      {"decode_int8_bs16_sinks", DType::i8, 1, 4, 4, 128, 16, {257, 33}, {true, 0, 0.f, true, false}},
      {"decode_fp8_bs64_softcap_alibi_d64", DType::f8_e4m3, 1, 8, 1, 64, 64, {700, 64}, {true, 0, 50.f, false, true}},
      {"decode_int8_bs16_tq4_d96", DType::i8, 4, 16, 2, 96, 16, {400, 20}, {}},  // 96, GQA 8: two 16-row groups
  };
}

namespace fs = std::filesystem;

std::string run_prefill(const PrefillCase& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::vector<int32_t>& k_lens = c.k_lens.empty() ? c.q_lens : c.k_lens;
  const std::vector<int32_t> cu_q = offsets(c.q_lens), cu_k = offsets(k_lens);
  const HostArray q = random_array(c.dtype, {cu_q.back(), c.Hq, c.D}, seed);
  const HostArray k = random_array(c.dtype, {cu_k.back(), c.Hkv, c.D}, seed + 1);
  const HostArray v = random_array(c.dtype, {cu_k.back(), c.Hkv, c.D}, seed + 2);
  const HostArray o = make_array(c.out_dtype, {cu_q.back(), c.Hq, c.D});
  const HeadExtras extras = head_extras(c.mask, c.Hq);
  const std::string stem = c.name;
  for (const auto& [suffix, a] : {std::pair<const char*, const HostArray*>{"q", &q}, {"k", &k}, {"v", &v}})
    write_npy(dir / (stem + "_" + suffix + ".npy"), *a);
  std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"prefill\", \"dtype\": " + json_string(dtype_name(c.dtype)) +
                      ", \"out_dtype\": " + json_string(dtype_name(c.out_dtype)) + ", \"cu_seqlens_q\": " + list(cu_q) +
                      ", \"cu_seqlens_k\": " + list(cu_k) + ", " + masking_json(c.mask, extras);
  return finish_case(entry, refused, [&] {
    const Placed dq = place(q, device), dk = place(k, device), dv = place(v, device), dout = place(o, device);
    VarlenInfo varlen{cu_q.data(), c.k_lens.empty() ? nullptr : cu_k.data(), int64_t(c.q_lens.size())};
    attention_prefill(dq.view, dk.view, dv.view, dout.view, options_for(c.mask, extras), varlen);
    write_npy(dir / (stem + "_out.npy"), fetch(dout, o));
  });
}

std::string run_decode(const DecodeCase& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const int64_t B = int64_t(c.cache_lens.size());
  const int64_t longest = *std::max_element(c.cache_lens.begin(), c.cache_lens.end());
  const int64_t max_blocks = (longest + c.block_size - 1) / c.block_size;
  const int64_t num_blocks = B * max_blocks + 3;  // spare blocks: a kernel ignoring the table reads them
  // Shuffled physical blocks, -1 past each sequence's last used one (never read).
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  HostArray table = make_array(DType::i32, {B, max_blocks});
  auto* t = reinterpret_cast<int32_t*>(table.bytes.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < max_blocks; ++i)
      t[b * max_blocks + i] = i * c.block_size < c.cache_lens[size_t(b)] ? ids[size_t(b * max_blocks + i)] : -1;

  const bool quantized = c.kv_dtype == DType::i8 || c.kv_dtype == DType::f8_e4m3;
  const std::vector<int64_t> cache_shape{num_blocks, c.block_size, c.Hkv, c.D};
  HostArray caches[2], scales[2];
  for (int i = 0; i < 2; ++i) {
    if (!quantized) {
      caches[i] = random_array(c.kv_dtype, cache_shape, seed + 1 + uint32_t(i));
      continue;
    }
    // Rows of differing magnitude so their scales differ, quantized one (block, slot, head) row at a time.
    const HostArray f = random_array(DType::f32, cache_shape, seed + 1 + uint32_t(i));
    caches[i] = make_array(c.kv_dtype, cache_shape);
    scales[i] = make_array(DType::f32, {num_blocks, c.block_size, c.Hkv});
    auto* scale = reinterpret_cast<float*>(scales[i].bytes.data());
    std::vector<float> row(size_t(c.D));
    for (int64_t r = 0; r < num_blocks * c.block_size * c.Hkv; ++r) {
      const float factor = std::exp2(float(r % 7) - 3.f);
      for (int64_t d = 0; d < c.D; ++d) row[size_t(d)] = factor * reinterpret_cast<const float*>(f.bytes.data())[r * c.D + d];
      scale[r] = quantize_kv_row(row.data(), size_t(c.D), c.kv_dtype, caches[i].bytes.data() + r * c.D);
    }
  }
  const HostArray q = random_array(DType::bf16, {B, c.Tq, c.Hq, c.D}, seed + 3);
  const HostArray o = make_array(DType::f32, {B, c.Tq, c.Hq, c.D});
  const HeadExtras extras = head_extras(c.mask, c.Hq);
  const std::string stem = c.name;
  write_npy(dir / (stem + "_q.npy"), q);
  write_npy(dir / (stem + "_k_cache.npy"), caches[0]);
  write_npy(dir / (stem + "_v_cache.npy"), caches[1]);
  write_npy(dir / (stem + "_block_table.npy"), table);
  if (quantized) {
    write_npy(dir / (stem + "_k_scale.npy"), scales[0]);
    write_npy(dir / (stem + "_v_scale.npy"), scales[1]);
  }
  std::string entry = "{\"name\": " + json_string(stem) + ", \"kind\": \"decode\", \"dtype\": \"bfloat16\", \"kv_dtype\": " +
                      json_string(dtype_name(c.kv_dtype)) + ", \"out_dtype\": \"float32\", \"block_size\": " +
                      std::to_string(c.block_size) + ", \"cache_seqlens\": " + list(c.cache_lens) + ", " +
                      masking_json(c.mask, extras);
  return finish_case(entry, refused, [&] {
    const Placed dq = place(q, device), dout = place(o, device);
    const Placed dk = place(caches[0], device), dv = place(caches[1], device);
    std::optional<Placed> dks, dvs;
    KvCacheView cache;
    cache.k = dk.view;
    cache.v = dv.view;
    cache.cache_seqlens = c.cache_lens.data();
    cache.block_table = t;
    cache.max_blocks_per_seq = max_blocks;
    if (quantized) {
      dks.emplace(place(scales[0], device));
      dvs.emplace(place(scales[1], device));
      cache.k_scale = dks->view;
      cache.v_scale = dvs->view;
    }
    attention_decode(dq.view, cache, dout.view, options_for(c.mask, extras));
    write_npy(dir / (stem + "_out.npy"), fetch(dout, o));
  });
}

}  // namespace

CaseSummary write_kernel_cases(const std::string& dir_name, Device device) {
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec && fs::is_directory(dir), "--write-cases", "cannot create the directory '" + dir_name + "'");
  CaseSummary summary;
  std::string manifest = "{\"device\": " + json_string(device.str()) + ", \"cases\": [\n";
  uint32_t seed = 1000;
  auto add = [&](const std::string& entry, bool refused) {
    manifest += (summary.written + summary.refused ? ",\n  " : "  ") + entry;
    (refused ? summary.refused : summary.written) += 1;
  };
  for (const PrefillCase& c : prefill_cases()) {
    bool refused = false;
    const std::string e = run_prefill(c, dir, device, seed += 10, refused);
    add(e, refused);
  }
  for (const DecodeCase& c : decode_cases()) {
    bool refused = false;
    const std::string e = run_decode(c, dir, device, seed += 10, refused);
    add(e, refused);
  }
  write_linear_cases(dir, device, seed, add);
  write_step_cases(dir, device, seed, add);
  write_moe_cases(dir, device, seed, add);
  write_layer_cases(dir, device, seed, add);
  write_runner_cases(dir, device, seed, add);
  std::ofstream f(dir / "manifest.json");
  f << manifest << "\n]}\n";
  if (!f) throw std::runtime_error("write_kernel_cases: cannot write " + (dir / "manifest.json").string());
  return summary;
}

}  // namespace attnzoo::bench
