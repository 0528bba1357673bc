#include "models/cuda/rwkv7_cuda_runner.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/device_unreachable.h"
#include "core/error.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_chunk_cuda.h"
#include "kernels/linear/rwkv7/rwkv7.h"
#include "layers/cuda/embedding_cuda.h"
#include "layers/cuda/rwkv7_step_cuda.h"
#include "models/cuda/decoder_cuda_plan.h"
#include "models/cuda/device_conv_state.h"
#include "models/cuda/device_linear.h"
#include "models/cuda/device_step.h"
#include "models/cuda/runner_step.h"
#include "models/cuda/rwkv7_cuda_plan.h"
#include "models/cuda/rwkv7_prefill_pieces.h"
#include "models/cuda/step_graphs.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
namespace {

// A prefill whose longest sequence has this many tokens takes the chunked RWKV-7 (tensor cores, 64 tokens per step
// of its sequential pass); shorter ones stay token by token, where the chunk's three launches and its scratch cost
// more than the few sequential steps they save.
constexpr int64_t kChunkedPrefillFrom = 32;
constexpr int64_t kChunk = 64;
// The chunked prefill's scratch per layer call, at most: a longer prefill runs in pieces (rwkv7_prefill_pieces.h),
// ~4700 tokens each at 40 heads of 64 (3.5 MB per 64-token chunk).
constexpr size_t kChunkScratchBytes = size_t(256) << 20;

bool prefills_in_chunks(const Batch& batch, int64_t K, int64_t V) {
  int64_t longest = 0;
  for (size_t i = 0; i + 1 < batch.cu_seqlens.size(); ++i)
    longest = std::max<int64_t>(longest, batch.cu_seqlens[i + 1] - batch.cu_seqlens[i]);
  return longest >= kChunkedPrefillFrom && K <= 128 && V <= 128;  // the CUDA chunk's widest heads
}

// The runner's own scratch (it shares no workspace with another model's blocks).
enum Slot : size_t {
  kMixed, kR, kW, kK, kA, kARec, kV, kVGate, kG, kO, kOut, kLora, kLora16, kHidden, kHidden16, kLoraG, kLoraG16
};

// A LayerNorm's widened weight and bias on the device.
struct DeviceLayerNorm {
  DeviceBuffer weight, bias;
  bool has_bias = false;
  float eps = 0.f;
  int64_t dim = 0;

  DeviceLayerNorm() = default;
  DeviceLayerNorm(const LayerNorm& n, const DeviceLoad& load)
      : weight(upload_f32(n.weight(), load)), has_bias(!n.bias().empty()), eps(n.eps()), dim(n.dim()) {
    if (has_bias) bias = upload_f32(n.bias(), load);
  }
  TensorView w(Device d) const { return device_view(d, weight.data(), DType::f32, {dim}); }
  TensorView b(Device d) const { return has_bias ? device_view(d, bias.data(), DType::f32, {dim}) : TensorView{}; }
  void forward(const TensorView& x, const TensorView& y, Stream s) const {
    rwkv7_layer_norm_cuda(x, w(x.device), b(x.device), y, eps, s);
  }
};

struct DeviceLora {
  DeviceLinear down, up;
  DeviceLora(const Rwkv7Lora& l, const DeviceLoad& load) : down(l.down, load), up(l.up, load) {}
};

struct DeviceRwkv7Block {
  std::optional<DeviceLayerNorm> pre_norm;
  DeviceLayerNorm attn_norm, ffn_norm, g_norm;
  Rwkv7TimeMixConfig c;
  DeviceBuffer mixes, k_k, k_a, r_k, ffn_mix;  // mixes [6, C]: x_r, x_w, x_k, x_v, x_a, x_g
  DeviceLinear r_proj, k_proj, v_proj, o_proj, key, value;
  std::vector<DeviceLora> loras;  // w, a, g (, v)
  bool has_v_lora = false;
};

class Rwkv7CudaRunner final : public DeviceRunner {
 public:
  Rwkv7CudaRunner(const Rwkv7Model& m, Device device);
  TensorView run(const Batch& batch, std::span<const int64_t> rows, const CacheStorage& storage) const override;

 private:
  void grow(DeviceBuffer& b, size_t bytes) const { attnzoo::grow(b, device_, bytes); }
  TensorView scratch(Slot slot, DType dtype, std::initializer_list<int64_t> shape) const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    void* data = workspace_.get(slot, size_t(std::max<int64_t>(n, 1)) * dtype_size(dtype));
    return device_view(device_, data, dtype, shape);
  }
  // x [T, C] += the block's time mix of attn_norm(x), then its channel mix of ffn_norm(x) (each norm fused into
  // its sublayer's token shift).
  void time_mix(const DeviceRwkv7Block& b, const LayerMemory& memory, const Batch& batch, const TensorView& x,
                Stream s) const;
  void channel_mix(const DeviceRwkv7Block& b, const LayerMemory& memory, const TensorView& x, Stream s) const;
  // Everything a decode step's launches bake in besides what its one copy brings: shapes, rows, every buffer's
  // and the pool's addresses (step_graphs.h).
  std::vector<uint64_t> step_signature(const Batch& batch, std::span<const int64_t> rows,
                                       const CacheStorage& storage) const;

  Device device_;
  int64_t hidden_ = 0, vocab_ = 0, value_dim_ = 0, inter_ = 0, max_rank_ = 1;
  EmbeddingCuda embed_;
  std::vector<DeviceRwkv7Block> blocks_;
  DeviceLayerNorm norm_;
  DeviceLinear lm_head_;
  mutable DeviceWorkspace workspace_;
  // meta_: the step's int32 tokens [T] | seq_of [T] | cu_seqlens [S + 1] | state_slots [S].
  mutable DeviceBuffer meta_, x_, v_first_, picked_, picked_h_, logits_;
  mutable std::vector<int32_t> staging_;
  mutable const int32_t *seq_of_ = nullptr, *cu_ = nullptr, *slots_ = nullptr;
  mutable DecodePadding padding_;  // a decode step padded to its bucket
  std::unique_ptr<StepGraphs> graphs_;
};

Rwkv7CudaRunner::Rwkv7CudaRunner(const Rwkv7Model& m, Device device)
    : device_(device), hidden_(m.info().hidden_size), vocab_(m.info().vocab_size), workspace_(device) {
  const DeviceGuard guard(device);
  WeightRounding rounded;
  const DeviceLoad load{device, current_stream(), DType::bf16, &rounded,
                        std::make_shared<DequantPanel>(DequantPanel{device, {}})};
  embed_ = make_device_embedding(m.embed(), load);
  for (const Rwkv7Block& src : m.blocks()) {
    DeviceRwkv7Block b;
    const Rwkv7TimeMix& tm = src.time_mix;
    b.c = tm.config();
    value_dim_ = b.c.value_dim();
    if (src.pre_norm) b.pre_norm = DeviceLayerNorm(*src.pre_norm, load);
    b.attn_norm = DeviceLayerNorm(src.attn_norm, load);
    b.ffn_norm = DeviceLayerNorm(src.ffn_norm, load);
    b.g_norm = DeviceLayerNorm(tm.g_norm(), load);
    std::vector<float> mixes;
    for (int c = 0; c < 6; ++c) mixes.insert(mixes.end(), tm.mix(c).begin(), tm.mix(c).end());
    b.mixes = upload_f32(mixes, load);
    b.k_k = upload_f32(tm.k_k(), load);
    b.k_a = upload_f32(tm.k_a(), load);
    b.r_k = upload_f32(tm.r_k(), load);
    b.ffn_mix = upload_f32(src.channel_mix.x_k(), load);
    const Rwkv7TimeMixWeights& w = tm.weights();
    b.r_proj = DeviceLinear(w.r_proj, load);
    b.k_proj = DeviceLinear(w.k_proj, load);
    b.v_proj = DeviceLinear(w.v_proj, load);
    b.o_proj = DeviceLinear(w.o_proj, load);
    for (const Rwkv7Lora* l : {&w.w_lora, &w.a_lora, &w.g_lora}) b.loras.emplace_back(*l, load);
    b.has_v_lora = w.v_lora.has_value();
    if (b.has_v_lora) b.loras.emplace_back(*w.v_lora, load);
    for (const DeviceLora& l : b.loras) max_rank_ = std::max(max_rank_, l.down.out_features());
    b.key = DeviceLinear(src.channel_mix.weights().key, load);
    b.value = DeviceLinear(src.channel_mix.weights().value, load);
    inter_ = std::max(inter_, b.key.out_features());
    blocks_.push_back(std::move(b));
  }
  norm_ = DeviceLayerNorm(m.norm(), load);
  lm_head_ = DeviceLinear(m.lm_head(), load);
  graphs_ = std::make_unique<StepGraphs>(device, cuda_graphs_enabled());
  synchronize(load.stream);
  print_load_notices(rounded, *load.panel, device);
}

void Rwkv7CudaRunner::time_mix(const DeviceRwkv7Block& b, const LayerMemory& memory, const Batch& batch,
                               const TensorView& x, Stream s) const {
  const Rwkv7TimeMixConfig& c = b.c;
  const int64_t T = x.shape[0], C = c.hidden, Dv = c.value_dim(), H = c.num_heads, K = c.head_dim, V = c.head_v_dim;
  const int64_t S = batch.num_sequences();
  const Device d = device_;
  auto f32 = [&](const DeviceBuffer& buf, int64_t n) { return device_view(d, buf.data(), DType::f32, {n}); };

  // attn_norm and the six lerps against each sequence's attn_shift (its slot's first C floats) in one launch.
  const TensorView mixed = scratch(kMixed, DType::bf16, {6, T, C});
  Rwkv7TokenShift shift;
  shift.x = x;
  shift.norm_weight = b.attn_norm.w(d), shift.norm_bias = b.attn_norm.b(d), shift.eps = b.attn_norm.eps;
  shift.mixes = device_view(d, b.mixes.data(), DType::f32, {6, C});
  shift.out = mixed;
  shift.shift = memory.states;
  shift.shift_stride = memory.state_stride;
  shift.slots = slots_, shift.seq_of = seq_of_, shift.cu_seqlens = cu_;
  rwkv7_shift_mix_cuda(shift, s);
  auto lerp = [&](int m) {
    return device_view(d, mixed.ptr<uint8_t>() + size_t(m * T * C) * 2, DType::bf16, {T, C});
  };

  const TensorView r = scratch(kR, DType::f32, {T, C}), w = scratch(kW, DType::f32, {T, C}),
                   k = scratch(kK, DType::f32, {T, C}), a = scratch(kA, DType::f32, {T, C}),
                   a_rec = scratch(kARec, DType::f32, {T, C}), v = scratch(kV, DType::f32, {T, Dv}),
                   g = scratch(kG, DType::f32, {T, Dv}), o = scratch(kO, DType::f32, {T, Dv});
  // up(act(down(x))): the middle computed in f32 and rounded to bf16 for the up projection, w's tanh and g's sigmoid
  // in one launch; a and v (no activation): down writes bf16.
  auto plain_lora = [&](const DeviceLora& l, const TensorView& in, const TensorView& out) {
    const TensorView mid16 = scratch(kLora16, DType::bf16, {T, l.down.out_features()});
    l.down.apply(in, mid16, {}, s);
    l.up.apply(mid16, out, {}, s);
  };
  b.r_proj.apply(lerp(0), r, {}, s);
  const DeviceLora &w_lora = b.loras[0], &g_lora = b.loras[2];
  const int64_t w_rank = w_lora.down.out_features(), g_rank = g_lora.down.out_features();
  const TensorView w_mid = scratch(kLora, DType::f32, {T, w_rank}), g_mid = scratch(kLoraG, DType::f32, {T, g_rank}),
                   w_mid16 = scratch(kLora16, DType::bf16, {T, w_rank}),
                   g_mid16 = scratch(kLoraG16, DType::bf16, {T, g_rank});
  w_lora.down.apply(lerp(1), w_mid, {}, s);
  g_lora.down.apply(lerp(5), g_mid, {}, s);
  rwkv7_activate_pair_cuda(Rwkv7Activation::tanh, w_mid, w_mid16, Rwkv7Activation::sigmoid, g_mid, g_mid16, s);
  w_lora.up.apply(w_mid16, w, {}, s);  // its decay comes with the key preparation
  g_lora.up.apply(g_mid16, g, {}, s);
  b.k_proj.apply(lerp(2), k, {}, s);
  b.v_proj.apply(lerp(3), v, {}, s);
  TensorView v_gate;
  if (b.has_v_lora) {
    v_gate = scratch(kVGate, DType::f32, {T, Dv});
    plain_lora(b.loras[3], lerp(3), v_gate);
  }
  plain_lora(b.loras[1], lerp(4), a);

  Rwkv7Keys keys;
  keys.k = k, keys.a = a, keys.a_rec = a_rec, keys.v = v, keys.v_gate = v_gate, keys.w = w;
  keys.k_k = f32(b.k_k, C), keys.k_a = f32(b.k_a, C);
  keys.v_first = device_view(d, v_first_.data(), DType::f32, {T, Dv});
  keys.heads = H;
  keys.fused_l2norm = c.fused_l2norm;
  rwkv7_prepare_keys_cuda(keys, s);

  // The wkv states: each sequence's slot past its two shift rows, read and written in place through the step's
  // uploaded slots (ssm_state_indices; a pad's -1 is skipped): a decode step by the recurrence, a prefill by the
  // packed recurrence or, when a sequence is long enough (prefills_in_chunks), the chunked form in pieces of at
  // most kChunkScratchBytes of scratch (both upload the batch's, or the piece's, cu_seqlens).
  const int64_t pool_rows = batch.state_slots.empty()
                                ? 0
                                : int64_t(*std::max_element(batch.state_slots.begin(), batch.state_slots.end())) + 1;
  const bool in_place = decodes_in_place(batch);
  Rwkv7Args args;
  const int64_t B = in_place ? S : 1, L = in_place ? 1 : T;
  auto keyed = [&](const TensorView& t) { return device_view(d, t.data, DType::f32, {B, L, H, K}); };
  args.r = keyed(r), args.w = keyed(w), args.k = keyed(k), args.a = keyed(a_rec), args.b = keyed(a);
  args.v = device_view(d, v.data, DType::f32, {B, L, H, V});
  args.o = device_view(d, o.data, DType::f32, {B, L, H, V});
  args.scale = 1.f;
  TensorView pool = device_view(d, memory.states + 2 * C, DType::f32, {pool_rows, H, K, V});
  pool.strides[0] = memory.state_stride;
  args.initial_state = args.final_state = pool;
  args.ssm_state_indices = slots_;
  if (in_place) {
    recurrent_rwkv7(args);  // on the current stream (s)
  } else {
    args.cu_seqlens = batch.cu_seqlens.data();
    args.cu_seqlens_len = int64_t(batch.cu_seqlens.size());
    if (prefills_in_chunks(batch, K, V)) {
      const int64_t max_chunks =
          std::max<int64_t>(1, int64_t(kChunkScratchBytes / rwkv7_chunk_scratch_per_chunk(H, K, V, kChunk)));
      for (const Rwkv7PrefillPiece& piece : plan_rwkv7_prefill_pieces(batch.cu_seqlens, kChunk, max_chunks))
        chunk_rwkv7(rwkv7_piece_args(args, piece), kChunk);
    } else {
      recurrent_rwkv7(args);
    }
  }

  Rwkv7Output out;
  out.o = o, out.r = r, out.k = k, out.v = v, out.g = g;
  out.norm_weight = b.g_norm.w(d), out.norm_bias = b.g_norm.b(d);
  out.r_k = f32(b.r_k, C);
  out.out = scratch(kOut, DType::bf16, {T, Dv});
  out.heads = H;
  out.eps = b.g_norm.eps;
  rwkv7_output_cuda(out, s);
  b.o_proj.apply_add(out.out, x, s);
}

void Rwkv7CudaRunner::channel_mix(const DeviceRwkv7Block& b, const LayerMemory& memory, const TensorView& x,
                                  Stream s) const {
  const int64_t T = x.shape[0], C = hidden_, I = b.key.out_features();
  Rwkv7TokenShift shift;  // ffn_norm and the lerp in one launch
  shift.x = x;
  shift.norm_weight = b.ffn_norm.w(device_), shift.norm_bias = b.ffn_norm.b(device_), shift.eps = b.ffn_norm.eps;
  shift.mixes = device_view(device_, b.ffn_mix.data(), DType::f32, {1, C});
  shift.out = scratch(kMixed, DType::bf16, {1, T, C});
  shift.shift = memory.states + C;  // ffn_shift: the slot's second C floats
  shift.shift_stride = memory.state_stride;
  shift.slots = slots_, shift.seq_of = seq_of_, shift.cu_seqlens = cu_;
  rwkv7_shift_mix_cuda(shift, s);
  const TensorView hidden = scratch(kHidden, DType::f32, {T, I}), hidden16 = scratch(kHidden16, DType::bf16, {T, I});
  b.key.apply(device_view(device_, shift.out.data, DType::bf16, {T, C}), hidden, {}, s);
  rwkv7_activate_cuda(Rwkv7Activation::relu2, hidden, hidden16, s);
  b.value.apply_add(hidden16, x, s);
}

TensorView Rwkv7CudaRunner::run(const Batch& requested, std::span<const int64_t> requested_rows,
                                const CacheStorage& storage) const {
  // A pad's state slot -1 (a decode step padded to its bucket) is skipped by the token shift and the recurrence.
  const RunnerStep run_step(device_, padding_, requested, requested_rows, graphs_->enabled());
  const Stream s = run_step.stream;
  const std::span<const int64_t> rows = run_step.rows;
  const Batch& batch = run_step.batch;
  const int64_t T = batch.num_tokens(), S = batch.num_sequences(), C = hidden_, R = int64_t(rows.size());

  // One copy up: tokens | seq_of | cu_seqlens | state_slots.
  staging_.assign(batch.tokens.begin(), batch.tokens.end());
  for (int64_t q = 0; q < S; ++q) staging_.insert(staging_.end(), size_t(batch.seq_len(q)), int32_t(q));
  staging_.insert(staging_.end(), batch.cu_seqlens.begin(), batch.cu_seqlens.end());
  staging_.insert(staging_.end(), batch.state_slots.begin(), batch.state_slots.end());
  grow(meta_, staging_.size() * 4);
  copy_bytes(meta_.data(), device_, staging_.data(), Device::cpu(), staging_.size() * 4, s);
  const int32_t* meta = meta_.as<int32_t>();
  seq_of_ = meta + T;
  cu_ = seq_of_ + T;
  slots_ = cu_ + S + 1;

  grow(x_, size_t(T * C) * 4);
  grow(v_first_, size_t(T * std::max<int64_t>(value_dim_, 1)) * 4);
  grow(picked_, size_t(R * C) * 4);
  grow(picked_h_, size_t(R * C) * 4);
  grow(logits_, size_t(R * vocab_) * 4);
  const TensorView x = device_view(device_, x_.data(), DType::f32, {T, C});

  // Everything the step launches, on stream `cs`: what a step graph captures and replays.
  auto compute = [&](Stream cs) {
    const StreamGuard on(cs);  // the recurrence launches on the current stream: a step graph's while capturing
    if (T > 0) {
      embed_.lookup(device_view(device_, const_cast<int32_t*>(meta), DType::i32, {T}), x, 1.f, /*check_ids=*/false,
                    cs);
      for (size_t l = 0; l < blocks_.size(); ++l) {
        const DeviceRwkv7Block& b = blocks_[l];
        const LayerMemory memory = storage.layer(int64_t(l));
        if (b.pre_norm) b.pre_norm->forward(x, x, cs);  // the residual stream itself is normed
        time_mix(b, memory, batch, x, cs);
        channel_mix(b, memory, x, cs);
      }
    }
    if (R == 0) return;
    // Only the requested rows reach the final norm and the head.
    gather_rows(x_, picked_, rows, size_t(C) * 4, device_, cs);
    const TensorView picked = device_view(device_, picked_.data(), DType::f32, {R, C});
    const TensorView normed = device_view(device_, picked_h_.data(), DType::f32, {R, C});
    norm_.forward(picked, normed, cs);
    lm_head_.apply(normed, device_view(device_, logits_.data(), DType::f32, {R, vocab_}), {}, cs);
  };

  // A decode step (every sequence one token: the recurrence in place, nothing uploaded inside the launches) goes
  // through the step graphs; a prefill's recurrence uploads its cu_seqlens per call, so it launches as it is.
  run_step.launch(*graphs_, decodes_in_place(batch), [&] { return step_signature(batch, rows, storage); }, compute);
  return run_step.logits(device_, logits_.data(), vocab_);
}

std::vector<uint64_t> Rwkv7CudaRunner::step_signature(const Batch& batch, std::span<const int64_t> rows,
                                                      const CacheStorage& storage) const {
  auto ptr = [](const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); };
  std::vector<uint64_t> sig = step_signature_start(batch.num_tokens(), rows,
                                                   {&meta_, &x_, &v_first_, &picked_, &picked_h_, &logits_},
                                                   workspace_.generation());
  sig.push_back(uint64_t(batch.num_sequences()));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const LayerMemory m = storage.layer(int64_t(l));
    sig.push_back(ptr(m.states));
    sig.push_back(uint64_t(m.state_stride));
  }
  return sig;
}

}  // namespace
#endif

std::unique_ptr<DeviceRunner> make_rwkv7_cuda_runner(const Rwkv7Model& model, Device device, DType kv_dtype) {
  (void)kv_dtype;  // no KV cache: the pool's slots are f32 whatever the KV dtype
  check_rwkv7_runs_on_cuda(model);
#if ATTNZOO_WITH_CUDA
  return std::make_unique<Rwkv7CudaRunner>(model, device);
#else
  throw device_unreachable("device", device);
#endif
}

}  // namespace attnzoo
