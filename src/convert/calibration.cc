#include "convert/calibration.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.h"
#include "layers/batch.h"
#include "layers/linear_observer.h"
#include "loader/text_file.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {
namespace {

// Sums x^2 per input channel (double, so long texts lose nothing) and counts tokens, per Linear name.
class SquareSums : public LinearInputObserver {
 public:
  void observe(const std::string& name, const float* x, int64_t T, int64_t in) override {
    std::lock_guard<std::mutex> lock(mu_);
    Acc& a = sums_[name];
    if (a.sum.empty()) a.sum.assign(size_t(in), 0.0);
    if (int64_t(a.sum.size()) != in) return;  // a name reused with another width: keep the first
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < in; ++c) a.sum[size_t(c)] += double(x[t * in + c]) * double(x[t * in + c]);
    a.rows += T;
  }

  std::vector<std::pair<std::string, std::vector<float>>> means() const {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    for (const auto& [name, a] : sums_) {
      if (name.empty() || a.rows == 0) continue;
      std::vector<float> m(a.sum.size());
      for (size_t c = 0; c < m.size(); ++c) m[c] = float(a.sum[c] / double(a.rows));
      out.emplace_back(name + ".weight", std::move(m));
    }
    return out;
  }

 private:
  struct Acc {
    std::vector<double> sum;
    int64_t rows = 0;
  };
  std::mutex mu_;
  std::map<std::string, Acc> sums_;
};

}  // namespace

CalibrationStats collect_importance(const std::string& model_dir, const std::string& text_path, int64_t chunk,
                                    int64_t max_tokens, const std::string& argument) {
  if (chunk <= 0) throw ArgumentError("calibration chunk: expected a positive token count, got " + std::to_string(chunk));
  const std::string what = argument + ": '" + text_path + "'";
  std::string text = read_text_file(argument, text_path);
  require_utf8(text, what);
  const auto tokenizer = tok::Tokenizer::load(model_dir);
  std::vector<int32_t> ids = tokenizer->encode(text, false);
  text = std::string();  // the tokens replace it: not held while the model runs
  if (max_tokens > 0 && int64_t(ids.size()) > max_tokens) ids.resize(size_t(max_tokens));
  if (ids.empty()) throw ArgumentError(what + ": tokenizes to no tokens");

  const auto model = Model::load(model_dir);
  SquareSums sums;
  CalibrationStats stats;
  {
    ScopedLinearObserver observing(&sums);
    for (size_t at = 0; at < ids.size(); at += size_t(chunk)) {
      const size_t n = std::min(size_t(chunk), ids.size() - at);
      auto seq = model->new_sequence();
      Batch batch;
      batch.add(*seq, std::span<const int32_t>(ids.data() + at, n));
      model->forward(batch, false);  // every row: a last-row-only call could reuse a cached prefix and skip it
      stats.tokens += int64_t(n);
      ++stats.chunks;
    }
  }
  stats.importance = sums.means();
  return stats;
}

}  // namespace attnzoo
