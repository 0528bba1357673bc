#pragma once
// How linear-attention and SSM mixers (Gated DeltaNet, Mamba-2, ...) run prompt chunks: with their chunked
// kernels (the default: GEMM-shaped work per chunk) or token by token with their recurrent decode kernels.
// The recurrent setting exists to measure what the chunked kernels buy (`attnzoo bench model
// --linear-prefill=recurrent`); it is process-wide because it is a benchmark switch, not a model option.
// Mixers check it once per forward call:
//   const bool chunked = n > 1 && linear_prefill_mode() == LinearPrefillMode::chunked;
#include <string>

namespace attnzoo {

enum class LinearPrefillMode { chunked, recurrent };

LinearPrefillMode linear_prefill_mode();
void set_linear_prefill_mode(LinearPrefillMode mode);

// "chunked" / "recurrent"; parse throws ArgumentError naming `mode` for anything else.
const char* linear_prefill_mode_name(LinearPrefillMode mode);
LinearPrefillMode parse_linear_prefill_mode(const std::string& name);

}  // namespace attnzoo
