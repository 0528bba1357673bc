// The CUDA embedding gather's host side that needs no CUDA: which tables it reads, every refusal of a lookup, and
// the upload of a table.
#include <cmath>
#include <string>

#include "core/error.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/rows.h"
#include "layers/embedding.h"

namespace attnzoo {

bool embedding_type_supported_cuda(QuantType type) {
  switch (type) {
    case QuantType::F32:
    case QuantType::BF16:
    case QuantType::F16:
    case QuantType::Q8_0:
    case QuantType::Q4_0:
    case QuantType::Q4_K:
    case QuantType::Q6_K: return true;
    default: return false;
  }
}

void check_embedding_table_cuda(const QuantMatrix& table) {
  require(embedding_type_supported_cuda(table.type), "embedding", [&] {
    return std::string("the CUDA lookup reads F32, BF16, F16, Q8_0, Q4_0, Q4_K and Q6_K tables, got ") +
           quant_type_name(table.type);
  });
  require(table.row_group <= 1, "embedding", "rows regrouped for the CPU's VNNI kernels cannot be uploaded");
}

void check_embedding_lookup_cuda(const QuantMatrix& table, Device device, const TensorView& ids,
                                 const TensorView& out, float scale) {
  if (ids.dtype != DType::i32) throw DTypeError(std::string("ids: must be int32, got ") + dtype_name(ids.dtype));
  require(ids.ndim == 1 && (ids.shape[0] <= 1 || ids.strides[0] == 1), "ids",
          [&] { return "expected a contiguous [tokens], got " + ids.shape_str(); });
  require(ids.device.is_cpu() || ids.device == device, "ids", [&] {
    return "lives on " + ids.device.str() + "; the lookup takes ids on the host or on " + device.str();
  });
  require(ids.data != nullptr || ids.numel() == 0, "ids", "data is null");
  const int64_t T = ids.shape[0];
  require_cuda_tensor(out, "out", &device);
  if (out.dtype != DType::f32 && out.dtype != DType::bf16)
    throw DTypeError(std::string("out: must be float32 or bfloat16, got ") + dtype_name(out.dtype));
  require(out.ndim == 2 && out.shape[0] == T && out.shape[1] == table.cols && out.strides[0] >= 0 &&
              (out.strides[1] == 1 || table.cols <= 1),
          "out", [&] {
            return "expected [" + std::to_string(T) + ", " + std::to_string(table.cols) +
                   "] (ids' tokens, the table's dim) with a contiguous last dimension, got " + out.shape_str();
          });
  require(std::isfinite(scale), "scale", "must be finite");
  if (!ids.device.is_cpu()) return;  // device ids are checked by the kernel
  const auto* v = static_cast<const int32_t*>(ids.data);
  for (int64_t t = 0; t < T; ++t)
    require(v[t] >= 0 && v[t] < table.rows, "ids", [&] {
      return "entry " + std::to_string(t) + " = " + std::to_string(v[t]) + " is outside the vocabulary [0, " +
             std::to_string(table.rows) + ")";
    });
}

EmbeddingCuda::EmbeddingCuda(const Embedding& embedding, Device device, Stream stream)
    : table_(embedding.matrix()), device_(device) {
  require(device.is_cuda(), "device", [&] { return "EmbeddingCuda needs a CUDA device, got " + device.str(); });
  check_embedding_table_cuda(table_);
  bytes_ = DeviceBuffer(device, size_t(table_.bytes()));
  bytes_.upload(table_.data, bytes_.bytes(), stream);
  table_.data = bytes_.data();
}

}  // namespace attnzoo
