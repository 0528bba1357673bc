#include "models/cuda/device_conv_state.h"

#include <algorithm>

#include "layers/sequence_schedule.h"

namespace attnzoo {

#if ATTNZOO_WITH_CUDA
DeviceConvStates::DeviceConvStates(const DeviceStep& step, int64_t layer, int64_t conv_elems, int64_t state_elems)
    : step_(step), decode_(decodes_in_place(*step.batch)) {
  const std::vector<int32_t>& slots = step.batch->state_slots;
  const LayerMemory memory = step.storage->layer(layer);
  // The slab as rows of state_stride floats, as many as the highest slot the batch names (the kernels read only
  // those the index names).
  const int64_t rows = slots.empty() ? 0 : std::max<int64_t>(*std::max_element(slots.begin(), slots.end()) + 1, 0);
  conv_ = step.view(memory.states, DType::f32, {rows, conv_elems});
  state_ = step.view(memory.states + conv_tail_floats(conv_elems), DType::f32, {rows, state_elems});
  conv_.strides[0] = state_.strides[0] = memory.state_stride;
}

DeviceCausalConv::DeviceCausalConv(const std::vector<float>& weight, const std::vector<float>& bias, int64_t kernel,
                                   ConvActivation activation, const DeviceLoad& load)
    : weight_(upload_f32(weight, load)), has_bias_(!bias.empty()), kernel_(kernel), activation_(activation) {
  if (has_bias_) bias_ = upload_f32(bias, load);
}

DeviceCausalConv::DeviceCausalConv(const TensorView& weight, const TensorView& bias, int64_t kernel,
                                   ConvActivation activation, const DeviceLoad& load)
    : DeviceCausalConv(widened_f32(weight), bias.empty() ? std::vector<float>{} : widened_f32(bias), kernel,
                       activation, load) {}

void DeviceCausalConv::apply(const DeviceStep& step, const DeviceConvStates& states, const TensorView& x,
                             const TensorView& y) const {
  const StreamGuard on(step.stream);  // the entry launches on the current stream: a step graph's while capturing
  const int64_t T = x.shape[0], C = x.shape[1], tail = states.conv().shape[1] / C;
  const TensorView weight = step.view(weight_.data(), DType::f32, {C, kernel_});
  const TensorView bias = has_bias_ ? step.view(bias_.data(), DType::f32, {C}) : TensorView{};
  TensorView pool = step.view(states.conv().data, DType::f32, {states.conv().shape[0], C, tail});
  pool.strides[0] = states.conv().strides[0];
  if (states.decode()) {  // one token per sequence
    causal_conv1d_update(step.view(x.data, DType::f32, {T, C}), pool, weight, bias,
                         step.view(y.data, DType::f32, {T, C}), activation_, states.slots());
    return;
  }
  CausalConv1dOptions co;
  co.bias = bias;
  co.initial_state = co.final_state = pool;
  co.conv_state_indices = states.slots();
  co.activation = activation_;
  co.cu_seqlens = step.batch->cu_seqlens.data();
  co.cu_seqlens_len = int64_t(step.batch->cu_seqlens.size());
  causal_conv1d(step.view(x.data, DType::f32, {1, T, C}), weight, step.view(y.data, DType::f32, {1, T, C}), co);
}

DeviceBuffer upload_f32(const std::vector<float>& v, const DeviceLoad& load) {
  DeviceBuffer b(load.device, std::max<size_t>(v.size(), 1) * sizeof(float));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(float), load.stream);  // staged: `v` may go on return
  return b;
}
#endif

bool decodes_in_place(const Batch& batch) {
  const int64_t S = batch.num_sequences();
  return S > 0 && batch.num_tokens() == S && longest_sequence(batch) == 1;
}

int64_t longest_sequence(const Batch& batch) {
  int64_t longest = 0;
  for (int64_t i = 0; i < batch.num_sequences(); ++i) longest = std::max<int64_t>(longest, batch.seq_len(i));
  return longest;
}

TensorView column_slice(const TensorView& t, int64_t from, int64_t cols) {
  TensorView v = t;
  v.data = static_cast<uint8_t*>(t.data) + size_t(from) * dtype_size(t.dtype);
  v.shape[1] = cols;
  return v;
}

TensorView workspace_f32(const DeviceStep& step, size_t slot, int64_t rows, int64_t cols) {
  return step.view(step.workspace->get(slot, size_t(std::max<int64_t>(rows * cols, 1)) * sizeof(float)), DType::f32,
                   {rows, cols});
}

std::vector<float> widened_f32(const TensorView& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = load_as_f32(t.data, t.dtype, i);
  return v;
}

}  // namespace attnzoo
