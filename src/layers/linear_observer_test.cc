// The calibration hook belongs to the thread that installs it: a forward pass on another thread is neither seen
// nor able to race on the statistics being collected.
#include "layers/linear_observer.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/error.h"
#include "layers/linear.h"
#include "testing/test_util.h"

namespace attnzoo {
namespace {

using testing::HostTensor;

struct Recorder : LinearInputObserver {
  std::vector<std::string> names;
  std::vector<int64_t> rows;
  void observe(const std::string& name, const float*, int64_t T, int64_t) override {
    names.push_back(name);
    rows.push_back(T);
  }
};

TEST(LinearObserver, SeesOnlyItsOwnThreadsForwardPasses) {
  HostTensor w(DType::f32, {8, 16}, 1, 0.5f);
  const Linear l = Linear::from_weights(w.view, {}, "model.layers.0.mlp.up_proj");
  HostTensor x(DType::f32, {3, 16}, 2);
  std::vector<float> y(3 * 8);
  Recorder mine;
  {
    ScopedLinearObserver observing(&mine);
    std::thread other([&] {
      std::vector<float> y2(3 * 8);
      EXPECT_EQ(linear_input_observer(), nullptr);
      l.forward(x.view.ptr<float>(), 3, y2.data());
      Recorder theirs;  // another thread may calibrate at the same time
      ScopedLinearObserver also(&theirs);
      l.forward(x.view.ptr<float>(), 2, y2.data());
      EXPECT_EQ(theirs.rows, std::vector<int64_t>{2});
    });
    other.join();
    l.forward(x.view.ptr<float>(), 3, y.data());
    EXPECT_THROW(ScopedLinearObserver twice(&mine), ArgumentError);
  }
  EXPECT_EQ(mine.names, std::vector<std::string>{"model.layers.0.mlp.up_proj"});
  EXPECT_EQ(mine.rows, std::vector<int64_t>{3});
  EXPECT_EQ(linear_input_observer(), nullptr);
  l.forward(x.view.ptr<float>(), 3, y.data());
  EXPECT_EQ(mine.rows.size(), 1u);
}

}  // namespace
}  // namespace attnzoo
