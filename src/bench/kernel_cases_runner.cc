// The runners' own kernels for `attnzoo bench kernels --write-cases` (kernel_cases_layers.h): RWKV-7's step
// kernels, gpt-oss's grouped bias and clamped SwiGLU, copy_head_rows and the MoE grouping, each through its CUDA
// launcher on a GPU and its CPU twin (cuda_rwkv7_bench.h, cuda_runner_bench.h, copy_head_rows) on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/case_io.h"
#include "bench/cuda_runner_bench.h"
#include "bench/cuda_rwkv7_bench.h"
#include "bench/kernel_cases_layers.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/head_rows_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/rwkv7_step_cuda.h"
#include "layers/gpt_oss_moe.h"
#include "layers/head_rows.h"
#include "layers/layer_norm.h"

namespace attnzoo::bench {
namespace {

namespace fs = std::filesystem;

std::string head(const std::string& name, const char* kind) {
  return "{\"name\": " + json_string(name) + ", \"kind\": " + json_string(kind);
}

HostArray scaled(std::vector<int64_t> shape, uint32_t seed, float scale, float shift = 0.f) {
  HostArray a = random_array(DType::f32, std::move(shape), seed);
  auto* v = reinterpret_cast<float*>(a.bytes.data());
  for (int64_t i = 0; i < a.numel(); ++i) v[i] = scale * v[i] + shift;
  return a;
}

HostArray i32_array(const std::vector<int32_t>& v) {
  HostArray a = make_array(DType::i32, {int64_t(v.size())});
  std::memcpy(a.bytes.data(), v.data(), v.size() * 4);
  return a;
}

template <typename T>
T* host(HostArray& a) { return reinterpret_cast<T*>(a.bytes.data()); }
template <typename T>
const T* host(const HostArray& a) { return reinterpret_cast<const T*>(a.bytes.data()); }

// --- RWKV-7: the token shift and its lerps over a ragged batch of pool slots ------------------------------------
struct ShiftSpec {
  const char* name;
  int64_t M, offset;  // lerps; the shift row's offset in a slot (0: the time mix's, C: the channel mix's)
  bool norm = false;  // the block's LayerNorm fused in first (the runner's attn_norm / ffn_norm)
};

std::string run_rwkv7_shift(const ShiftSpec& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = c.name;
  // A prefill piece, a decode token, an empty sequence, a longer piece, and a bucket's pad (slot -1: zeros shift
  // in, nothing is written); slots out of order, two of the pool's six left alone.
  const std::vector<int32_t> lens = {5, 1, 0, 9, 1}, slots = {3, 0, 5, 1, -1};
  const int64_t C = 96, M = c.M, stride = 2 * C, pool_rows = 6;
  const std::vector<int32_t> cu = offsets(lens);
  const int64_t T = cu.back();
  const HostArray x = scaled({T, C}, seed, 1.f), mixes = scaled({M, C}, seed + 1, 0.5f, 0.5f);
  const HostArray pool = scaled({pool_rows, stride}, seed + 2, 1.f);
  const HostArray norm_weight = scaled({C}, seed + 3, 0.5f, 1.f), norm_bias = scaled({C}, seed + 4, 0.2f);
  const float eps = 1e-5f;
  HostArray out = make_array(DType::bf16, {M, T, C}), pool_after = pool;
  const HostArray slots_a = i32_array(slots), cu_a = i32_array(cu);
  for (const auto& [what, a] : {std::pair{"x", &x}, {"mixes", &mixes}, {"shift_before", &pool}, {"slots", &slots_a},
                                {"cu_seqlens", &cu_a}})
    write_npy(dir / (stem + "_" + what + ".npy"), *a);
  if (c.norm) {
    write_npy(dir / (stem + "_norm_weight.npy"), norm_weight);
    write_npy(dir / (stem + "_norm_bias.npy"), norm_bias);
  }
  const std::string entry = head(stem, "rwkv7_shift_mix") + ", \"C\": " + std::to_string(C) + ", \"M\": " +
                            std::to_string(M) + ", \"offset\": " + std::to_string(c.offset) +
                            (c.norm ? ", \"norm_eps\": 1e-05" : "");
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      Batch batch;
      batch.cu_seqlens = cu, batch.state_slots = slots;
      batch.tokens.assign(size_t(T), 0);
      std::vector<float> pad(size_t(C), 0.f), h(host<float>(x), host<float>(x) + T * C);
      if (c.norm) layer_norm(host<float>(x), T, 1, C, host<float>(norm_weight), host<float>(norm_bias), eps, h.data());
      rwkv7_shift_mix_host(h.data(), batch, C, host<float>(mixes), M, [&](int64_t s) {
        return slots[size_t(s)] < 0 ? pad.data() : host<float>(pool_after) + slots[size_t(s)] * stride + c.offset;
      }, host<uint16_t>(out));
    } else {
#if ATTNZOO_WITH_CUDA
      std::vector<int32_t> seq_of;
      for (size_t s = 0; s < lens.size(); ++s) seq_of.insert(seq_of.end(), size_t(lens[s]), int32_t(s));
      const Placed dx = place(x, device), dm = place(mixes, device), dpool = place(pool, device),
                   dout = place(out, device), dslots = place(slots_a, device), dcu = place(cu_a, device),
                   dseq = place(i32_array(seq_of), device), dw = place(norm_weight, device),
                   db = place(norm_bias, device);
      Rwkv7TokenShift p;
      p.x = dx.view, p.mixes = dm.view, p.out = dout.view;
      if (c.norm) p.norm_weight = dw.view, p.norm_bias = db.view, p.eps = eps;
      p.shift = static_cast<float*>(dpool.buffer.data()) + c.offset, p.shift_stride = stride;
      p.slots = static_cast<const int32_t*>(dslots.buffer.data());
      p.seq_of = static_cast<const int32_t*>(dseq.buffer.data());
      p.cu_seqlens = static_cast<const int32_t*>(dcu.buffer.data());
      rwkv7_shift_mix_cuda(p);
      out = fetch(dout, out);
      pool_after = fetch(dpool, pool);
#else
      throw DeviceError("rwkv7_shift_mix: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_out.npy"), out);
    write_npy(dir / (stem + "_shift.npy"), pool_after);
  });
}

// --- RWKV-7: the activations, each with the output dtype the runner gives it --------------------------------------
struct ActSpec {
  const char* name;
  Rwkv7Activation act;
  DType out;
};

std::string run_rwkv7_activate(const ActSpec& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = std::string("rwkv7_activate_") + c.name;
  const int64_t n = 1000;
  const HostArray x = scaled({n}, seed, 4.f);  // past tanh's and sigmoid's knees both ways
  HostArray y = make_array(c.out, {n});
  write_npy(dir / (stem + "_x.npy"), x);
  const std::string entry = head(stem, "rwkv7_activate") + ", \"act\": " + json_string(c.name) +
                            ", \"out_dtype\": " + json_string(dtype_name(c.out));
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      rwkv7_activate_host(c.act, host<float>(x), n, y.bytes.data(), c.out);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dx = place(x, device), dy = place(y, device);
      rwkv7_activate_cuda(c.act, dx.view, dy.view);
      y = fetch(dy, y);
#else
      throw DeviceError("rwkv7_activate: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_y.npy"), y);
  });
}

// --- RWKV-7: the key preparation (the first layer's, fla's fused l2norm; a later one's, F.normalize) ------------
std::string run_rwkv7_keys(bool first_layer, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = first_layer ? "rwkv7_prepare_keys_first" : "rwkv7_prepare_keys";
  const int64_t T = 7, H = 3, K = 64, V = 32, HK = H * K, HV = H * V;
  const bool fused = first_layer;
  HostArray k = scaled({T, HK}, seed, 1.f), a = scaled({T, HK}, seed + 1, 2.f);
  const HostArray k_k = scaled({HK}, seed + 2, 0.5f, 1.f), k_a = scaled({HK}, seed + 3, 0.5f, 1.f);
  HostArray v = scaled({T, HV}, seed + 4, 1.f), v_first = scaled({T, HV}, seed + 5, 1.f);
  const HostArray v_gate = scaled({T, HV}, seed + 6, 2.f);
  HostArray a_rec = make_array(DType::f32, {T, HK});
  using Named = std::pair<const char*, const HostArray*>;
  for (const auto& [what, arr] : {Named{"k", &k}, {"a", &a}, {"k_k", &k_k}, {"k_a", &k_a}, {"v", &v}})
    write_npy(dir / (stem + "_" + what + ".npy"), *arr);
  if (!first_layer) {
    write_npy(dir / (stem + "_v_first.npy"), v_first);
    write_npy(dir / (stem + "_v_gate.npy"), v_gate);
  }
  const std::string entry = head(stem, "rwkv7_prepare_keys") + ", \"H\": " + std::to_string(H) +
                            ", \"first_layer\": " + (first_layer ? "true" : "false") +
                            ", \"fused_l2norm\": " + (fused ? "true" : "false");
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      rwkv7_prepare_keys_host(host<float>(k), host<float>(a), host<float>(a_rec), host<float>(k_k), host<float>(k_a),
                              host<float>(v), host<float>(v_first), first_layer ? nullptr : host<float>(v_gate), T, H,
                              K, V, fused);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dk = place(k, device), da = place(a, device), dar = place(a_rec, device), dkk = place(k_k, device),
                   dka = place(k_a, device), dv = place(v, device), dvf = place(v_first, device),
                   dvg = place(v_gate, device);
      Rwkv7Keys p;
      p.k = dk.view, p.a = da.view, p.a_rec = dar.view, p.k_k = dkk.view, p.k_a = dka.view, p.v = dv.view;
      p.v_first = dvf.view, p.heads = H, p.fused_l2norm = fused;
      if (!first_layer) p.v_gate = dvg.view;
      rwkv7_prepare_keys_cuda(p);
      k = fetch(dk, k), a = fetch(da, a), a_rec = fetch(dar, a_rec), v = fetch(dv, v), v_first = fetch(dvf, v_first);
#else
      throw DeviceError("rwkv7_prepare_keys: this build has no CUDA");
#endif
    }
    for (const auto& [what, arr] : {std::pair{"k_out", &k}, {"b_out", &a}, {"a_rec", &a_rec}, {"v_out", &v},
                                    {"v_first_out", &v_first}})
      write_npy(dir / (stem + "_" + what + ".npy"), *arr);
  });
}

// --- RWKV-7: the gated group norm and bonus before o_proj -------------------------------------------------------
std::string run_rwkv7_output(const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = "rwkv7_output";
  const int64_t T = 6, H = 3, K = 64, V = 48, HK = H * K, HV = H * V;
  const float eps = float(V) * 1e-5f;
  const HostArray o = scaled({T, HV}, seed, 2.f, 3.f), nw = scaled({HV}, seed + 1, 0.5f, 1.f),
                  nb = scaled({HV}, seed + 2, 0.2f), r = scaled({T, HK}, seed + 3, 1.f),
                  k = scaled({T, HK}, seed + 4, 1.f), r_k = scaled({HK}, seed + 5, 0.5f),
                  v = scaled({T, HV}, seed + 6, 1.f), g = scaled({T, HV}, seed + 7, 1.f);
  HostArray out = make_array(DType::bf16, {T, HV});
  for (const auto& [what, arr] : {std::pair{"o", &o}, {"norm_weight", &nw}, {"norm_bias", &nb}, {"r", &r}, {"k", &k},
                                  {"r_k", &r_k}, {"v", &v}, {"g", &g}})
    write_npy(dir / (stem + "_" + what + ".npy"), *arr);
  const std::string entry = head(stem, "rwkv7_output") + ", \"H\": " + std::to_string(H) + ", \"eps\": " + number(eps);
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      rwkv7_output_host(host<float>(o), host<float>(nw), host<float>(nb), host<float>(r), host<float>(k),
                        host<float>(r_k), host<float>(v), host<float>(g), T, H, K, V, eps, host<uint16_t>(out));
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed d_o = place(o, device), dnw = place(nw, device), dnb = place(nb, device), dr = place(r, device),
                   dk = place(k, device), drk = place(r_k, device), dv = place(v, device), dg = place(g, device),
                   dout = place(out, device);
      rwkv7_output_cuda(
          {d_o.view, dnw.view, dnb.view, dr.view, dk.view, drk.view, dv.view, dg.view, dout.view, H, eps});
      out = fetch(dout, out);
#else
      throw DeviceError("rwkv7_output: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_out.npy"), out);
  });
}

// --- gpt-oss: the grouped rows' expert bias and the clamped SwiGLU -----------------------------------------------
std::string run_gpt_oss(bool swiglu, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = swiglu ? "gpt_oss_swiglu" : "gpt_oss_grouped_bias";
  const int64_t n = 37, I = 40, N = 2 * I;
  const std::vector<int32_t> offs = {0, 10, 10, 22, 30, 37};  // five experts, the second with no rows
  const int64_t E = int64_t(offs.size()) - 1;
  const float alpha = 1.702f, limit = 7.f;
  // gate | up rows past the limit both ways (x 6), as the grouped GEMM writes them.
  HostArray y = scaled({n, N}, seed, swiglu ? 6.f : 1.f);
  const HostArray bias = scaled({E, N}, seed + 1, 1.f), offsets_a = i32_array(offs);
  HostArray out = make_array(DType::f32, {n, I});
  write_npy(dir / (stem + "_y.npy"), y);
  if (!swiglu) write_npy(dir / (stem + "_bias.npy"), bias), write_npy(dir / (stem + "_offsets.npy"), offsets_a);
  const std::string entry = swiglu ? head(stem, "gpt_oss_swiglu") + ", \"alpha\": " + number(alpha) +
                                         ", \"limit\": " + number(limit)
                                   : head(stem, "grouped_bias");
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {  // GptOssMoe's experts: each Linear's bias, then the activation per row
      float* ys = host<float>(y);
      for (int64_t e = 0; e < E && !swiglu; ++e)
        for (int64_t r = offs[size_t(e)]; r < offs[size_t(e + 1)]; ++r)
          for (int64_t i = 0; i < N; ++i) ys[r * N + i] += host<float>(bias)[e * N + i];
      for (int64_t r = 0; r < n && swiglu; ++r)
        gpt_oss_clamped_swiglu(ys + r * N, ys + r * N + I, alpha, limit, host<float>(out) + r * I, I);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed dy = place(y, device), db = place(bias, device), doff = place(offsets_a, device),
                   dout = place(out, device);
      if (swiglu) {
        TensorView gate = dy.view, up = dy.view;
        gate.shape[1] = up.shape[1] = I;
        up.data = static_cast<float*>(dy.buffer.data()) + I;
        gpt_oss_swiglu_cuda(gate, up, alpha, limit, dout.view);
        out = fetch(dout, out);
      } else {
        grouped_bias_cuda(dy.view, db.view, &doff.view);
        y = fetch(dy, y);
      }
#else
      throw DeviceError(stem + ": this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_out.npy"), swiglu ? out : y);
  });
}

// --- copy_head_rows: strided column slices through row indices, padded or broadcast -----------------------------
struct HeadRowsSpec {
  const char* name;
  int64_t src_rows, src_heads, src_width, cols;   // src [src_rows, src_heads, src_width], columns [0, cols) read
  int64_t dst_rows, heads, dst_width, col0, width;  // dst [dst_rows, heads, dst_width], [col0, col0 + width) written
  std::vector<int32_t> src_index, dst_index;      // empty: rows in order
};

std::string run_head_rows(const HeadRowsSpec& c, const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = c.name;
  const HostArray src = random_array(DType::bf16, {c.src_rows, c.src_heads, c.src_width}, seed);
  HostArray dst = random_array(DType::bf16, {c.dst_rows, c.heads, c.dst_width}, seed + 1);
  const int64_t rows = c.src_index.empty() ? c.src_rows : int64_t(c.src_index.size());
  write_npy(dir / (stem + "_src.npy"), src);
  write_npy(dir / (stem + "_dst_before.npy"), dst);
  if (!c.src_index.empty()) write_npy(dir / (stem + "_src_rows.npy"), i32_array(c.src_index));
  if (!c.dst_index.empty()) write_npy(dir / (stem + "_dst_rows.npy"), i32_array(c.dst_index));
  const std::string entry = head(stem, "head_rows") + ", \"dtype\": \"bfloat16\", \"cols\": " + std::to_string(c.cols) +
                            ", \"col0\": " + std::to_string(c.col0) + ", \"width\": " + std::to_string(c.width) +
                            ", \"src_rows\": " + (c.src_index.empty() ? "false" : "true") +
                            ", \"dst_rows\": " + (c.dst_index.empty() ? "false" : "true");
  // The column slices of the whole arrays, their row and head strides the arrays'.
  auto views = [&](void* s, void* d, Device dev) {
    HeadRowCopy copy;
    copy.src = TensorView::contiguous(s, DType::bf16, {c.src_rows, c.src_heads, c.src_width});
    copy.src.shape[2] = c.cols;
    copy.dst = TensorView::contiguous(static_cast<uint16_t*>(d) + c.col0, DType::bf16,
                                      {c.dst_rows, c.heads, c.dst_width});
    copy.dst.shape[2] = c.width;
    copy.src.device = copy.dst.device = dev;
    copy.src.shape[0] = c.src_rows, copy.dst.shape[0] = c.dst_rows;
    copy.rows = rows;
    return copy;
  };
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      HeadRowCopy copy = views(const_cast<uint8_t*>(src.bytes.data()), dst.bytes.data(), device);
      copy.src_rows = c.src_index.empty() ? nullptr : c.src_index.data();
      copy.dst_rows = c.dst_index.empty() ? nullptr : c.dst_index.data();
      copy_head_rows(copy);
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed ds = place(src, device), dd = place(dst, device);
      const Placed si = place(i32_array(c.src_index.empty() ? std::vector<int32_t>{0} : c.src_index), device);
      const Placed di = place(i32_array(c.dst_index.empty() ? std::vector<int32_t>{0} : c.dst_index), device);
      HeadRowCopy copy = views(ds.buffer.data(), dd.buffer.data(), device);
      copy.src_rows = c.src_index.empty() ? nullptr : static_cast<const int32_t*>(si.buffer.data());
      copy.dst_rows = c.dst_index.empty() ? nullptr : static_cast<const int32_t*>(di.buffer.data());
      copy_head_rows_cuda(copy);
      dst = fetch(dd, dst);
#else
      throw DeviceError("copy_head_rows: this build has no CUDA");
#endif
    }
    write_npy(dir / (stem + "_dst.npy"), dst);
  });
}

// --- the MoE grouping by expert, past one CTA's 2048 entries -----------------------------------------------------
std::string run_moe_group(const fs::path& dir, Device device, uint32_t seed, bool& refused) {
  const std::string stem = "moe_group";
  const int64_t T = 300, k = 8, E = 16, n = T * k;  // 2400 entries: the count / scan / scatter launches
  HostArray ids = make_array(DType::i32, {T, k});
  std::mt19937 rng(seed);
  std::vector<int32_t> all;
  for (int32_t e = 0; e < E; ++e)
    if (e != 5) all.push_back(e);  // expert 5 never chosen: an empty segment; the others' loads differ
  for (int64_t t = 0; t < T; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    std::sort(all.begin(), all.begin() + (t % 3 == 0 ? 4 : 0));  // low ids favoured on every third token
    std::copy_n(all.begin(), k, host<int32_t>(ids) + t * k);
  }
  const int64_t tile_rows = moe_tile_rows(moe_tile(n, E));
  HostArray off = make_array(DType::i32, {E + 1}), tiles = make_array(DType::i32, {E + 1});
  HostArray source = make_array(DType::i32, {n}), dest = make_array(DType::i32, {n});
  write_npy(dir / (stem + "_experts.npy"), ids);
  const std::string entry = head(stem, "moe_group") + ", \"E\": " + std::to_string(E) + ", \"tile_rows\": " +
                            std::to_string(tile_rows);
  return finish_case(entry, refused, [&] {
    if (!device.is_cuda()) {
      moe_group_host(host<int32_t>(ids), n, E, tile_rows, host<int32_t>(off), host<int32_t>(tiles),
                     host<int32_t>(source), host<int32_t>(dest));
    } else {
#if ATTNZOO_WITH_CUDA
      const Placed di = place(ids, device), doff = place(off, device), dt = place(tiles, device),
                   ds = place(source, device), dd = place(dest, device);
      const int64_t scratch = moe_group_scratch(n, E);
      const Placed dc = place(make_array(DType::i32, {std::max<int64_t>(scratch, 1)}), device);
      TensorView counts = dc.view;
      counts.shape[0] = scratch;
      const MoeGroupingCuda g{doff.view, dt.view, ds.view, dd.view, scratch > 0 ? counts : TensorView{}};
      moe_group_cuda(di.view, E, tile_rows, g);
      off = fetch(doff, off), tiles = fetch(dt, tiles), source = fetch(ds, source), dest = fetch(dd, dest);
#else
      throw DeviceError("moe_group: this build has no CUDA");
#endif
    }
    for (const auto& [what, arr] :
         {std::pair{"offsets", &off}, {"tiles", &tiles}, {"source", &source}, {"dest", &dest}})
      write_npy(dir / (stem + "_" + what + ".npy"), *arr);
  });
}

}  // namespace

void write_runner_cases(const fs::path& dir, Device device, uint32_t& seed,
                        const std::function<void(const std::string& entry, bool refused)>& add) {
  bool refused = false;
  auto run = [&](const std::string& entry) { add(entry, refused); };
  for (const ShiftSpec& c : {ShiftSpec{"rwkv7_shift_mix_time", 6, 0}, ShiftSpec{"rwkv7_shift_mix_channel", 1, 96},
                             ShiftSpec{"rwkv7_norm_shift_mix_time", 6, 0, true}})
    run(run_rwkv7_shift(c, dir, device, seed += 10, refused));
  // Each with the output dtype the runner gives it: the LoRAs' middles (tanh, sigmoid) and relu^2 bf16, the decay
  // f32 in place; none, the kernel's plain rounding to bf16.
  const ActSpec acts[] = {{"none", Rwkv7Activation::none, DType::bf16},
                          {"tanh", Rwkv7Activation::tanh, DType::bf16},
                          {"sigmoid", Rwkv7Activation::sigmoid, DType::bf16},
                          {"decay", Rwkv7Activation::decay, DType::f32},
                          {"relu2", Rwkv7Activation::relu2, DType::bf16}};
  for (const ActSpec& c : acts) run(run_rwkv7_activate(c, dir, device, seed += 10, refused));
  for (bool first : {true, false}) run(run_rwkv7_keys(first, dir, device, seed += 10, refused));
  run(run_rwkv7_output(dir, device, seed += 10, refused));
  for (bool swiglu : {false, true}) run(run_gpt_oss(swiglu, dir, device, seed += 10, refused));
  // MLA's gathers: 5 rows picked (one read twice) into a padded slice of K; the rope key broadcast to every head.
  const HeadRowsSpec head_rows[] = {
      {"head_rows_gather_pad", 10, 4, 96, 64, 8, 4, 160, 16, 128, {9, 0, 4, 4, 7}, {3, 7, 0, 5, 1}},
      {"head_rows_broadcast", 6, 1, 32, 32, 6, 4, 100, 40, 48, {}, {}}};
  for (const HeadRowsSpec& c : head_rows) run(run_head_rows(c, dir, device, seed += 10, refused));
  run(run_moe_group(dir, device, seed += 10, refused));
}

}  // namespace attnzoo::bench
