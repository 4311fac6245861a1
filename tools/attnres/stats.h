// Small, exact statistics for paired comparisons across seeds: mean, sample standard deviation,
// Student-t quantiles (via the regularised incomplete beta function), a 95% confidence interval
// of a mean difference, and the exact two-sided sign test. No approximations by normal tables.
// It does not do multiple-comparison corrections or Bayesian summaries.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace dg {

// A missing value in a table or a curve (a seed that has no point at a step, a cell not run).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_of(const std::vector<double>& x);
double sample_std(const std::vector<double>& x);  // ddof = 1; 0 for fewer than 2 values
// P(T <= t) for Student's t with `dof` degrees of freedom.
double student_t_cdf(double t, double dof);
// The q-quantile of Student's t (0 < q < 1).
double student_t_quantile(double q, double dof);
// Exact two-sided sign-test p-value for `wins` successes out of `n` non-tied pairs:
// min(1, 2·P(X <= min(wins, n − wins))) with X ~ Binomial(n, ½).
double sign_test_p(int64_t wins, int64_t n);

struct PairedSummary {
  int64_t n = 0;
  std::vector<double> differences;  // method − baseline, per pair
  int64_t wins = 0;                 // pairs where the method is lower (better) than the baseline
  int64_t ties = 0;
  double mean_difference = 0;
  double std_difference = 0;
  double ci95_low = 0, ci95_high = 0;  // t interval of the mean difference (n >= 2)
  double t_statistic = 0;
  double t_test_p = 1;  // two-sided paired t-test
  double sign_test_p = 1;
};
// Paired comparison of per-seed values (lower is better, e.g. validation NLL).
PairedSummary paired_summary(const std::vector<double>& baseline,
                             const std::vector<double>& method);

// The effect of a mean NLL difference d (nats/token) in perplexity: 100·(exp(d) − 1) percent, the
// ratio of the perplexities exp(NLL) of method and baseline. Monotone, so an interval's ends map
// to the interval of the effect.
double perplexity_percent(double nll_difference);

// What a paired comparison settles (n >= 2): "better" / "worse" (the method) when the 95% interval
// excludes zero, "bounded" when both ends of the effect's interval (perplexity_percent) lie within
// ±bound_percent, else "inconclusive". Divergences are the caller's to report beside it.
std::string paired_verdict(const PairedSummary& summary, double bound_percent);
// The bound the paired protocol pre-registers: an interval inside ±0.2% perplexity bounds the
// effect.
constexpr double kEffectBoundPercent = 0.2;

}  // namespace dg
