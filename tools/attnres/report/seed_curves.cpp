// Moving averages and per-step bands over seeds for the report's charts (see seed_curves.h).
#include "tools/attnres/report/seed_curves.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/attnres/stats.h"

namespace dg {

namespace {

size_t shortest(const std::vector<std::vector<double>>& curves) {
  if (curves.empty()) return 0;
  size_t n = curves[0].size();
  for (const auto& c : curves) n = std::min(n, c.size());
  return n;
}

// The finite values of the curves at step k.
std::vector<double> column(const std::vector<std::vector<double>>& curves, size_t k) {
  std::vector<double> v;
  for (const auto& c : curves)
    if (std::isfinite(c[k])) v.push_back(c[k]);
  return v;
}
}  // namespace

size_t smoothing_window(size_t steps) {
  const size_t w = steps / 40;
  return w <= 1 ? 1 : w | 1;  // odd: centred
}

std::vector<double> moving_average(const std::vector<double>& y, size_t window) {
  const size_t half = std::max<size_t>(window, 1) / 2;
  std::vector<double> out(y.size(), kNaN);
  for (size_t k = 0; k < y.size(); ++k) {
    const size_t first = k >= half ? k - half : 0, last = std::min(y.size() - 1, k + half);
    double sum = 0;
    size_t n = 0;
    for (size_t i = first; i <= last; ++i)
      if (std::isfinite(y[i])) sum += y[i], ++n;
    if (n > 0) out[k] = sum / static_cast<double>(n);
  }
  return out;
}

SeedBand min_max_band(const std::vector<std::vector<double>>& curves) {
  SeedBand b;
  for (size_t k = 0; k < shortest(curves); ++k) {
    const std::vector<double> v = column(curves, k);
    if (v.empty()) {
      b.mean.push_back(kNaN), b.lo.push_back(kNaN), b.hi.push_back(kNaN);
      continue;
    }
    b.mean.push_back(mean_of(v));
    b.lo.push_back(*std::min_element(v.begin(), v.end()));
    b.hi.push_back(*std::max_element(v.begin(), v.end()));
  }
  return b;
}

SeedBand ci95_band(const std::vector<std::vector<double>>& curves) {
  SeedBand b;
  std::vector<double> t_of_n(curves.size() + 1, kNaN);  // t(0.975, n − 1), computed once per n
  for (size_t k = 0; k < shortest(curves); ++k) {
    const std::vector<double> v = column(curves, k);
    if (v.empty()) {
      b.mean.push_back(kNaN), b.lo.push_back(kNaN), b.hi.push_back(kNaN);
      continue;
    }
    const double m = mean_of(v);
    double half = 0;
    if (v.size() > 1) {
      const double n = static_cast<double>(v.size());
      double& t = t_of_n[v.size()];
      if (std::isnan(t)) t = student_t_quantile(0.975, n - 1);
      half = t * sample_std(v) / std::sqrt(n);
    }
    b.mean.push_back(m);
    b.lo.push_back(m - half);
    b.hi.push_back(m + half);
  }
  return b;
}

long first_difference(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t k = 0; k < std::min(a.size(), b.size()); ++k)
    if (a[k] != b[k]) return static_cast<long>(k);
  return -1;
}

}  // namespace dg
