#include "layers/mlp.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/threads.h"

namespace attnzoo {

namespace {

void check_shape(const Linear& l, int64_t out, int64_t in, const std::string& n) {
  require(l.out_features() == out && l.in_features() == in, n.c_str(),
          "expected weight [" + std::to_string(out) + ", " + std::to_string(in) + "], got " + l.shape_str());
}

}  // namespace

GatedMlp::GatedMlp(Linear gate, Linear up, Linear down, Activation act, const std::string& name)
    : gate_(std::move(gate)), up_(std::move(up)), down_(std::move(down)), act_(act) {
  const int64_t H = down_.out_features(), I = down_.in_features();
  check_shape(gate_, I, H, name + ".gate_proj.weight");
  check_shape(up_, I, H, name + ".up_proj.weight");
}

PlainMlp::PlainMlp(Linear up, Linear down, Activation act, const std::string& name)
    : up_(std::move(up)), down_(std::move(down)), act_(act) {
  check_shape(up_, down_.in_features(), down_.out_features(), name + ".up_proj.weight");
}

void PlainMlp::forward(const float* x, int64_t T, float* out) const { forward(x, T, out, {}); }

void PlainMlp::forward(const float* x, int64_t T, float* out, std::span<const Linear::SharedOutput> beside) const {
  const int64_t I = up_.out_features();
  thread_local std::vector<float> u_scratch;  // grown once, as in GatedMlp
  u_scratch.resize(size_t(T * I));
  float* u = u_scratch.data();
  if (beside.empty()) {
    up_.forward(x, T, u);
  } else {
    Linear::SharedOutput outs[Linear::kMaxShared] = {{&up_, u}};
    require(beside.size() < size_t(Linear::kMaxShared), "beside", "too many projections beside up");
    std::copy(beside.begin(), beside.end(), outs + 1);
    Linear::forward_shared(std::span<const Linear::SharedOutput>(outs, beside.size() + 1), x, T);
  }
  ThreadPool::global().parallel_for(T, [&](int64_t t, int) { apply_activation_inplace(act_, u + t * I, I); });
  down_.forward(u, T, out);
}

void GatedMlp::forward(const float* x, int64_t T, float* out) const { forward(x, T, out, {}); }

void GatedMlp::forward(const float* x, int64_t T, float* out, std::span<const Linear::SharedOutput> beside) const {
  const int64_t I = intermediate();
  // Per-thread scratch, grown once: a decode step allocates nothing here. Tasks on other threads reach it through
  // these pointers (inside a task, the names would be that thread's own, empty, buffers).
  thread_local std::vector<float> g_scratch, u_scratch;
  g_scratch.resize(size_t(T * I));
  u_scratch.resize(size_t(T * I));
  float* g = g_scratch.data();
  float* u = u_scratch.data();
  Linear::SharedOutput outs[Linear::kMaxShared] = {{&gate_, g}, {&up_, u}};
  require(beside.size() + 2 <= size_t(Linear::kMaxShared), "beside", "too many projections beside gate / up");
  std::copy(beside.begin(), beside.end(), outs + 2);
  Linear::forward_shared(std::span<const Linear::SharedOutput>(outs, beside.size() + 2), x, T);
  // exp/tanh per element is not free at prefill sizes: split rows over the pool.
  ThreadPool::global().parallel_for(T, [&](int64_t t, int) { gated_activation(act_, g + t * I, u + t * I, g + t * I, I); });
  down_.forward(g, T, out);
}

}  // namespace attnzoo
