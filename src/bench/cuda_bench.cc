#include "bench/cuda_bench.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/decode.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "bench/device_fill.h"
#include "bench/json_array.h"

namespace attnzoo::bench {
namespace {

CudaDecodeRow time_decode(const CudaDecodeCase& c, Device device, Stream stream, int reps) {
  const int64_t blocks_per_seq = (c.context + c.block_size - 1) / c.block_size, num_blocks = c.B * blocks_per_seq;
  const size_t rows = size_t(num_blocks * c.block_size * c.Hkv);
  const size_t cache_bytes = rows * size_t(c.D) * dtype_size(c.kv_dtype);
  DeviceBuffer k = noise_buffer(device, cache_bytes, 4, stream), v = noise_buffer(device, cache_bytes, 5, stream);
  const bool scaled = c.kv_dtype == DType::i8 || c.kv_dtype == DType::f8_e4m3;
  DeviceBuffer k_scale, v_scale;
  if (scaled) {
    const std::vector<float> ones(rows, 1.f / 64);
    k_scale = DeviceBuffer(device, rows * 4);
    v_scale = DeviceBuffer(device, rows * 4);
    k_scale.upload(ones.data(), rows * 4, stream);
    v_scale.upload(ones.data(), rows * 4, stream);
  }
  const size_t nq = size_t(c.B * c.Hq * c.D);
  DeviceBuffer q(device, nq * 2), o(device, nq * 2);
  q.upload(noise_bf16(nq, 6).data(), nq * 2, stream);
  // Each sequence's blocks scattered over the cache (a pool after some churn), not laid end to end.
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) table[size_t(i)] = int32_t((i * 7919) % num_blocks);
  const std::vector<int32_t> seqlens(size_t(c.B), int32_t(c.context));
  KvCacheView cache;
  cache.k = view_on(k, c.kv_dtype, {num_blocks, c.block_size, c.Hkv, c.D});
  cache.v = view_on(v, c.kv_dtype, {num_blocks, c.block_size, c.Hkv, c.D});
  if (scaled) {
    cache.k_scale = view_on(k_scale, DType::f32, {num_blocks, c.block_size, c.Hkv});
    cache.v_scale = view_on(v_scale, DType::f32, {num_blocks, c.block_size, c.Hkv});
  }
  cache.cache_seqlens = seqlens.data();
  cache.block_table = table.data();
  cache.max_blocks_per_seq = blocks_per_seq;
  const TensorView qv = view_on(q, DType::bf16, {c.B, 1, c.Hq, c.D}), ov = view_on(o, DType::bf16, {c.B, 1, c.Hq, c.D});
  AttentionOptions opts;
  // Timed as an engine calls it: the host checks, plan and metadata upload of each step included.
  const Timing t = summarize(time_on_stream([&] { attention_decode(qv, cache, ov, opts); }, stream, 2, reps));
  return {c, t.median_s, t.min_s, decode_cache_bytes(c) / t.median_s * 1e-9};
}

CudaStateDecodeRow time_state_decode(const CudaStateDecodeCase& c, Device device, Stream stream, int reps) {
  const size_t nqk = size_t(c.B * c.H * c.K), nv = size_t(c.B * c.H * c.V), nh = size_t(c.B * c.H);
  DeviceBuffer q(device, nqk * 2), k(device, nqk * 2), v(device, nv * 2), o(device, nv * 2);
  DeviceBuffer g(device, nh * 4), beta(device, nh * 2), state(device, nh * size_t(c.K * c.V) * 4);
  q.upload(noise_bf16(nqk, 7).data(), nqk * 2, stream);
  k.upload(noise_bf16(nqk, 8).data(), nqk * 2, stream);
  v.upload(noise_bf16(nv, 9).data(), nv * 2, stream);
  const std::vector<float> decay(nh, -0.05f);
  g.upload(decay.data(), nh * 4, stream);
  const std::vector<uint16_t> half(nh, 0x3F00);  // bf16 0.5
  beta.upload(half.data(), nh * 2, stream);
  const std::vector<float> zeros(nh * size_t(c.K * c.V), 0.f);
  state.upload(zeros.data(), zeros.size() * 4, stream);
  DeltaArgs a;
  a.q = view_on(q, DType::bf16, {c.B, 1, c.H, c.K});
  a.k = view_on(k, DType::bf16, {c.B, 1, c.H, c.K});
  a.v = view_on(v, DType::bf16, {c.B, 1, c.H, c.V});
  a.g = view_on(g, DType::f32, {c.B, 1, c.H});
  a.beta = view_on(beta, DType::bf16, {c.B, 1, c.H});
  a.o = view_on(o, DType::bf16, {c.B, 1, c.H, c.V});
  a.initial_state = a.final_state = view_on(state, DType::f32, {c.B, c.H, c.K, c.V});  // in place, as a state slot
  a.use_qk_l2norm_in_kernel = true;
  a.check_values = false;  // what an engine's decode step passes: the scans would read the state again
  const Timing t = summarize(time_on_stream([&] { recurrent_gated_delta_rule(a); }, stream, 2, reps));
  return {c, t.median_s, t.min_s, state_decode_bytes(c) / t.median_s * 1e-9};
}

// The Hopper prefill under one schedule, whatever ATTNZOO_CUDA_PREFILL_SCHEDULE says: planned once, its
// metadata uploaded once, then launched as a model's layers launch it (attention_prefill would upload it per
// call; a few kilobytes beside milliseconds of kernel).
Timing time_prefill_schedule(const AttentionProblem& p, cuda_prefill::PrefillSchedule schedule, Device device,
                             Stream stream, int reps) {
#if ATTNZOO_WITH_CUDA
  PreparedPrefillCuda prepared = prepare_attention_prefill_cuda(p);
  prepared.schedule = schedule;
  DeviceBuffer metadata(device, prepared.launch.metadata.size());
  metadata.upload(prepared.launch.metadata.data(), metadata.bytes(), stream);
  const PrefillTensors tensors{p.q, p.k, p.v, p.o};
  return summarize(time_on_stream(
      [&] { launch_prepared_prefill_cuda(prepared, metadata.as<unsigned char>(), tensors, stream); }, stream, 2, reps));
#else
  (void)p, (void)schedule, (void)device, (void)stream, (void)reps;
  throw DeviceError("prefill: this build has no CUDA");
#endif
}

}  // namespace

std::vector<CudaPrefillCase> cuda_prefill_cases(Scale s) {
  if (s == Scale::tiny) return {{1, 256, 4, 2, 128, true}};
  if (s == Scale::quick) return {{1, 2048, 32, 8, 128, true}, {1, 2048, 32, 8, 64, true}};
  // The headline shapes (GQA 32 / 8, D = 128, causal at 4k x 4 and 16k x 1; under both of the Hopper kernel's
  // schedules, where causal tiles differ most in cost), then the other head dims (96: Phi-3 mini's MHA 32 / 32)
  // and the non-causal form.
  return {{4, 4096, 32, 8, 128, true, true},  {1, 16384, 32, 8, 128, true, true}, {4, 4096, 32, 8, 64, true},
          {4, 4096, 32, 32, 96, true},       {4, 4096, 32, 8, 256, true},        {4, 4096, 32, 8, 128, false}};
}

double prefill_flops(const CudaPrefillCase& c) {
  const double pairs = c.causal ? double(c.T) * double(c.T + 1) / 2 : double(c.T) * double(c.T);
  return 4.0 * double(c.B) * double(c.Hq) * double(c.D) * pairs;
}

std::vector<CudaDecodeCase> cuda_decode_cases(Scale s) {
  if (s == Scale::tiny) return {{2, 512, 4, 2, 128, 16, DType::bf16}};
  if (s == Scale::quick) return {{8, 4096, 32, 8, 128, 16, DType::bf16}};
  // The headline shape (B = 32 at 32k, GQA 32 / 8, D = 128) in vLLM's default block of 16 and FlashInfer's
  // larger pages, then the one-byte caches (half the bytes, the same rows).
  // Last, Phi-3 mini's MHA 32 / 32 at D = 96 (16-row CTAs), at 8k: 3.2 GB of cache.
  return {{32, 32768, 32, 8, 128, 16, DType::bf16},
          {32, 32768, 32, 8, 128, 64, DType::bf16},
          {32, 32768, 32, 8, 128, 16, DType::i8},
          {32, 32768, 32, 8, 128, 16, DType::f8_e4m3},
          {32, 8192, 32, 32, 96, 16, DType::bf16}};
}

double decode_cache_bytes(const CudaDecodeCase& c) {
  const bool scaled = c.kv_dtype == DType::i8 || c.kv_dtype == DType::f8_e4m3;
  const double row = double(c.D) * double(dtype_size(c.kv_dtype)) + (scaled ? 4.0 : 0.0);
  return 2.0 * double(c.B) * double(c.context) * double(c.Hkv) * row;
}

std::vector<CudaStateDecodeCase> cuda_state_decode_cases(Scale s) {
  if (s == Scale::tiny) return {{2, 4, 128, 128}};
  if (s == Scale::quick) return {{32, 32, 128, 128}};
  // The shape (B 32, H 32, K = V = 128: 64 MiB of state), then a small batch, where launch latency
  // rather than bandwidth decides.
  return {{32, 32, 128, 128}, {1, 32, 128, 128}};
}

double state_decode_bytes(const CudaStateDecodeCase& c) { return 2.0 * double(c.B * c.H * c.K * c.V) * 4.0; }

double measure_copy_gbps(Device device, size_t bytes, int reps) {
  const Stream stream = current_stream();
  DeviceBuffer a(device, bytes), b(device, bytes);
  const Timing t = summarize(
      time_on_stream([&] { copy_bytes(b.data(), device, a.data(), device, bytes, stream); }, stream, 2, reps));
  return 2.0 * double(bytes) / t.median_s * 1e-9;
}

CudaKernelReport run_cuda_kernel_report(Scale s, Device device) {
  require(device.is_cuda(), "--device", "the CUDA table needs a CUDA device");
  const CudaDeviceInfo info = cuda_device_info(device.index);
  CudaKernelReport r;
  char name[256];
  std::snprintf(name, sizeof name, "%s %s, sm_%d%d, %d SMs, %.1f GiB", device.str().c_str(), info.name.c_str(),
                info.sm_major, info.sm_minor, info.multiprocessors, double(info.memory_bytes) / double(1ull << 30));
  r.device = name;
  const Stream stream = current_stream();
  const int reps = s == Scale::full ? 20 : 5;

  // Copy bandwidth: 1 GiB (64 MiB at the smaller scales) device to device.
  r.copy_gbps = measure_copy_gbps(device, s == Scale::full ? (size_t(1) << 30) : (size_t(64) << 20), reps);

  for (const CudaPrefillCase& c : cuda_prefill_cases(s)) {
    const size_t nq = size_t(c.B * c.T * c.Hq * c.D), nkv = size_t(c.B * c.T * c.Hkv * c.D);
    DeviceBuffer q(device, nq * 2), k(device, nkv * 2), v(device, nkv * 2), o(device, nq * 2);
    q.upload(noise_bf16(nq, 1).data(), nq * 2, stream);
    k.upload(noise_bf16(nkv, 2).data(), nkv * 2, stream);
    v.upload(noise_bf16(nkv, 3).data(), nkv * 2, stream);
    const TensorView qv = view_on(q, DType::bf16, {c.B, c.T, c.Hq, c.D}), kv = view_on(k, DType::bf16, {c.B, c.T, c.Hkv, c.D});
    const TensorView vv = view_on(v, DType::bf16, {c.B, c.T, c.Hkv, c.D}), ov = view_on(o, DType::bf16, {c.B, c.T, c.Hq, c.D});
    AttentionOptions opts;
    opts.causal = c.causal;
    const AttentionProblem problem = make_prefill_problem(qv, kv, vv, ov, opts, {});
    // The launcher's own choice, from the same inputs (capability, coverage, ATTNZOO_CUDA_PREFILL, and the Hopper
    // kernel's ATTNZOO_CUDA_PREFILL_SCHEDULE).
    const cuda_prefill::PrefillPath path =
        cuda_prefill::choose_prefill_path(problem, info.sm_major, std::getenv("ATTNZOO_CUDA_PREFILL"));
    const bool hopper = path == cuda_prefill::PrefillPath::sm90;
    const std::string own_schedule =
        hopper ? cuda_prefill::prefill_schedule_name(
                     cuda_prefill::choose_prefill_schedule(std::getenv("ATTNZOO_CUDA_PREFILL_SCHEDULE")))
               : "none";
    if (!(hopper && c.both_schedules)) {
      const Timing t = summarize(time_on_stream([&] { attention_prefill(qv, kv, vv, ov, opts); }, stream, 2, reps));
      r.prefill.push_back({c, t.median_s, t.min_s, prefill_flops(c) / t.median_s * 1e-12,
                           cuda_prefill::prefill_path_name(path), own_schedule});
      continue;
    }
    for (const auto schedule : {cuda_prefill::PrefillSchedule::static_stride, cuda_prefill::PrefillSchedule::dynamic}) {
      const Timing t = time_prefill_schedule(problem, schedule, device, stream, reps);
      r.prefill.push_back({c, t.median_s, t.min_s, prefill_flops(c) / t.median_s * 1e-12,
                           cuda_prefill::prefill_path_name(path), cuda_prefill::prefill_schedule_name(schedule)});
    }
  }

  for (const CudaDecodeCase& c : cuda_decode_cases(s)) r.decode.push_back(time_decode(c, device, stream, reps));
  for (const CudaStateDecodeCase& c : cuda_state_decode_cases(s))
    r.gated_delta_decode.push_back(time_state_decode(c, device, stream, reps));
  const RowTimer timer = [&](const std::function<void()>& launch) {
    return summarize(time_on_stream(launch, stream, 2, reps));
  };
  r.state_decode = run_linear_decode_rows(s, device, stream, timer);
  r.chunk_prefill = run_chunk_prefill_rows(s, device, stream, timer);
  r.mla_decode = run_mla_decode_rows(s, device, stream, timer);
  r.quant_gemv = run_quant_gemv_rows(s, device, stream, timer);
  r.sampling = run_sampling_rows(s, device, stream, timer);
  r.gemm = run_gemm_rows(s, device, stream, timer);
  r.conv_prefill = run_conv_prefill_rows(s, device, stream, timer);
  r.step = run_bandwidth_tables(step_tables(), s, device, stream, timer);
  r.moe_router = run_moe_router_rows(s, device, stream, timer);
  r.moe_experts = run_moe_experts_rows(s, device, stream, timer);
  r.layer = run_bandwidth_tables(layer_tables(), s, device, stream, timer);
  r.runner = run_bandwidth_tables(runner_tables(), s, device, stream, timer);
  return r;
}

std::string format_cuda_text(const CudaKernelReport& r) {
  std::string s = "device       " + r.device + "\n";
  char line[256];
  std::snprintf(line, sizeof line, "copy         %.0f GB/s (device to device, read + write)\n", r.copy_gbps);
  s += line;
  s += "prefill (bf16, GQA, FlashAttention FLOP count)   median ms   TFLOP/s   kernel / schedule\n";
  for (const CudaPrefillRow& row : r.prefill) {
    const CudaPrefillCase& c = row.shape;
    std::snprintf(line, sizeof line, "  B=%-2lld T=%-6lld Hq=%lld Hkv=%lld D=%-3lld %-10s %10.3f %9.1f   %s %s\n",
                  (long long)c.B, (long long)c.T, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  c.causal ? "causal" : "non-causal", row.median_s * 1e3, row.tflops, row.path.c_str(),
                  row.schedule.c_str());
    s += line;
  }
  s += "paged decode (1 token, bf16 q)                                median ms   GB/s of cache read\n";
  for (const CudaDecodeRow& row : r.decode) {
    const CudaDecodeCase& c = row.shape;
    std::snprintf(line, sizeof line, "  B=%-2lld ctx=%-6lld Hq=%lld Hkv=%lld D=%-3lld block=%-3lld %-14s %10.3f %9.0f\n",
                  (long long)c.B, (long long)c.context, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  (long long)c.block_size, dtype_name(c.kv_dtype), row.median_s * 1e3, row.gbps);
    s += line;
  }
  s += "gated delta rule decode (1 token, f32 state in place)       median ms   GB/s of state read + written   of copy\n";
  for (const CudaStateDecodeRow& row : r.gated_delta_decode) {
    const CudaStateDecodeCase& c = row.shape;
    std::snprintf(line, sizeof line, "  B=%-2lld H=%lld K=%lld V=%-30lld %10.3f %9.0f %8.0f%%\n", (long long)c.B,
                  (long long)c.H, (long long)c.K, (long long)c.V, row.median_s * 1e3, row.gbps,
                  r.copy_gbps > 0 ? 100 * row.gbps / r.copy_gbps : 0.0);
    s += line;
  }
  return s + format_linear_decode_text(r.state_decode, r.copy_gbps) + format_chunk_prefill_text(r.chunk_prefill) +
         format_mla_decode_text(r.mla_decode, r.copy_gbps) + format_sampling_text(r.sampling, r.copy_gbps) +
         format_quant_gemv_text(r.quant_gemv, r.copy_gbps) +
         format_gemm_text(r.gemm) + format_conv_prefill_text(r.conv_prefill, r.copy_gbps) +
         format_bandwidth_tables_text(r.step, r.copy_gbps) +
         format_moe_text(r.moe_router, r.moe_experts, r.copy_gbps, best_gemm_tflops(r.gemm)) +
         format_bandwidth_tables_text(r.layer, r.copy_gbps) + format_bandwidth_tables_text(r.runner, r.copy_gbps);
}

std::string format_cuda_json(const CudaKernelReport& r) {
  const std::string prefill = json_array(r.prefill, [](const CudaPrefillRow& row) {
    const CudaPrefillCase& c = row.shape;
    char item[320];
    std::snprintf(item, sizeof item,
                  "{\"B\": %lld, \"T\": %lld, \"Hq\": %lld, \"Hkv\": %lld, \"D\": %lld, \"causal\": %s, "
                  "\"median_s\": %.9g, \"min_s\": %.9g, \"tflops\": %.6g, \"kernel\": \"%s\", \"schedule\": \"%s\"}",
                  (long long)c.B, (long long)c.T, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  c.causal ? "true" : "false", row.median_s, row.min_s, row.tflops, row.path.c_str(),
                  row.schedule.c_str());
    return std::string(item);
  });
  const std::string decode = json_array(r.decode, [](const CudaDecodeRow& row) {
    const CudaDecodeCase& c = row.shape;
    char item[320];
    std::snprintf(item, sizeof item,
                  "{\"B\": %lld, \"context\": %lld, \"Hq\": %lld, \"Hkv\": %lld, \"D\": %lld, \"block_size\": %lld, "
                  "\"kv_dtype\": \"%s\", \"cache_bytes\": %.0f, \"median_s\": %.9g, \"min_s\": %.9g, \"gbps\": %.6g}",
                  (long long)c.B, (long long)c.context, (long long)c.Hq, (long long)c.Hkv, (long long)c.D,
                  (long long)c.block_size, dtype_name(c.kv_dtype), decode_cache_bytes(c), row.median_s, row.min_s,
                  row.gbps);
    return std::string(item);
  });
  const std::string gated_delta_decode = json_array(r.gated_delta_decode, [&](const CudaStateDecodeRow& row) {
    const CudaStateDecodeCase& c = row.shape;
    char item[320];
    std::snprintf(item, sizeof item,
                  "{\"B\": %lld, \"H\": %lld, \"K\": %lld, \"V\": %lld, \"state_bytes\": %.0f, \"median_s\": %.9g, "
                  "\"min_s\": %.9g, \"gbps\": %.6g, \"copy_fraction\": %.6g}",
                  (long long)c.B, (long long)c.H, (long long)c.K, (long long)c.V, state_decode_bytes(c), row.median_s,
                  row.min_s, row.gbps, r.copy_gbps > 0 ? row.gbps / r.copy_gbps : 0.0);
    return std::string(item);
  });
  return "{\"device\": \"" + r.device + "\", \"copy_gbps\": " + std::to_string(r.copy_gbps) + ", \"prefill\": " +
         prefill + ", \"decode\": " + decode + ", \"gated_delta_decode\": " + gated_delta_decode +
         ", \"state_decode\": " + format_linear_decode_json(r.state_decode, r.copy_gbps) +
         ", \"chunk_prefill\": " + format_chunk_prefill_json(r.chunk_prefill) +
         ", \"mla_decode\": " + format_mla_decode_json(r.mla_decode, r.copy_gbps) +
         ", \"sampling\": " + format_sampling_json(r.sampling, r.copy_gbps) +
         ", \"quant_gemv\": " + format_quant_gemv_json(r.quant_gemv, r.copy_gbps) +
         ", \"gemm\": " + format_gemm_json(r.gemm) +
         ", \"conv_prefill\": " + format_conv_prefill_json(r.conv_prefill, r.copy_gbps) +
         format_bandwidth_tables_json(r.step, r.copy_gbps) +
         ", \"moe_router\": " + format_moe_router_json(r.moe_router, r.copy_gbps) +
         ", \"moe_experts\": " + format_moe_experts_json(r.moe_experts, r.copy_gbps, best_gemm_tflops(r.gemm)) +
         format_bandwidth_tables_json(r.layer, r.copy_gbps) + format_bandwidth_tables_json(r.runner, r.copy_gbps) +
         "}\n";
}

}  // namespace attnzoo::bench
