#include "models/cuda/device_moe.h"

#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/convert.h"
#include "layers/cuda/elementwise_cuda.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/moe_cuda.h"
#include "layers/cuda/routing_cuda.h"
#include "models/cuda/device_weights.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// Workspace slots after the attention's (device_attention.cc), as device_mlp.cc's; a block has one feed-forward,
// so these may share numbers with the gated MLP's. Below the decode plans' (step_decode_plans.h's kFirstSlot).
enum Slot : size_t {
  kLogits = 8, kIds, kWeights, kOffsets, kTiles, kSource, kDest, kGathered, kGateUp, kExpertOut,
  kSharedGate, kSharedUp, kSharedOut, kSharedLogit, kGroupCounts
};

// The experts' matrices stacked as one [E, rows, cols] upload in `dtype` (bf16 unless every piece is f16): each
// expert's `pieces` (gate then up, or down alone) one after another. f32 pieces are rounded and counted; GGUF
// blocks (a GGUF's stacked experts, gpt-oss's MXFP4 ones) are expanded to bf16 as device_dense_rows defines it,
// counted for the expansion notice.
class StackedWeights {
 public:
  StackedWeights() = default;
  template <class Pieces>
  StackedWeights(int64_t E, Pieces pieces_of, const DeviceLoad& load) {
    bool all_f16 = true;
    int64_t rows = 0, cols = 0;
    for (int64_t e = 0; e < E; ++e) {
      int64_t r = 0;
      for (const Linear* l : pieces_of(e)) {
        all_f16 = all_f16 && l->matrix().type == QuantType::F16;
        r += l->matrix().rows;
        cols = l->matrix().cols;
      }
      rows = r;
    }
    const DType dtype = all_f16 ? DType::f16 : DType::bf16;
    std::vector<uint16_t> host(size_t(E * rows * cols));
    std::vector<float> row(static_cast<size_t>(cols));
    uint16_t* dst = host.data();
    for (int64_t e = 0; e < E; ++e)
      for (const Linear* l : pieces_of(e)) {
        const QuantMatrix& m = l->matrix();
        if (m.type != QuantType::F32 && m.type != QuantType::BF16 && m.type != QuantType::F16) {
          const std::vector<uint16_t> expanded = device_dense_rows(m);  // bf16 rows: not every piece is f16
          std::memcpy(dst, expanded.data(), expanded.size() * 2);
          dst += m.rows * cols;
          if (load.rounding) load.rounding->count_expanded(m.type, m.bytes(), uint64_t(m.rows * m.cols) * 2);
          continue;
        }
        const bool same = m.type == (dtype == DType::f16 ? QuantType::F16 : QuantType::BF16);
        for (int64_t r = 0; r < m.rows; ++r, dst += cols) {
          if (same) {
            std::memcpy(dst, m.row(r), size_t(cols) * 2);
            continue;
          }
          convert_to_f32(m.row(r), m.type == QuantType::F32 ? DType::f32 : DType::f16, row.data(), size_t(cols));
          convert_from_f32(row.data(), dst, dtype, size_t(cols));
        }
        if (m.type == QuantType::F32 && load.rounding) {
          ++load.rounding->tensors;
          load.rounding->f32_bytes += uint64_t(m.rows * m.cols) * 4;
        }
      }
    buffer_ = DeviceBuffer(load.device, host.size() * 2);
    buffer_.upload(host.data(), buffer_.bytes(), load.stream);
    view_ = device_view(load.device, buffer_.data(), dtype, {E, rows, cols});
  }
  const TensorView& view() const { return view_; }

 private:
  DeviceBuffer buffer_;
  TensorView view_;
};

// An f32 [rows, cols] array uploaded once (the stacked biases, the router's).
struct DeviceF32 {
  DeviceBuffer buffer;
  TensorView view;
  DeviceF32(const std::vector<float>& host, int64_t rows, int64_t cols, const DeviceLoad& load)
      : buffer(load.device, host.size() * sizeof(float)) {
    buffer.upload(host.data(), buffer.bytes(), load.stream);
    view = device_view(load.device, buffer.data(), DType::f32, {rows, cols});
  }
};

// The experts' biases stacked as StackedWeights stacks their pieces: f32 [E, rows], zeros for a piece without one;
// none when no piece has one.
template <class Pieces>
std::optional<DeviceF32> stacked_bias(int64_t E, Pieces pieces_of, const DeviceLoad& load) {
  bool any = false;
  std::vector<float> host;
  for (int64_t e = 0; e < E; ++e)
    for (const Linear* l : pieces_of(e)) {
      any = any || l->has_bias();
      const std::span<const float> b = l->bias();
      if (b.empty()) host.insert(host.end(), size_t(l->out_features()), 0.f);
      else host.insert(host.end(), b.begin(), b.end());
    }
  if (!any) return std::nullopt;
  return DeviceF32(host, E, int64_t(host.size()) / E, load);
}

// What the dispatch needs of an expert kind: the matrices of its first product (gate then up, or up alone) and
// whether an activation over halves (gated) or in place (PlainMlp: Nemotron-H's relu²) follows.
template <class Expert>
struct ExpertKind;
template <>
struct ExpertKind<GatedMlp> {
  static constexpr bool kGated = true;
  static std::vector<const Linear*> first(const GatedMlp& m) { return {&m.gate_proj(), &m.up_proj()}; }
  static const Linear& down(const GatedMlp& m) { return m.down_proj(); }
  static Activation activation(const GatedMlp& m) { return m.activation(); }
};
template <>
struct ExpertKind<PlainMlp> {
  static constexpr bool kGated = false;
  static std::vector<const Linear*> first(const PlainMlp& m) { return {&m.up_proj()}; }
  static const Linear& down(const PlainMlp& m) { return m.down_proj(); }
  static Activation activation(const PlainMlp& m) { return m.activation(); }
};
// gpt-oss's: gate and up (de-interleaved at load by GptOssMoe), its clamped SwiGLU in place of the activation.
template <>
struct ExpertKind<GptOssExpert> {
  static constexpr bool kGated = true;
  static std::vector<const Linear*> first(const GptOssExpert& m) { return {&m.gate, &m.up}; }
  static const Linear& down(const GptOssExpert& m) { return m.down; }
  static Activation activation(const GptOssExpert&) { return Activation::silu; }  // unused: the SwiGLU replaces it
};

// gpt-oss's activation over the gate | up halves (gpt_oss_clamped_swiglu's parameters).
struct ClampedSwiglu {
  float alpha, limit;
};

// The shared expert as a dense MLP whose output goes to its own rows (gated by Qwen's sigmoid, then summed with
// the routed slots).
template <class Expert>
struct DeviceSharedMlp {
  std::optional<DeviceLinear> gate;
  DeviceLinear up, down;
  Activation act;
  int64_t intermediate;
  DeviceSharedMlp(const Expert& m, const DeviceLoad& load)
      : up(m.up_proj(), load), down(m.down_proj(), load), act(m.activation()), intermediate(m.intermediate()) {
    if constexpr (ExpertKind<Expert>::kGated) gate.emplace(m.gate_proj(), load);
  }
  void forward(const DeviceStep& step, const TensorView& h, const TensorView& out) const {
    const int64_t T = step.num_tokens, I = intermediate;
    const TensorView u = step.view(step.workspace->get(kSharedUp, size_t(T * I) * 4), DType::f32, {T, I});
    up.apply(h, u, {}, step.stream);
    if (gate) {
      const TensorView g = step.view(step.workspace->get(kSharedGate, size_t(T * I) * 4), DType::f32, {T, I});
      gate->apply(h, g, {}, step.stream);
      gated_activation_cuda(act, g, u, u, step.stream);
    } else {
      activation_inplace_cuda(act, u, step.stream);
    }
    down.apply(u, out, {}, step.stream);
  }
};

// The router's projection: an f32 router (DeepSeek's, kept f32 at load as transformers keeps it) as f32 dot
// products over the bf16 normed rows widened (the weights stay f32, so no choice moves by rounding the router); a
// 16-bit one through the GEMM like any projection.
class DeviceRouter {
 public:
  DeviceRouter(const Linear& router, const DeviceLoad& load) {
    const QuantMatrix& m = router.matrix();
    if (m.type != QuantType::F32) {
      gemm_.emplace(router, load);  // with its bias (gpt-oss's), as any projection's
      return;
    }
    if (router.has_bias())
      bias_.emplace(std::vector<float>(router.bias().begin(), router.bias().end()), 1, m.rows, load);
    std::vector<float> host(size_t(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r)
      std::memcpy(host.data() + r * m.cols, m.row(r), size_t(m.cols) * sizeof(float));
    f32_ = DeviceBuffer(load.device, host.size() * sizeof(float));
    f32_.upload(host.data(), f32_.bytes(), load.stream);
    w_ = device_view(load.device, f32_.data(), DType::f32, {m.rows, m.cols});
  }
  void apply(const TensorView& h, const TensorView& logits, Stream s) const {
    if (gemm_) {
      gemm_->apply(h, logits, {}, s);
      return;
    }
    router_logits_cuda(h, w_, logits, s);
    if (bias_) grouped_bias_cuda(logits, bias_->view, nullptr, s);  // after the sum, as Linear adds it
  }

 private:
  std::optional<DeviceLinear> gemm_;
  DeviceBuffer f32_;
  TensorView w_;
  std::optional<DeviceF32> bias_;
};

// The routing variants: each writes ids int32 [T, top_k] and weights f32 [T, top_k] from the router's logits.
struct SoftmaxRouting {
  RouteCudaOptions opts;
  void route(const TensorView& logits, const TensorView& ids, const TensorView& weights, Stream s) const {
    route_top_k_cuda(logits, ids, weights, opts, s);
  }
};
struct GroupedRouting {
  GroupedRouteCudaOptions opts;
  DeviceBuffer bias_bytes;
  TensorView bias;
  void route(const TensorView& logits, const TensorView& ids, const TensorView& weights, Stream s) const {
    route_grouped_top_k_cuda(logits, bias, ids, weights, opts, s);
  }
};

template <class Routing, class Expert>
class DeviceMoe final : public DeviceFfn {
 public:
  // `swiglu`: gpt-oss's activation in place of the experts' own. The experts' biases (gpt-oss's) go on after each
  // grouped GEMM, which adds none.
  DeviceMoe(const Linear& router, const std::vector<Expert>& experts, const Expert* shared,
            const Linear* shared_gate, int64_t top_k, Routing routing, const DeviceLoad& load,
            std::optional<ClampedSwiglu> swiglu = std::nullopt)
      : router_(router, load),
        gate_up_(int64_t(experts.size()), first_pieces(experts), load),
        down_(int64_t(experts.size()), down_pieces(experts), load),
        gate_up_bias_(stacked_bias(int64_t(experts.size()), first_pieces(experts), load)),
        down_bias_(stacked_bias(int64_t(experts.size()), down_pieces(experts), load)),
        routing_(std::move(routing)),
        act_(ExpertKind<Expert>::activation(experts[0])),
        swiglu_(swiglu),
        E_(int64_t(experts.size())),
        k_(top_k),
        H_(ExpertKind<Expert>::down(experts[0]).out_features()),
        I_(ExpertKind<Expert>::down(experts[0]).in_features()) {
    if constexpr (!std::is_same_v<Expert, GptOssExpert>)  // gpt-oss has no shared expert
      if (shared) shared_.emplace(*shared, load);
    if (shared_gate) shared_gate_.emplace(*shared_gate, load);
  }

  // Graph-safe: every launch's grid and arguments follow from T, E and fixed buffers (the grouped GEMM's grid is
  // the worst case, the experts' loads stay on the device), no host sync, no copy, nothing allocated once warm.
  bool replayable() const override { return true; }

  // h: the bf16 normed rows (f32 too), which the router, the shared expert and the gather read as they are.
  void forward(const DeviceStep& step, const TensorView& h, const TensorView& x) const override {
    const int64_t T = step.num_tokens, n = T * k_, E = E_, H = H_, I = I_;
    if (T == 0) return;
    const Stream s = step.stream;
    DeviceWorkspace& ws = *step.workspace;
    auto f32 = [&](size_t slot, std::initializer_list<int64_t> shape, int64_t count) {
      return step.view(ws.get(slot, size_t(count) * 4), DType::f32, shape);
    };
    auto i32 = [&](size_t slot, std::initializer_list<int64_t> shape, int64_t count) {
      return step.view(ws.get(slot, size_t(count) * 4), DType::i32, shape);
    };

    const TensorView logits = f32(kLogits, {T, E}, T * E);
    const TensorView ids = i32(kIds, {T, k_}, n), weights = f32(kWeights, {T, k_}, n);
    router_.apply(h, logits, s);
    routing_.route(logits, ids, weights, s);

    const cuda_gemm::TileKind tile = moe_tile(n, E);
    const int64_t scratch = moe_group_scratch(n, E);  // a prefill's grouping over many CTAs
    const MoeGroupingCuda g{i32(kOffsets, {E + 1}, E + 1), i32(kTiles, {E + 1}, E + 1), i32(kSource, {n}, n),
                            i32(kDest, {n}, n), scratch > 0 ? i32(kGroupCounts, {scratch}, scratch) : TensorView{}};
    moe_group_cuda(ids, E, moe_tile_rows(tile), g, s);
    const DType wt = gate_up_.view().dtype;
    const TensorView gathered = step.view(ws.get(kGathered, size_t(n * H) * 2), wt, {n, H});
    moe_gather_cuda(h, g.source, k_, gathered, s);

    // Gated: gate | up as one [n, 2I] product, the activation over its halves into the gate half, which down
    // reads. Plain: up [n, I], activated in place.
    const int64_t F = gate_up_.view().shape[1];
    float* gu = static_cast<float*>(ws.get(kGateUp, size_t(n * F) * 4));
    const TensorView gu_rows = step.view(gu, DType::f32, {n, F});
    grouped_gemm_cuda(gathered, gate_up_.view(), g, tile, gu_rows, s);
    if (gate_up_bias_) grouped_bias_cuda(gu_rows, gate_up_bias_->view, &g.offsets, s);
    TensorView act = step.view(gu, DType::f32, {n, I});
    if constexpr (ExpertKind<Expert>::kGated) {
      TensorView up = step.view(gu + I, DType::f32, {n, I});
      act.strides[0] = up.strides[0] = 2 * I;
      if (swiglu_) gpt_oss_swiglu_cuda(act, up, swiglu_->alpha, swiglu_->limit, act, s);
      else gated_activation_cuda(act_, act, up, act, s);
    } else {
      activation_inplace_cuda(act_, act, s);
    }
    const TensorView expert_out = f32(kExpertOut, {n, H}, n * H);
    grouped_gemm_cuda(act, down_.view(), g, tile, expert_out, s);
    if (down_bias_) grouped_bias_cuda(expert_out, down_bias_->view, &g.offsets, s);

    TensorView shared_out, shared_logit;
    if (shared_) {
      shared_out = f32(kSharedOut, {T, H}, T * H);
      shared_->forward(step, h, shared_out);
    }
    if (shared_gate_) {
      shared_logit = f32(kSharedLogit, {T, 1}, T);
      shared_gate_->apply(h, shared_logit, {}, s);
    }
    moe_combine_cuda(expert_out, g.dest, weights, shared_ ? &shared_out : nullptr,
                     shared_gate_ ? &shared_logit : nullptr, x, s);
  }

 private:
  static auto first_pieces(const std::vector<Expert>& experts) {
    return [&experts](int64_t e) { return ExpertKind<Expert>::first(experts[size_t(e)]); };
  }
  static auto down_pieces(const std::vector<Expert>& experts) {
    return [&experts](int64_t e) { return std::vector<const Linear*>{&ExpertKind<Expert>::down(experts[size_t(e)])}; };
  }

  DeviceRouter router_;
  StackedWeights gate_up_, down_;
  std::optional<DeviceF32> gate_up_bias_, down_bias_;
  Routing routing_;
  Activation act_;
  std::optional<ClampedSwiglu> swiglu_;
  int64_t E_, k_, H_, I_;
  std::optional<DeviceSharedMlp<Expert>> shared_;
  std::optional<DeviceLinear> shared_gate_;
};

}  // namespace

std::unique_ptr<DeviceFfn> make_device_sparse_moe(const SparseMoe& moe, const DeviceLoad& load) {
  SoftmaxRouting r;
  r.opts.top_k = moe.config().top_k;
  r.opts.order = RouteOrder::softmax_then_top_k;
  r.opts.normalize = moe.config().normalize_top_k;
  return std::make_unique<DeviceMoe<SoftmaxRouting, GatedMlp>>(
      moe.router(), moe.experts(), moe.shared_expert() ? &*moe.shared_expert() : nullptr,
      moe.shared_gate() ? &*moe.shared_gate() : nullptr, r.opts.top_k, std::move(r), load);
}

template <class Expert>
std::unique_ptr<DeviceFfn> make_device_deepseek_moe(const BasicDeepseekMoe<Expert>& moe, const DeviceLoad& load) {
  GroupedRouting r;
  r.opts = grouped_route_options(moe.config());
  const std::vector<float>& bias = moe.correction_bias();
  r.bias_bytes = DeviceBuffer(load.device, bias.size() * sizeof(float));
  r.bias_bytes.upload(bias.data(), r.bias_bytes.bytes(), load.stream);
  r.bias = device_view(load.device, r.bias_bytes.data(), DType::f32, {int64_t(bias.size())});
  const int64_t k = r.opts.top_k;
  return std::make_unique<DeviceMoe<GroupedRouting, Expert>>(
      moe.router(), moe.experts(), moe.shared_experts() ? &*moe.shared_experts() : nullptr, nullptr, k, std::move(r),
      load);
}
template std::unique_ptr<DeviceFfn> make_device_deepseek_moe(const DeepseekMoe&, const DeviceLoad&);
template std::unique_ptr<DeviceFfn> make_device_deepseek_moe(const NemotronHMoe&, const DeviceLoad&);

std::unique_ptr<DeviceFfn> make_device_gpt_oss_moe(const GptOssMoe& moe, const DeviceLoad& load) {
  SoftmaxRouting r;
  r.opts.top_k = moe.config().top_k;
  r.opts.order = RouteOrder::top_k_then_softmax;  // route_top_k_softmax
  return std::make_unique<DeviceMoe<SoftmaxRouting, GptOssExpert>>(
      moe.router(), moe.experts(), nullptr, nullptr, r.opts.top_k, std::move(r), load,
      ClampedSwiglu{moe.config().alpha, moe.config().limit});
}
#endif

}  // namespace attnzoo
