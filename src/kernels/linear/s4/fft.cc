#include "kernels/linear/s4/fft.h"

#include <cmath>
#include <map>
#include <mutex>
#include <vector>

namespace attnzoo::s4fft {

size_t size_for(int64_t len) {
  size_t n = 2;
  while (n < size_t(2 * len)) n *= 2;
  return n;
}

const float* twiddles(size_t n) {
  static std::mutex mutex;
  static std::map<size_t, std::vector<float>> tables;  // map nodes never move: returned pointers stay valid
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<float>& t = tables[n];
  if (t.empty()) {
    t.resize(n);
    const double step = -2.0 * M_PI / double(n);
    for (size_t k = 0; k < n / 2; ++k) {
      t[k] = float(std::cos(step * double(k)));
      t[n / 2 + k] = float(std::sin(step * double(k)));
    }
  }
  return t.data();
}

}  // namespace attnzoo::s4fft
