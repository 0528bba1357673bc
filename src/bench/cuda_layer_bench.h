#pragma once
// The GPU runner's smaller kernels in `attnzoo bench kernels --device cuda`, each through the call the runner
// makes with device tensors; all bandwidth rows (bytes read + written per second, the copy's count, so "of copy"
// compares like with like):
//   dequant_<format>   the GGUF blocks' bf16 expansion (quant_dequant_cuda) at Llama-3-8B's [14336, 4096] down
//                      projection, every block format: the blocks read, the bf16 panel written
//   delta_gates_<family>  Gated DeltaNet's (Qwen3-Next: 32 value heads) and KDA's (Kimi Linear: 32 heads x 128 key
//                      channels) gates over a 4096-token prefill: a and b read, g and beta written (f32)
//   mul, sigmoid_gate, add_scaled, scale_softcap, query_temperature, transpose, row_copy: a 4096-token step's
//                      shapes (elementwise_cuda.h, transpose_cuda.h, row_copy_cuda.h)
// On the CPU (make test) the same rows run the CPU twins (dequantize_row_reference, the mixers' gate loops, the
// element-wise loops) on the same arguments.
#include <string>
#include <vector>

#include "bench/bandwidth_tables.h"

namespace attnzoo::bench {

std::vector<LinearCase> dequant_cases(Scale s);      // dims rows, cols, row_bytes
std::vector<LinearCase> delta_gates_cases(Scale s);  // dims T, Nb (b's and beta's width), Ng (a's and g's), group
std::vector<LinearCase> elementwise_cases(Scale s);  // dims rows, cols (row_copy: rows copied of cols f32)
double dequant_bytes(const LinearCase& c);      // rows x (row_bytes + 2 cols)
double delta_gates_bytes(const LinearCase& c);  // T (Nb + Ng) 4 x 2
double elementwise_bytes(const LinearCase& c);  // per kernel: its operands read and its output written

// The tables above, in the report's order (keys dequant, delta_gates, elementwise).
const std::vector<BandwidthTable>& layer_tables();

}  // namespace attnzoo::bench
