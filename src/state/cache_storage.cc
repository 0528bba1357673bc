#include "state/cache_storage.h"

#include <sys/mman.h>

#include <cstring>
#include <string>

#include "core/error.h"

namespace attnzoo {

CacheStorage::CacheStorage(const CacheGeometry& g) : device_(g.options.device) {
  const int64_t nb = g.num_blocks, B = g.block_tokens;
  mapped_bytes_ = g.bytes();
  if (mapped_bytes_ > 0 && !device_.is_cpu()) {
    try {
      device_memory_ = DeviceBuffer(device_, size_t(mapped_bytes_));
    } catch (const DeviceError& e) {
      if (cuda_device_count() > device_.index && device_.index >= 0)  // present, so it is the memory that is short
        throw PoolExhausted("kv_cache_memory: cannot allocate " + std::to_string((mapped_bytes_ + (1 << 19)) >> 20) +
                            " MiB on " + device_.str() + " (" + e.what() + ")");
      throw;
    }
    base_ = device_memory_.as<uint8_t>();
  } else if (mapped_bytes_ > 0) {
    // Reserved, not committed: pages are backed when first written, so a large budget costs nothing up front.
    void* p = mmap(nullptr, size_t(mapped_bytes_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
      throw PoolExhausted("kv_cache_memory: cannot reserve " + std::to_string((mapped_bytes_ + (1 << 19)) >> 20) +
                          " MiB");
    base_ = static_cast<uint8_t*>(p);
  }
  uint8_t* at = base_;
  slots_.resize(g.slot_specs.size());
  // Quantized pools: every scale tensor first, so the f32 scales stay aligned whatever the byte tensors' sizes.
  for (size_t j = 0; j < g.slot_specs.size(); ++j) {
    const CacheSpec& s = g.slot_specs[j];
    if (s.token_scales() == 0) continue;
    for (TensorView* t : {&slots_[j].k_scale, &slots_[j].v_scale}) {
      if (t == &slots_[j].v_scale && s.paged_tensors != 2) break;
      *t = TensorView::contiguous(at, DType::f32, {nb, B, s.heads});
      at += nb * B * s.token_scales() * int64_t(sizeof(float));
    }
  }
  for (size_t j = 0; j < g.slot_specs.size(); ++j) {
    const CacheSpec& s = g.slot_specs[j];
    const int64_t tensor_bytes = nb * B * s.token_elems() * int64_t(dtype_size(s.dtype));
    slots_[j].k = TensorView::contiguous(at, s.dtype, {nb, B, s.heads, s.head_dim});
    at += tensor_bytes;
    if (s.paged_tensors == 2) {
      slots_[j].v = TensorView::contiguous(at, s.dtype, {nb, B, s.heads, s.head_dim});
      at += tensor_bytes;
    }
  }
  for (LayerMemory& m : slots_)
    for (TensorView* t : {&m.k, &m.v, &m.k_scale, &m.v_scale}) t->device = device_;
  layers_.resize(g.specs.size());
  for (size_t l = 0; l < g.specs.size(); ++l) {
    if (g.layout.group_of[l] < 0) continue;
    layers_[l] = slots_[size_t(g.layout.slot_of[l])];
    layers_[l].block_group = g.layout.group_of[l];
  }
  for (size_t l = 0; l < g.specs.size(); ++l) {
    if (g.specs[l].state_floats == 0) continue;
    layers_[l].states = reinterpret_cast<float*>(at);
    layers_[l].state_stride = g.state_stride(l);
    at += g.num_slots() * layers_[l].state_stride * int64_t(sizeof(float));
  }
}

CacheStorage::~CacheStorage() {
  if (base_ && device_.is_cpu()) munmap(base_, size_t(mapped_bytes_));
}

void CacheStorage::apply(std::span<const CacheOp> ops) {
  if (ops.empty()) return;
  std::lock_guard lock(mu_);
  const DeviceGuard on(device_);
  stream_ = device_.is_cpu() ? Stream{} : current_stream();
  for (const CacheOp& op : ops) {
    switch (op.kind) {
      case CacheOp::Kind::copy_block: copy_block(op.from, op.to); break;
      case CacheOp::Kind::copy_state: copy_state(op.from, op.to); break;
      case CacheOp::Kind::zero_state: zero_state(op.to); break;
    }
  }
}

void CacheStorage::zero_state(int32_t slot) {
  for (const auto& l : layers_)
    if (l.states) zero_bytes(l.state(slot), device_, size_t(l.state_stride) * sizeof(float), stream_);
}

void CacheStorage::copy_state(int32_t from, int32_t to) {
  for (const auto& l : layers_)
    if (l.states) copy_bytes(l.state(to), device_, l.state(from), device_, size_t(l.state_stride) * sizeof(float), stream_);
}

void CacheStorage::copy_block(int32_t from, int32_t to) {
  for (const auto& l : slots_)
    for (const TensorView* t : {&l.k, &l.v, &l.k_scale, &l.v_scale}) {
      if (t->ndim < 3) continue;
      const size_t bytes = size_t(t->numel() / t->shape[0]) * dtype_size(t->dtype);
      auto* base = static_cast<uint8_t*>(t->data);
      copy_bytes(base + size_t(to) * bytes, device_, base + size_t(from) * bytes, device_, bytes, stream_);
    }
}

}  // namespace attnzoo
