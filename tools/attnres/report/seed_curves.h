// Per-step curves over seeds summarised for drawing (the training-loss charts of report.html): a
// centred moving average, and per step the seeds' mean with a band (min–max, or the 95% t interval
// of the mean), and the first step at which two curves differ. Display arithmetic only: the
// statistics a report states come from result.json ("paired"), never from here.
#pragma once
#include <cstddef>
#include <vector>

namespace dg {

// The moving-average window the report uses for a curve of `steps` points: about 1/40 of the run,
// at least 1 (no smoothing for short runs), odd so it is centred.
size_t smoothing_window(size_t steps);
// Centred moving average over `window` points (shrinking at the ends); NaN points are skipped, and
// a point whose window holds no finite value stays NaN.
std::vector<double> moving_average(const std::vector<double>& y, size_t window);

struct SeedBand {
  std::vector<double> mean, lo, hi;  // per step, up to the shortest curve
};
// Per step over the curves: the mean and the min and max.
SeedBand min_max_band(const std::vector<std::vector<double>>& curves);
// Per step: the mean and its 95% t interval, mean ± t(0.975, n−1)·sd/√n over the n curves;
// lo = hi = mean for a single curve.
SeedBand ci95_band(const std::vector<std::vector<double>>& curves);

// The first index at which a and b differ (exactly, as recorded), or -1 when they agree over
// their common length.
long first_difference(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace dg
