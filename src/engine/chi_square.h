#pragma once
// Pearson's chi-square goodness of fit, for the sampler's statistical tests: do sampled counts match the
// probabilities they were drawn from? Cells expected to hold fewer than 5 draws are pooled into one, as the
// test's approximation requires.
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnzoo {

// Regularised upper incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a): power series below a + 1, Lentz's
// continued fraction above (each converges fast on its side).
inline double upper_incomplete_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-15; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
  int64_t draws_outside_support = 0;  // draws of tokens whose probability is exactly 0: never acceptable
};

inline ChiSquare chi_square_fit(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t n = 0;
  for (auto c : counts) n += c;
  ChiSquare r;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      r.draws_outside_support += counts[i];
      continue;
    }
    const double e = probs[i] * double(n);
    if (e < 5) {
      pooled_expected += e;
      pooled_observed += double(counts[i]);
      continue;
    }
    r.statistic += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
    ++cells;
  }
  if (pooled_expected > 0) {
    r.statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  r.dof = cells - 1;
  r.p_value = r.dof > 0 ? upper_incomplete_gamma_q(r.dof / 2.0, r.statistic / 2.0) : 1.0;
  return r;
}

}  // namespace attnzoo
