// Paired statistics against textbook values.
#include <doctest/doctest.h>

#include <cmath>

#include "tools/attnres/stats.h"

using namespace dg;

TEST_CASE("Student t quantiles match tables") {
  CHECK(student_t_quantile(0.975, 9) == doctest::Approx(2.2621571628).epsilon(1e-8));
  CHECK(student_t_quantile(0.975, 4) == doctest::Approx(2.7764451052).epsilon(1e-8));
  CHECK(student_t_quantile(0.975, 1) == doctest::Approx(12.7062047362).epsilon(1e-8));
  CHECK(student_t_quantile(0.5, 7) == doctest::Approx(0.0).scale(1));
  CHECK(student_t_cdf(0.0, 3) == doctest::Approx(0.5));
  // t with 1 dof is Cauchy: cdf(t) = 1/2 + atan(t)/π
  CHECK(student_t_cdf(1.7, 1) == doctest::Approx(0.5 + std::atan(1.7) / M_PI).epsilon(1e-10));
}

TEST_CASE("exact sign test") {
  CHECK(sign_test_p(10, 10) == doctest::Approx(2.0 / 1024.0).epsilon(1e-12));
  CHECK(sign_test_p(8, 10) == doctest::Approx(2.0 * 56.0 / 1024.0).epsilon(1e-12));
  CHECK(sign_test_p(2, 10) == doctest::Approx(2.0 * 56.0 / 1024.0).epsilon(1e-12));
  CHECK(sign_test_p(5, 10) == doctest::Approx(1.0));
  CHECK(sign_test_p(0, 0) == 1.0);
}

TEST_CASE("paired summary of per-seed differences") {
  std::vector<double> base{5.0, 5.1, 4.9, 5.2, 5.0}, method{4.9, 5.05, 4.95, 5.1, 4.8};
  PairedSummary s = paired_summary(base, method);
  CHECK(s.n == 5);
  CHECK(s.wins == 4);
  CHECK(s.mean_difference == doctest::Approx(-0.08).epsilon(1e-12));
  // differences: -0.1 -0.05 +0.05 -0.1 -0.2 ; sample std:
  double m = -0.08, ss = 0;
  for (double d : {-0.1, -0.05, 0.05, -0.1, -0.2}) ss += (d - m) * (d - m);
  double sd = std::sqrt(ss / 4);
  CHECK(s.std_difference == doctest::Approx(sd).epsilon(1e-10));
  double half = 2.7764451052 * sd / std::sqrt(5.0);
  CHECK(s.ci95_low == doctest::Approx(m - half).epsilon(1e-8));
  CHECK(s.ci95_high == doctest::Approx(m + half).epsilon(1e-8));
  CHECK(s.sign_test_p == doctest::Approx(2.0 * 6.0 / 32.0).epsilon(1e-12));
  CHECK_THROWS(paired_summary({1.0}, {1.0, 2.0}));
}
