#include "models/cuda/device_linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/convert.h"
#include "kernels/quant/cuda/dequant_cuda.h"
#include "kernels/quant/cuda/gemv_cuda.h"
#include "models/cuda/device_step.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// A slice of columns [n0, n0 + n) of a 2-D view (of the last dimension for a 1-D one).
TensorView columns(const TensorView& t, int64_t n0, int64_t n) {
  TensorView s = t;
  s.data = static_cast<uint8_t*>(t.data) + size_t(n0 * t.strides[t.ndim - 1]) * dtype_size(t.dtype);
  s.shape[size_t(t.ndim - 1)] = n;
  return s;
}

// The 16-bit dtype a dense weight goes up as: f16 stays, f32 is rounded to bf16.
DType device_dtype(QuantType t) { return t == QuantType::F16 ? DType::f16 : DType::bf16; }

}  // namespace

DeviceLinear::DeviceLinear(const Linear& l, const DeviceLoad& load, const WeightFold& fold)
    : kind_(device_weights(l.matrix().type)), out_(l.matrix().rows), in_(l.matrix().cols), device_(load.device) {
  const QuantMatrix& m = l.matrix();
  require(kind_ != DeviceWeights::blocks || fold.identity(), l.name().c_str(),
          "GGUF blocks kept as stored on the device cannot take a multiplier (see foldable)");
  if (kind_ == DeviceWeights::blocks) {
    // GGUF rows up as stored: regrouped ones (row_groups.h) turned back first.
    weight_ = DeviceBuffer(load.device, size_t(m.bytes()));
    std::vector<uint8_t> gguf_rows;
    if (m.row_group != 0) gguf_rows = device_gguf_rows(m);
    // From pageable memory: staged before the call returns, so `gguf_rows` may go.
    weight_.upload(m.row_group != 0 ? gguf_rows.data() : m.data, weight_.bytes(), load.stream);
    blocks_ = QuantMatrix{weight_.data(), m.type, out_, in_, m.row_bytes};
    panel_ = load.panel ? load.panel : std::make_shared<DequantPanel>(DequantPanel{load.device, {}});
    panel_rows_ = dequant_panel_rows(out_, in_);
    panel_->reserve(size_t(panel_rows_ * in_) * 2);
  } else {
    const std::vector<uint16_t> rows = device_folded_rows(m, fold, l.name().c_str());
    weight_ = DeviceBuffer(load.device, rows.size() * 2);
    weight_.upload(rows.data(), weight_.bytes(), load.stream);
    w_ = device_view(load.device, weight_.data(), device_dtype(m.type), {out_, in_});
    if (load.rounding && m.type == QuantType::F32) {
      ++load.rounding->tensors;
      load.rounding->f32_bytes += uint64_t(out_ * in_) * 4;
    }
    if (load.rounding && kind_ == DeviceWeights::expanded)
      load.rounding->count_expanded(m.type, m.bytes(), uint64_t(out_ * in_) * 2);
  }
  if (l.has_bias()) {
    const std::vector<float> bias = folded_bias(l.bias(), fold);
    bias_bytes_ = DeviceBuffer(load.device, size_t(out_) * sizeof(float));
    bias_bytes_.upload(bias.data(), bias_bytes_.bytes(), load.stream);
    bias_ = device_view(load.device, bias_bytes_.data(), DType::f32, {out_});
  }
}

void DeviceLinear::apply(const TensorView& x, const TensorView& y, GemmOptions opts, Stream stream) const {
  const TensorView* bias = bias_.data ? &bias_ : nullptr;
  switch (device_product(kind_, x.shape[0])) {
    case DeviceProduct::gemm: gemm_cuda(x, w_, bias, y, opts, stream); return;
    case DeviceProduct::gemv: {
      QuantGemvEpilogue epilogue;
      epilogue.bias = bias;
      epilogue.accumulate = opts.accumulate;
      quant_gemv_cuda(make_quant_gemv_cuda_problem(blocks_, device_, x, y, epilogue), stream);
      return;
    }
    case DeviceProduct::dequant_gemm: apply_panels(x, y, opts, stream); return;
  }
}

EmbeddingCuda make_device_embedding(const Embedding& embed, const DeviceLoad& load) {
  const QuantMatrix& m = embed.matrix();
  if (embedding_type_supported_cuda(m.type)) return EmbeddingCuda(embed, load.device, load.stream);
  const std::vector<uint16_t> rows = device_dense_rows(m);  // uploaded before it goes: the copy is from pageable memory
  if (load.rounding) load.rounding->count_expanded(m.type, m.bytes(), rows.size() * 2);
  const Embedding expanded(TensorView::contiguous(const_cast<uint16_t*>(rows.data()), DType::bf16, {m.rows, m.cols}),
                           "model.embed_tokens.weight");
  return EmbeddingCuda(expanded, load.device, load.stream);
}

// Slices of panel_rows_ output features: expand, multiply into y's columns of the slice.
void DeviceLinear::apply_panels(const TensorView& x, const TensorView& y, GemmOptions opts, Stream stream) const {
  for (int64_t n0 = 0; n0 < out_; n0 += panel_rows_) {
    const int64_t n = std::min(panel_rows_, out_ - n0);
    QuantMatrix slice = blocks_;
    slice.data = blocks_.row(n0);
    slice.rows = n;
    const TensorView w = device_view(device_, panel_->buffer.data(), DType::bf16, {n, in_});
    quant_dequant_cuda(make_quant_dequant_cuda_problem(slice, device_, w), stream);
    const TensorView bias = bias_.data ? columns(bias_, n0, n) : TensorView{};
    gemm_cuda(x, w, bias_.data ? &bias : nullptr, columns(y, n0, n), opts, stream);
  }
}

bool DeviceLinear::stackable(std::span<const Linear* const> parts) {
  for (const Linear* l : parts) {
    const QuantType t = l->matrix().type;
    if (t != QuantType::F32 && t != QuantType::BF16 && t != QuantType::F16) return false;
    if (l->matrix().cols != parts[0]->matrix().cols || device_dtype(t) != device_dtype(parts[0]->matrix().type))
      return false;
  }
  return !parts.empty();
}

DeviceLinear::DeviceLinear(std::span<const Linear* const> parts, const DeviceLoad& load, DType bias_dtype,
                           std::span<const WeightFold> folds)
    : device_(load.device) {
  require(folds.empty() || folds.size() == parts.size(), "folds", "one per stacked part, or none");
  // F32 / BF16 / F16, one input width and dtype (stackable: callers stack nothing else)
  const int64_t in = parts[0]->matrix().cols;
  int64_t out = 0;
  bool any_bias = false;
  for (const Linear* l : parts) {
    out += l->matrix().rows;
    any_bias = any_bias || l->has_bias();
  }
  weight_ = DeviceBuffer(load.device, size_t(out * in) * 2);
  std::vector<uint16_t> rows(size_t(out * in));
  std::vector<float> bias(any_bias ? size_t(out) : 0, 0.f);
  int64_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Linear* l = parts[i];
    const QuantMatrix& m = l->matrix();
    const WeightFold fold = folds.empty() ? WeightFold{} : folds[i];
    const std::vector<uint16_t> part = device_folded_rows(m, fold, l->name().c_str());
    std::copy(part.begin(), part.end(), rows.begin() + at * in);
    if (l->has_bias()) {
      const std::vector<float> b = folded_bias(l->bias(), fold);
      std::copy(b.begin(), b.end(), bias.begin() + at);
    }
    if (m.type == QuantType::F32 && load.rounding) {
      ++load.rounding->tensors;
      load.rounding->f32_bytes += uint64_t(m.rows * in) * 4;
    }
    at += m.rows;
  }
  // A copy from pageable memory returns once the bytes are staged, so `rows` may go on return.
  weight_.upload(rows.data(), weight_.bytes(), load.stream);
  w_ = device_view(load.device, weight_.data(), device_dtype(parts[0]->matrix().type), {out, in});
  if (any_bias) {
    std::vector<uint8_t> bytes(size_t(out) * dtype_size(bias_dtype));
    if (bias_dtype == DType::f32)
      std::memcpy(bytes.data(), bias.data(), bytes.size());
    else
      convert_from_f32(bias.data(), bytes.data(), bias_dtype, size_t(out));
    bias_bytes_ = DeviceBuffer(load.device, bytes.size());
    bias_bytes_.upload(bytes.data(), bytes.size(), load.stream);
    bias_ = device_view(load.device, bias_bytes_.data(), bias_dtype, {out});
  }
  out_ = out;
  in_ = in;
}

DeviceLinear DeviceLinear::borrowing(const TensorView& w) {
  DeviceLinear d;
  d.w_ = w;
  d.out_ = w.shape[0];
  d.in_ = w.shape[1];
  d.device_ = w.device;
  return d;
}
#endif

}  // namespace attnzoo
