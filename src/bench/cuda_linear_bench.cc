#include "bench/cuda_linear_bench.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <numeric>
#include <optional>
#include <random>

#include "bench/device_fill.h"
#include "bench/json_array.h"
#include "core/error.h"
#include "kernels/linear/gated_delta_rule/gated_delta_rule.h"
#include "kernels/linear/gla/gla.h"
#include "kernels/linear/kda/kda.h"
#include "kernels/linear/mamba/mamba.h"
#include "kernels/linear/mamba2/mamba2.h"
#include "kernels/linear/retention/retention.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "kernels/linear/short_conv/short_conv.h"
#include "kernels/linear/simple_gla/simple_gla.h"

namespace attnzoo::bench {
namespace {

constexpr uint16_t kBf16Half = 0x3F00;
constexpr uint16_t kBf16MinusEighth = 0xBE00, kBf16Eighth = 0x3E00;
constexpr int64_t kChunk = 64;

// The buffers and the launch of one case; the buffers live as long as the launch is timed.
struct Prepared {
  std::vector<DeviceBuffer> buffers;
  std::function<void()> launch;
};

// Allocation helpers that keep the buffer alive in `p` and return its view.
struct Builder {
  Prepared& p;
  Device device;
  Stream stream;
  uint64_t seed = 11;

  TensorView noise(std::initializer_list<int64_t> shape) {
    p.buffers.push_back(noise_buffer(device, size_t(numel(shape)) * 2, seed++, stream));
    return view_on(p.buffers.back(), DType::bf16, shape);
  }
  TensorView f32(std::initializer_list<int64_t> shape, float value) {
    p.buffers.push_back(f32_buffer(device, size_t(numel(shape)), value, stream));
    return view_on(p.buffers.back(), DType::f32, shape);
  }
  TensorView bf16(std::initializer_list<int64_t> shape, uint16_t bits) {
    p.buffers.push_back(bf16_buffer(device, size_t(numel(shape)), bits, stream));
    return view_on(p.buffers.back(), DType::bf16, shape);
  }
  // B distinct slots of a pool of `pool_slots`, shuffled (a pool after some churn): int32 on the device.
  const int32_t* slots(int64_t B, int64_t pool_slots) {
    std::vector<int32_t> all(static_cast<size_t>(pool_slots));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), std::mt19937(uint32_t(seed++)));
    p.buffers.emplace_back(device, size_t(B) * 4);
    p.buffers.back().upload(all.data(), size_t(B) * 4, stream);
    return p.buffers.back().as<const int32_t>();
  }
  static int64_t numel(std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// A "<kernel>_pool" case's kernel: the same step over states addressed in a pool.
std::string pool_base(const std::string& kernel) {
  return kernel.ends_with("_pool") ? kernel.substr(0, kernel.size() - 5) : kernel;
}

// Decay -0.05 per step and beta 0.5: mild, so a timed loop of steps on one state stays finite; the state starts
// at zero and is updated in place (an engine's state slot), which is what the byte count assumes. A "_pool" case
// keeps its B states in a pool of `slots` rows, each sequence's at a scattered slot (ssm_state_indices /
// state_batch_indices / conv_state_indices, as vLLM's decode step passes them).
Prepared prepare_decode(const LinearCase& c, Device device, Stream stream) {
  Prepared p;
  Builder b{p, device, stream};
  const std::string k = pool_base(c.kernel);
  const bool pool = k != c.kernel;
  const int64_t rows = pool ? c["slots"] : c["B"];  // the state tensor's rows
  const int32_t* slots = pool ? b.slots(c["B"], rows) : nullptr;
  if (k == "gated_delta_rule") {
    // fla's fused_recurrent_gated_delta_rule step (Qwen3-Next): a decay and a beta per head.
    const int64_t B = c["B"], H = c["H"], K = c["K"], V = c["V"];
    DeltaArgs a;
    a.q = b.noise({B, 1, H, K});
    a.k = b.noise({B, 1, H, K});
    a.v = b.noise({B, 1, H, V});
    a.g = b.f32({B, 1, H}, -0.05f);
    a.beta = b.bf16({B, 1, H}, kBf16Half);
    a.o = b.noise({B, 1, H, V});
    a.initial_state = a.final_state = b.f32({rows, H, K, V}, 0.f);
    a.ssm_state_indices = slots;
    a.use_qk_l2norm_in_kernel = true;
    a.check_values = false;
    p.launch = [a] { recurrent_gated_delta_rule(a); };
  } else if (k == "kda") {
    const int64_t B = c["B"], H = c["H"], K = c["K"], V = c["V"];
    DeltaArgs a;
    a.q = b.noise({B, 1, H, K});
    a.k = b.noise({B, 1, H, K});
    a.v = b.noise({B, 1, H, V});
    a.g = b.f32({B, 1, H, K}, -0.05f);
    a.beta = b.bf16({B, 1, H}, kBf16Half);
    a.o = b.noise({B, 1, H, V});
    a.initial_state = a.final_state = b.f32({B, H, K, V}, 0.f);
    a.use_qk_l2norm_in_kernel = true;
    a.check_values = false;  // an engine's decode step: the scans would read the state again
    p.launch = [a] { recurrent_kda(a); };
  } else if (k == "gla" || k == "simple_gla" || k == "retention") {
    const int64_t B = c["B"], H = c["H"], K = c["K"], V = c["V"];
    const TensorView q = b.noise({B, 1, H, K}), kk = b.noise({B, 1, H, K}), v = b.noise({B, 1, H, V});
    const TensorView o = b.noise({B, 1, H, V});
    GlaOptions opts;
    opts.initial_state = opts.final_state = b.f32({B, H, K, V}, 0.f);
    opts.check_values = false;
    if (k == "gla") {
      const TensorView g = b.f32({B, 1, H, K}, -0.05f);
      p.launch = [=] { recurrent_gla(q, kk, v, g, o, opts); };
    } else if (k == "simple_gla") {
      const TensorView g = b.f32({B, 1, H}, -0.05f);
      p.launch = [=] { recurrent_simple_gla(q, kk, v, g, TensorView{}, o, opts); };
    } else {
      p.launch = [=] { recurrent_retention(q, kk, v, o, opts); };
    }
  } else if (k == "mamba2") {
    // mamba_ssm's Mamba2 decode step: D per head, dt_bias and softplus, the gate z applied later by its norm.
    const int64_t B = c["B"], H = c["H"], P = c["P"], N = c["N"], G = c["G"];
    Mamba2StepArgs a;
    a.state = b.f32({rows, H, P, N}, 0.f);
    a.state_batch_indices = slots;
    a.x = b.noise({B, H, P});
    a.dt = b.noise({B, H});
    a.A = b.f32({H}, -1.f);
    a.B = b.noise({B, G, N});
    a.C = b.noise({B, G, N});
    a.D = b.f32({H}, 1.f);
    a.dt_bias = b.f32({H}, -2.f);
    a.dt_softplus = true;
    a.y = b.noise({B, H, P});
    p.launch = [a] { mamba2_state_update(a); };
  } else if (k == "mamba") {
    // mamba_ssm's Mamba (S6) decode step: z gated in the kernel.
    const int64_t B = c["B"], D = c["D"], N = c["N"];
    SelectiveStateUpdateArgs a;
    a.state = b.f32({rows, D, N}, 0.f);
    a.state_batch_indices = slots;
    a.x = b.noise({B, D});
    a.dt = b.noise({B, D});
    a.A = b.f32({D, N}, -1.f);
    a.B = b.noise({B, N});
    a.C = b.noise({B, N});
    a.D = b.f32({D}, 1.f);
    a.z = b.noise({B, D});
    a.dt_bias = b.f32({D}, -2.f);
    a.dt_softplus = true;
    a.y = b.noise({B, D});
    p.launch = [a] { selective_state_update(a); };
  } else if (k == "rwkv7") {
    // fla's fused_recurrent_rwkv7 step as RWKV-7 blocks call it (scale 1). a = -1/8 and b = 1/8 on every channel
    // make b a^T = -(K / 64) 1 1^T, which with the decay e^-0.05 keeps the timed loop's state bounded at K = 64.
    const int64_t B = c["B"], H = c["H"], K = c["K"], V = c["V"];
    Rwkv7Args a;
    a.r = b.noise({B, 1, H, K});
    a.w = b.f32({B, 1, H, K}, -0.05f);
    a.k = b.noise({B, 1, H, K});
    a.v = b.noise({B, 1, H, V});
    a.a = b.bf16({B, 1, H, K}, kBf16MinusEighth);
    a.b = b.bf16({B, 1, H, K}, kBf16Eighth);
    a.o = b.noise({B, 1, H, V});
    a.initial_state = a.final_state = b.f32({B, H, K, V}, 0.f);
    p.launch = [a] { recurrent_rwkv7(a); };
  } else if (k == "conv") {
    const int64_t B = c["B"], D = c["D"], W = c["W"];
    const TensorView x = b.noise({B, D}), state = b.f32({rows, D, W - 1}, 0.f), weight = b.noise({D, W});
    const TensorView bias = b.noise({D}), y = b.noise({B, D});
    p.launch = [=] { causal_conv1d_update(x, state, weight, bias, y, ConvActivation::silu, slots); };
  } else {
    throw ArgumentError("linear decode case: unknown kernel '" + k + "'");
  }
  return p;
}

Prepared prepare_prefill(const LinearCase& c, Device device, Stream stream) {
  Prepared p;
  Builder b{p, device, stream};
  const std::string& k = c.kernel;
  if (k == "gated_delta_rule" || k == "kda") {
    // fla's chunk_* call of a prefill: bf16 inputs, l2norm in the kernel, the final state out for decode.
    const int64_t B = c["B"], T = c["T"], H = c["H"], K = c["K"], V = c["V"];
    DeltaArgs a;
    a.q = b.noise({B, T, H, K});
    a.k = b.noise({B, T, H, K});
    a.v = b.noise({B, T, H, V});
    a.g = k == "kda" ? b.f32({B, T, H, K}, -0.05f) : b.f32({B, T, H}, -0.05f);
    a.beta = b.bf16({B, T, H}, kBf16Half);
    a.o = b.noise({B, T, H, V});
    a.final_state = b.f32({B, H, K, V}, 0.f);
    a.use_qk_l2norm_in_kernel = true;
    a.chunk_size = kChunk;
    a.check_values = false;
    if (k == "kda")
      p.launch = [a] { chunk_kda(a); };
    else
      p.launch = [a] { chunk_gated_delta_rule(a); };
  } else if (k == "simple_gla" || k == "gla") {
    // fla's chunk_simple_gla / chunk_gla call of a prefill: bf16 inputs, f32 log decays, the final state out.
    const int64_t B = c["B"], T = c["T"], H = c["H"], K = c["K"], V = c["V"];
    const TensorView q = b.noise({B, T, H, K}), kk = b.noise({B, T, H, K}), v = b.noise({B, T, H, V});
    const TensorView o = b.noise({B, T, H, V});
    GlaOptions opts;
    opts.final_state = b.f32({B, H, K, V}, 0.f);
    opts.chunk_size = kChunk;
    if (k == "gla") {
      const TensorView g = b.f32({B, T, H, K}, -0.05f);
      p.launch = [=] { chunk_gla(q, kk, v, g, o, opts); };
    } else {
      const TensorView g = b.f32({B, T, H}, -0.05f);
      p.launch = [=] { chunk_simple_gla(q, kk, v, g, TensorView{}, o, opts); };
    }
  } else if (k == "mamba2") {
    const int64_t B = c["B"], T = c["T"], H = c["H"], P = c["P"], N = c["N"], G = c["G"];
    Mamba2Args a;
    a.x = b.noise({B, T, H, P});
    a.dt = b.noise({B, T, H});
    a.A = b.f32({H}, -1.f);
    a.B = b.noise({B, T, G, N});
    a.C = b.noise({B, T, G, N});
    a.D = b.f32({H}, 1.f);
    a.dt_bias = b.f32({H}, -2.f);
    a.dt_softplus = true;
    a.final_state = b.f32({B, H, P, N}, 0.f);
    a.y = b.noise({B, T, H, P});
    a.chunk_size = kChunk;
    p.launch = [a] { mamba2_chunk_scan(a); };
  } else if (k == "rwkv7" || k == "rwkv7_recurrent") {
    // fla's chunk_rwkv7 call of a prefill (scale 1, the final state out), and the recurrent form on the same
    // inputs for the ratio. a = -1/8 and b = 1/8 with the decay e^-0.05 keep the state bounded (the decode row's).
    const int64_t B = c["B"], T = c["T"], H = c["H"], K = c["K"], V = c["V"];
    Rwkv7Args a;
    a.r = b.noise({B, T, H, K});
    a.w = b.f32({B, T, H, K}, -0.05f);
    a.k = b.noise({B, T, H, K});
    a.v = b.noise({B, T, H, V});
    a.a = b.bf16({B, T, H, K}, kBf16MinusEighth);
    a.b = b.bf16({B, T, H, K}, kBf16Eighth);
    a.o = b.noise({B, T, H, V});
    a.final_state = b.f32({B, H, K, V}, 0.f);
    if (k == "rwkv7")
      p.launch = [a] { chunk_rwkv7(a, kChunk); };
    else
      p.launch = [a] { recurrent_rwkv7(a); };
  } else {
    throw ArgumentError("chunk prefill case: unknown kernel '" + k + "'");
  }
  return p;
}

template <class Prepare>
LinearRow run_row(const LinearCase& c, Device device, Stream stream, const RowTimer& timer, Prepare prepare) {
  return timed_row(c, [&] {
    const Prepared p = prepare(c, device, stream);
    return timer(p.launch);
  });
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') { out += "\\n"; continue; }
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    out += ch;
  }
  return out + "\"";
}

std::string dims_text(const LinearCase& c) {
  std::string s;
  for (const Dim& d : c.dims) {
    if (!s.empty()) s += ' ';
    s += d.name;
    s += '=';
    s += std::to_string(d.value);
  }
  return s;
}

std::string dims_json(const LinearCase& c) {
  std::string s = "{";
  for (size_t i = 0; i < c.dims.size(); ++i)
    s += (i ? ", \"" : "\"") + std::string(c.dims[i].name) + "\": " + std::to_string(c.dims[i].value);
  return s + "}";
}

// A number, or null for a row without one (JSON has no NaN).
std::string num(double x, bool present) {
  if (!present) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string row_json_head(const LinearRow& r) {
  return "{\"kernel\": " + json_string(r.shape.kernel) + ", \"dims\": " + dims_json(r.shape) +
         ", \"available\": " + (r.available() ? "true" : "false") +
         ", \"error\": " + (r.available() ? std::string("null") : json_string(r.error)) +
         ", \"median_s\": " + num(r.median_s, r.available()) + ", \"min_s\": " + num(r.min_s, r.available());
}

// The rows as a JSON array: each row's object is its head (row_json_head) and then `fields(row)`, its own keys.
template <class Fields>
std::string rows_json(const std::vector<LinearRow>& rows, Fields&& fields) {
  return json_array(rows, [&](const LinearRow& r) { return row_json_head(r) + fields(r) + "}"; });
}

}  // namespace

int64_t LinearCase::operator[](const char* name) const {
  for (const Dim& d : dims)
    if (std::string(d.name) == name) return d.value;
  throw ArgumentError(std::string(name) + ": the " + kernel + " case has no such dimension");
}

std::vector<LinearCase> linear_decode_cases(Scale s) {
  const bool tiny = s == Scale::tiny;
  const int64_t B = tiny ? 2 : 32;
  const std::vector<Dim> attn = tiny ? std::vector<Dim>{{"B", B}, {"H", 2}, {"K", 32}, {"V", 32}}
                                     : std::vector<Dim>{{"B", B}, {"H", 32}, {"K", 128}, {"V", 128}};
  const std::vector<Dim> ssd = tiny ? std::vector<Dim>{{"B", B}, {"H", 4}, {"P", 16}, {"N", 16}, {"G", 1}}
                                    : std::vector<Dim>{{"B", B}, {"H", 80}, {"P", 64}, {"N", 128}, {"G", 1}};
  const std::vector<Dim> s6{{"B", B}, {"D", tiny ? 32 : 5120}, {"N", 16}};
  const std::vector<Dim> conv{{"B", B}, {"D", tiny ? 40 : 5376}, {"W", 4}};
  // The pool-addressed form beside the dense one: the B states at scattered slots of a pool of 2B.
  auto in_pool = [&](std::vector<Dim> dims) {
    dims.push_back({"slots", 2 * B});
    return dims;
  };
  return {{"kda", attn},
          {"gated_delta_rule", attn},
          {"gated_delta_rule_pool", in_pool(attn)},
          {"gla", attn},
          {"simple_gla", attn},
          {"retention", attn},
          {"mamba2", ssd},
          {"mamba2_pool", in_pool(ssd)},
          {"mamba", s6},
          {"mamba_pool", in_pool(s6)},
          {"conv", conv},
          {"conv_pool", in_pool(conv)},
          // RWKV-7 2.9B: 40 heads of 64
          {"rwkv7", tiny ? attn : std::vector<Dim>{{"B", B}, {"H", 40}, {"K", 64}, {"V", 64}}}};
}

std::vector<LinearCase> chunk_prefill_cases(Scale s) {
  if (s == Scale::tiny)
    return {{"gated_delta_rule", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}},
            {"kda", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}},
            {"simple_gla", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}},
            {"gla", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}},
            {"mamba2", {{"B", 1}, {"T", 100}, {"H", 4}, {"P", 16}, {"N", 16}, {"G", 1}}},
            {"rwkv7", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}},
            {"rwkv7_recurrent", {{"B", 2}, {"T", 100}, {"H", 2}, {"K", 32}, {"V", 32}}}};
  const std::vector<Dim> batch{{"B", 4}, {"T", 4096}, {"H", 16}, {"K", 128}, {"V", 128}};
  const std::vector<Dim> longest{{"B", 1}, {"T", 16384}, {"H", 16}, {"K", 128}, {"V", 128}};
  const LinearCase ssd{"mamba2", {{"B", 4}, {"T", 4096}, {"H", 80}, {"P", 64}, {"N", 128}, {"G", 1}}};
  const std::vector<Dim> goose{{"B", 4}, {"T", 4096}, {"H", 40}, {"K", 64}, {"V", 64}};  // RWKV-7 2.9B's heads
  if (s == Scale::quick)
    return {{"gated_delta_rule", batch}, {"kda", batch}, {"simple_gla", batch}, {"gla", batch}, ssd,
            {"rwkv7", goose}, {"rwkv7_recurrent", goose}};
  return {{"gated_delta_rule", batch}, {"gated_delta_rule", longest}, {"kda", batch}, {"kda", longest},
          {"simple_gla", batch}, {"gla", batch}, ssd, {"rwkv7", goose}, {"rwkv7_recurrent", goose}};
}

double linear_state_bytes(const LinearCase& c) {
  double elems = 0;
  const std::string k = pool_base(c.kernel);  // a pool's slots cost what dense rows do: B states read and written
  if (k == "mamba2") elems = double(c["B"]) * double(c["H"]) * double(c["P"]) * double(c["N"]);
  else if (k == "mamba") elems = double(c["B"]) * double(c["D"]) * double(c["N"]);
  else if (k == "conv") elems = double(c["B"]) * double(c["D"]) * double(c["W"] - 1);
  else elems = double(c["B"]) * double(c["H"]) * double(c["K"]) * double(c["V"]);
  return 2.0 * elems * 4.0;
}

double chunk_prefill_tokens(const LinearCase& c) { return double(c["B"]) * double(c["T"]); }

double chunk_prefill_flops(const LinearCase& c) {
  const double C = double(kChunk);
  if (c.kernel == "mamba2") {
    // Per chunk and group the causal half of C B^T (the kernels form it once per group, not per head), per chunk
    // and head C h, the causal half of the intra-chunk product and the state update.
    const double H = double(c["H"]), P = double(c["P"]), N = double(c["N"]), G = double(c["G"]);
    return chunk_prefill_tokens(c) * 2.0 * (G * C * N / 2 + H * (2 * N * P + C * P / 2));
  }
  const double H = double(c["H"]), K = double(c["K"]), V = double(c["V"]);
  // The gated-linear recurrence per token: causal halves of Q K^T and P V, then Q h and the state update.
  if (c.kernel == "simple_gla" || c.kernel == "gla") return chunk_prefill_tokens(c) * H * 2.0 * (C * (K + V) / 2 + 2 * K * V);
  // RWKV-7 (rwkv7/README.md's count, the recurrent row held to the same one): four K x V products per token with
  // the state, and the intra-chunk matrices and their products, about C (5K + 4V).
  if (c.kernel == "rwkv7" || c.kernel == "rwkv7_recurrent")
    return chunk_prefill_tokens(c) * H * (8 * K * V + C * (5 * K + 4 * V));
  return chunk_prefill_tokens(c) * H * 2.0 * (C * (3 * K + 2 * V) / 2 + 3 * K * V);
}

std::vector<LinearRow> run_linear_decode_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  std::vector<LinearRow> rows;
  for (const LinearCase& c : linear_decode_cases(s)) rows.push_back(run_row(c, device, stream, timer, prepare_decode));
  return rows;
}

std::vector<LinearRow> run_chunk_prefill_rows(Scale s, Device device, Stream stream, const RowTimer& timer) {
  std::vector<LinearRow> rows;
  for (const LinearCase& c : chunk_prefill_cases(s)) rows.push_back(run_row(c, device, stream, timer, prepare_prefill));
  return rows;
}

namespace {

// A table under `title`, a line a row: the kernel and its dims left-aligned in columns `kernel_width` and
// `dims_width` wide, then `figures(row)` (from its leading space to the newline) or why the row did not run.
template <class Figures>
std::string rows_text(const char* title, const std::vector<LinearRow>& rows, int kernel_width, int dims_width,
                      Figures&& figures) {
  std::string s = title;
  char line[512];
  for (const LinearRow& r : rows) {
    const std::string tail = r.available() ? figures(r) : " not available: " + r.error + "\n";
    std::snprintf(line, sizeof line, "  %-*s %-*s%s", kernel_width, r.shape.kernel.c_str(), dims_width,
                  dims_text(r.shape).c_str(), tail.c_str());
    s += line;
  }
  return s;
}

}  // namespace

std::string format_bandwidth_text(const char* title, const std::vector<LinearRow>& rows, RowBytes bytes,
                                  double copy_gbps) {
  return rows_text(title, rows, 11, 32, [&](const LinearRow& r) {
    const double gbps = bytes(r.shape) / r.median_s * 1e-9;
    char figures[512];
    std::snprintf(figures, sizeof figures, " %10.3f %9.0f %8.0f%%\n", r.median_s * 1e3, gbps,
                  copy_gbps > 0 ? 100 * gbps / copy_gbps : 0.0);
    return std::string(figures);
  });
}

std::string format_flops_text(const char* title, const std::vector<LinearRow>& rows, RowFlops flops) {
  return rows_text(title, rows, 14, 29, [&](const LinearRow& r) {
    char figures[512];
    std::snprintf(figures, sizeof figures, " %10.3f %9.1f\n", r.median_s * 1e3, flops(r.shape) / r.median_s * 1e-12);
    return std::string(figures);
  });
}

std::string format_bandwidth_flops_text(const char* title, const std::vector<LinearRow>& rows, RowBytes bytes,
                                        RowFlops flops, double copy_gbps, double peak_tflops) {
  return rows_text(title, rows, 11, 32, [&](const LinearRow& r) {
    const double gbps = bytes(r.shape) / r.median_s * 1e-9, tflops = flops(r.shape) / r.median_s * 1e-12;
    char figures[512];
    std::snprintf(figures, sizeof figures, " %10.3f %9.0f %8.0f%% %9.1f %8.0f%%\n", r.median_s * 1e3, gbps,
                  copy_gbps > 0 ? 100 * gbps / copy_gbps : 0.0, tflops,
                  peak_tflops > 0 ? 100 * tflops / peak_tflops : 0.0);
    return std::string(figures);
  });
}

std::string format_bandwidth_flops_json(const std::vector<LinearRow>& rows, RowBytes bytes, RowFlops flops,
                                        double copy_gbps, double peak_tflops) {
  return rows_json(rows, [&](const LinearRow& r) {
    const double b = bytes(r.shape), f = flops(r.shape);
    const double gbps = r.available() ? b / r.median_s * 1e-9 : 0, tflops = r.available() ? f / r.median_s * 1e-12 : 0;
    return ", \"bytes\": " + num(b, true) + ", \"gbps\": " + num(gbps, r.available()) + ", \"copy_fraction\": " +
           num(gbps / copy_gbps, r.available() && copy_gbps > 0) + ", \"flops\": " + num(f, true) +
           ", \"tflops\": " + num(tflops, r.available()) +
           ", \"gemm_fraction\": " + num(tflops / peak_tflops, r.available() && peak_tflops > 0);
  });
}

std::string format_linear_decode_text(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_text(
      "linear / state-space decode (1 token, f32 state in place)  median ms   GB/s of state read + written   of copy\n",
      rows, linear_state_bytes, copy_gbps);
}

std::string format_chunk_prefill_text(const std::vector<LinearRow>& rows) {
  return rows_text("chunked prefill (bf16, chunk 64)                           median ms   TFLOP/s   Mtok/s\n", rows,
                   17, 38, [](const LinearRow& r) {
                     char figures[512];
                     std::snprintf(figures, sizeof figures, " %10.3f %9.1f %8.2f\n", r.median_s * 1e3,
                                   chunk_prefill_flops(r.shape) / r.median_s * 1e-12,
                                   chunk_prefill_tokens(r.shape) / r.median_s * 1e-6);
                     return std::string(figures);
                   });
}

std::string format_bandwidth_json(const std::vector<LinearRow>& rows, RowBytes bytes, const char* bytes_key,
                                  double copy_gbps) {
  return rows_json(rows, [&](const LinearRow& r) {
    const double b = bytes(r.shape);
    const double gbps = r.available() ? b / r.median_s * 1e-9 : 0;
    return ", \"" + std::string(bytes_key) + "\": " + num(b, true) + ", \"gbps\": " + num(gbps, r.available()) +
           ", \"copy_fraction\": " + num(gbps / copy_gbps, r.available() && copy_gbps > 0);
  });
}

std::string format_flops_json(const std::vector<LinearRow>& rows, RowFlops flops) {
  return rows_json(rows, [&](const LinearRow& r) {
    const double f = flops(r.shape);
    return ", \"flops\": " + num(f, true) + ", \"tflops\": " +
           num(r.available() ? f / r.median_s * 1e-12 : 0, r.available());
  });
}

std::string format_linear_decode_json(const std::vector<LinearRow>& rows, double copy_gbps) {
  return format_bandwidth_json(rows, linear_state_bytes, "state_bytes", copy_gbps);
}

std::string format_chunk_prefill_json(const std::vector<LinearRow>& rows) {
  return rows_json(rows, [](const LinearRow& r) {
    const double flops = chunk_prefill_flops(r.shape), tokens = chunk_prefill_tokens(r.shape);
    const double tflops = r.available() ? flops / r.median_s * 1e-12 : 0;
    const double tokens_per_s = r.available() ? tokens / r.median_s : 0;
    return ", \"tokens\": " + num(tokens, true) + ", \"flops\": " + num(flops, true) + ", \"tflops\": " +
           num(tflops, r.available()) + ", \"tokens_per_s\": " + num(tokens_per_s, r.available());
  });
}

std::vector<LinearRow> case_rows(const std::vector<LinearCase>& cases, CaseRow row, Device device, Stream stream,
                                 const RowTimer& timer) {
  std::vector<LinearRow> rows;
  for (const LinearCase& c : cases) rows.push_back(row(c, device, stream, timer));
  return rows;
}

LinearRow timed_row(const LinearCase& c, const std::function<Timing()>& measure) {
  LinearRow row{c, {}, 0, 0};
  try {
    const Timing t = measure();
    row.median_s = t.median_s;
    row.min_s = t.min_s;
    if (!(t.median_s > 0)) row.error = "no time measured";
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

}  // namespace attnzoo::bench
