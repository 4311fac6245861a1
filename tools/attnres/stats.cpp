// Paired statistics (see stats.h).
#include "tools/attnres/stats.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "tensor/exercise.h"

namespace dg {

double mean_of(const std::vector<double>& x) {
  if (x.empty()) return 0.0;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double sample_std(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  double m = mean_of(x), acc = 0;
  for (double v : x) acc += (v - m) * (v - m);
  return std::sqrt(acc / static_cast<double>(x.size() - 1));
}

namespace {
// Continued fraction for the regularised incomplete beta function (Lentz's method).
double beta_continued_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-15) break;
  }
  return h;
}

// I_x(a, b)
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0.0;
  if (x >= 1) return 1.0;
  double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0))
    return std::exp(log_front) * beta_continued_fraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * beta_continued_fraction(b, a, 1.0 - x) / b;
}
}  // namespace

double student_t_cdf(double t, double dof) {
  if (dof <= 0) throw std::invalid_argument("student_t_cdf: degrees of freedom must be positive");
  double x = dof / (dof + t * t);
  double tail = 0.5 * incomplete_beta(dof / 2.0, 0.5, x);  // P(T > |t|)
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double q, double dof) {
  if (!(q > 0 && q < 1)) throw std::invalid_argument("student_t_quantile: q must be in (0, 1)");
  double lo = -1e4, hi = 1e4;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    if (student_t_cdf(mid, dof) < q)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

double sign_test_p(int64_t wins, int64_t n) {
  if (n <= 0) return 1.0;
  int64_t k = std::min(wins, n - wins);
  // P(X <= k) for Binomial(n, 1/2), summed in log space.
  double p = 0;
  for (int64_t i = 0; i <= k; ++i)
    p += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) -
                  n * std::log(2.0));
  return std::min(1.0, 2.0 * p);
}

// d_i = method_i − baseline_i per seed; mean d̄, sample std s (ddof 1), se = s/√n, the interval
// d̄ ± t_{0.975, n−1}·se (Student's t, not the normal's 1.96: with 5 seeds t is 2.776), the t
// statistic d̄/se with its two-sided p, and the sign test on the non-tied pairs.
DG_EXERCISE PairedSummary paired_summary(const std::vector<double>& baseline,
                                         const std::vector<double>& method) {
  if (baseline.size() != method.size())
    throw std::invalid_argument(
        "paired_summary: baseline and method have different numbers of seeds");
  PairedSummary s;
  s.n = static_cast<int64_t>(baseline.size());
  for (size_t i = 0; i < baseline.size(); ++i) {
    double d = method[i] - baseline[i];
    s.differences.push_back(d);
    if (d < 0)
      s.wins++;
    else if (d == 0)
      s.ties++;
  }
  s.mean_difference = mean_of(s.differences);
  s.std_difference = sample_std(s.differences);
  if (s.n >= 2) {
    double se = s.std_difference / std::sqrt(static_cast<double>(s.n));
    double tq = student_t_quantile(0.975, static_cast<double>(s.n - 1));
    s.ci95_low = s.mean_difference - tq * se;
    s.ci95_high = s.mean_difference + tq * se;
    if (se > 0) {
      s.t_statistic = s.mean_difference / se;
      s.t_test_p =
          2.0 * (1.0 - student_t_cdf(std::fabs(s.t_statistic), static_cast<double>(s.n - 1)));
    }
  } else {
    s.ci95_low = s.ci95_high = s.mean_difference;
  }
  s.sign_test_p = sign_test_p(s.wins, s.n - s.ties);
  return s;
}

double perplexity_percent(double nll_difference) { return 100.0 * std::expm1(nll_difference); }

std::string paired_verdict(const PairedSummary& s, double bound_percent) {
  if (s.n < 2) return "inconclusive";
  if (s.ci95_high < 0) return "better";
  if (s.ci95_low > 0) return "worse";
  if (std::fabs(perplexity_percent(s.ci95_low)) <= bound_percent &&
      std::fabs(perplexity_percent(s.ci95_high)) <= bound_percent)
    return "bounded";
  return "inconclusive";
}

}  // namespace dg
