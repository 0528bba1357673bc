#pragma once
// What the GPU sampler's host side (sample_plan.cc) and its kernel (sample_kernel.cuh) share. Plain C++, so the
// plan builds in every configuration and the kernel emulator (testing/cuda_emulation) reads the same layout.
#include <cstdint>

namespace attnzoo::cuda_sample {

constexpr int kThreads = 256;  // one CTA per sampled row (several may read one row of logits)
constexpr int kWarps = kThreads / 32;

// Why a row has no token: the CPU sampler's refusals (engine/sampler.cc), reported per row.
enum RowStatus : int32_t { kRowOk = 0, kRowNan, kRowPosInf, kRowAllNegInf, kRowOverflow };

// One row's sampling settings, as Sampler holds them, resolved on the host.
struct RowSettings {
  double u;                 // the row's draw in [0, 1) from its sampler's generator (unused when greedy)
  float temperature;        // 0: greedy
  float top_p;              // 1: off
  float log_min_p;          // logf(min_p) as the CPU computes it; -inf: off
  float repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k;            // 0: off (k >= vocab is off too, as on the CPU: the plan writes 0)
  int32_t penalty_begin, penalty_end;  // this row's (id, count) pairs in SampleParams::penalties
  int32_t logits_row;       // the row of SampleParams::logits it reads (the n samples of one prompt share one)
};

struct PenaltyEntry {
  // A token the row's context holds and how many times among the generated tokens (0: the prompt's alone, listed
  // for the repetition penalty); ids distinct within a row.
  int32_t id, count;
};

// A candidate of a filtered row: its id, its logit's order key and its weight exp(logit - max) in double.
struct Candidate {
  double weight;
  uint32_t key;
  int32_t id;
};

struct SampleParams {
  const float* logits;
  int64_t row_stride;  // elements between rows
  int32_t vocab;
  const RowSettings* rows;
  const PenaltyEntry* penalties;
  float* work;           // [rows, vocab]: each sampled row after penalties and temperature
  Candidate* candidates;  // [rows, vocab]: the candidates of filtered rows, in id order
  int32_t* out;          // [rows]: the token, or -1 where status says why not
  int32_t* status;       // [rows]: RowStatus
};

}  // namespace attnzoo::cuda_sample
