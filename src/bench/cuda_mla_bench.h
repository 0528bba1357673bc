#pragma once
// The MLA rows of `attnzoo bench kernels --device cuda` (issue 25): DeepSeek-V3's absorbed decode (H 128, latent
// rank 512 + 64 rope dims, one query token per sequence) over a paged bf16 latent cache, through the public
// mla_decode entry as an engine calls it. Bandwidth-bound like the paged decode, so measured in bytes of what a
// step must read at least once — every sequence's latent rows and kv_b_proj's weight (W_UK and W_UV) — per
// second, beside the copy bandwidth. FlashMLA reports its decode the same way.
#include <vector>

#include "bench/cuda_linear_bench.h"

namespace attnzoo::bench {

// B 32 at contexts 4096 and 8192 (FlashMLA's published shapes are B 64 / 128 at 4k); block size 64.
std::vector<LinearCase> mla_decode_cases(Scale s);
// Latent rows B x ctx x (r + dr) plus the weight H x (dn + dv) x r, bf16.
double mla_decode_bytes(const LinearCase& c);
// Every case's row on `device` (the CPU too: make test runs them there); an entry's refusal becomes the row's error.
std::vector<LinearRow> run_mla_decode_rows(Scale s, Device device, Stream stream, const RowTimer& timer);
std::string format_mla_decode_text(const std::vector<LinearRow>& rows, double copy_gbps);
std::string format_mla_decode_json(const std::vector<LinearRow>& rows, double copy_gbps);

}  // namespace attnzoo::bench
