#pragma once
// The linear / state-space rows of `attnzoo bench kernels --device cuda` (issue 26): one-token decode of every
// family with a CUDA decode kernel, in GB/s of its f32 state read + written (the copy bandwidth's count, so the
// two compare directly), and chunked prefill (Gated DeltaNet, KDA, GLA, simple GLA, Mamba-2 SSD, RWKV-7 beside its
// recurrent form on the same inputs) in TFLOP/s of a stated FLOP count and tokens/s. Every row calls the family's public entry with device tensors, as an engine does; an entry that
// refuses them (the chunked forms until their CUDA kernels land) gives a row "not available: <its error>"
// instead of a timing, so the table is the same shape before and after.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "bench/timer.h"
#include "core/device.h"

namespace attnzoo::bench {

struct Dim {
  const char* name;
  int64_t value;
};

// A kernel and its shape, the dims named as the family's papers and fla / mamba_ssm name them.
struct LinearCase {
  // decode: kda gated_delta_rule gla simple_gla retention mamba2 mamba conv rwkv7 (and *_pool); prefill:
  // gated_delta_rule kda simple_gla gla mamba2
  std::string kernel;
  std::vector<Dim> dims;
  int64_t operator[](const char* name) const;  // ArgumentError naming `name` when the case has no such dim
};

struct LinearRow {
  LinearCase shape;
  std::string error;  // non-empty: the entry refused the case (or failed); no timing
  double median_s = 0, min_s = 0;
  bool available() const { return error.empty(); }
};

// B 32 H 32 K = V = 128 for the attention-like families (issue 26's decode shape); Mamba-2 2.7B (H 80, P 64,
// N 128, G 1), Mamba 2.8B (D 5120, N 16), the Mamba-2 2.7B convolution (D 5376 = 5120 + 2 x 128, W 4) and
// RWKV-7 2.9B (H 40, K = V = 64) at B 32. Gated DeltaNet, Mamba-2, Mamba and the convolution also as
// "<kernel>_pool" right after the dense row: the same step over states at 32 scattered slots of a pool of 64
// (dim slots; ssm_state_indices / state_batch_indices / conv_state_indices), GPU tensors only.
std::vector<LinearCase> linear_decode_cases(Scale s);
// GDN and KDA at B 4 x T 4096 and B 1 x T 16384, H 16, K = V = 128; Mamba-2 2.7B SSD at B 4 x T 4096.
std::vector<LinearCase> chunk_prefill_cases(Scale s);

// f32 state bytes one decode step reads and writes (2 x the state's size): [B, H, K, V], [B, H, P, N], [B, D, N]
// or [B, D, S] with S = W - 1.
double linear_state_bytes(const LinearCase& c);
// Tokens a prefill case processes (B x T).
double chunk_prefill_tokens(const LinearCase& c);
// Multiply-adds x 2 of the chunked form at chunk 64, the intra-chunk triangular products counted half:
// delta family per token and head C (3K + 2V) + 6 K V (K K^T, the WY solve's products with K and V, Q K^T and its
// product with the values, and Q S, W S, the state update K^T U); Mamba-2 per token 2 (G C N / 2 + H (2 N P +
// C P / 2)): C B^T once per group (python/attnzoo/bench/ssm.py's CPU count is the same).
double chunk_prefill_flops(const LinearCase& c);

// Times one run of the launch given (warmup and repetitions are the timer's).
using RowTimer = std::function<Timing(const std::function<void()>&)>;

// One row of any CUDA table: `measure` builds the case's inputs and returns the timer's verdict on its launch.
// Never throws for what the entry says about the case (a refusal, a failed launch): the message becomes the row's
// error, so a table with a missing kernel still has every other row.
LinearRow timed_row(const LinearCase& c, const std::function<Timing()>& measure);

// Each of `cases`' rows, in order, from `row` (a kernel's own setup around the timer).
using CaseRow = LinearRow (*)(const LinearCase&, Device, Stream, const RowTimer&);
std::vector<LinearRow> case_rows(const std::vector<LinearCase>& cases, CaseRow row, Device device, Stream stream,
                                 const RowTimer& timer);

// Every case's row on `device` (any device: the CPU runs the same entries, which is how make test checks the
// arguments built here); a case whose entry throws records the error and the table goes on.
std::vector<LinearRow> run_linear_decode_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::vector<LinearRow> run_chunk_prefill_rows(Scale s, Device device, Stream stream, const RowTimer& timer);

// Rows of a bandwidth-bound kernel as text under `title` and as a JSON array: GB/s of bytes(case) per second and
// its share of the device's copy bandwidth; the JSON names the byte count `bytes_key`.
using RowBytes = double (*)(const LinearCase&);
std::string format_bandwidth_text(const char* title, const std::vector<LinearRow>& rows, RowBytes bytes,
                                  double copy_gbps);
std::string format_bandwidth_json(const std::vector<LinearRow>& rows, RowBytes bytes, const char* bytes_key,
                                  double copy_gbps);

// Rows of a compute-bound kernel as text under `title` and as a JSON array: TFLOP/s of flops(case) per second.
using RowFlops = double (*)(const LinearCase&);
std::string format_flops_text(const char* title, const std::vector<LinearRow>& rows, RowFlops flops);
std::string format_flops_json(const std::vector<LinearRow>& rows, RowFlops flops);

// Rows of a kernel that is bandwidth-bound at a decode step's size and compute-bound at a prefill's (the MoE
// experts): GB/s of bytes(case) and its share of the copy bandwidth, and TFLOP/s of flops(case) and its share of
// `peak_tflops` (the run's best bf16 GEMM row; 0: not measured, no share shown).
std::string format_bandwidth_flops_text(const char* title, const std::vector<LinearRow>& rows, RowBytes bytes,
                                        RowFlops flops, double copy_gbps, double peak_tflops);
std::string format_bandwidth_flops_json(const std::vector<LinearRow>& rows, RowBytes bytes, RowFlops flops,
                                        double copy_gbps, double peak_tflops);

// The rows as text lines and as JSON arrays (the items of "state_decode" / "chunk_prefill"); copy_gbps is the
// device's measured copy bandwidth each decode row is compared with.
std::string format_linear_decode_text(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_chunk_prefill_text(const std::vector<LinearRow>& rows);
std::string format_linear_decode_json(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_chunk_prefill_json(const std::vector<LinearRow>& rows);

}  // namespace attnzoo::bench
