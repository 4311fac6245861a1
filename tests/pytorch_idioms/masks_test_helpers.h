// Helpers of tests/test_masks.cpp and tests/test_pytorch_idioms_masks.cpp: the input patterns and
// module weights tools/pytorch_idioms/masks.py builds with the same formulas, and the comparisons.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"
#include "tests/pytorch_idioms/masks_goldens.h"

namespace masks_test {

// ((k * mul) % mod - shift) / div for k in 0..n-1 (the generator's pattern()).
inline std::vector<double> pattern(int64_t n, int mul, int mod, int shift, double div) {
  std::vector<double> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>((k * mul) % mod - shift) / div;
  return v;
}

inline dg::Tensor tensor(const std::vector<double>& v, const dg::Shape& shape,
                         dg::DType dtype = dg::DType::f64, bool requires_grad = false) {
  dg::Tensor t = dg::Tensor::from_vector(v, shape, dtype);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

// The gradient of sum(w ⊙ y) with the generator's weights w = pattern(n, 3, 7, 3, 4) + 0.1, for
// each input (leaves that require grad), as the generator's grad_of.
inline std::vector<dg::Tensor> grad_of(const dg::Tensor& y, const std::vector<dg::Tensor>& xs) {
  std::vector<double> w = pattern(y.numel(), 3, 7, 3, 4.0);
  for (double& x : w) x += 0.1;
  const dg::Tensor loss = dg::sum(dg::mul(y, dg::Tensor::from_vector(w, y.shape(), y.dtype())));
  return dg::grad({loss}, xs);
}

// Each parameter, in sorted name order i, = pattern(n, 5 + 2i, 17 + i, 8, 20) (fill_module).
inline void fill_module(const dg::Module& m) {
  std::vector<dg::NamedTensor> params = m.named_parameters();
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < params.size(); ++i) {
    dg::Tensor p = params[i].second;
    const int k = static_cast<int>(i);
    p.copy_from(dg::Tensor::from_vector(pattern(p.numel(), 5 + 2 * k, 17 + k, 8, 20.0), p.shape(),
                                        p.dtype()));
  }
}

// |got − want| <= tolerance · (1 + |want|) elementwise, equal sizes; NaN matches NaN.
inline void check_close(const dg::Tensor& got, const std::vector<double>& want, double tolerance) {
  const std::vector<double> g = got.to_vector();
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(g[i]));
      continue;
    }
    CHECK(std::abs(g[i] - want[i]) <= tolerance * (1 + std::abs(want[i])));
  }
}

// Exact equality of values and dtype (bool and integer results).
inline void check_exact(const dg::Tensor& got, const std::vector<double>& want, dg::DType dtype) {
  CHECK(dg::dtype_name(got.dtype()) == std::string(dg::dtype_name(dtype)));
  const std::vector<double> g = got.to_vector();
  std::string shown;  // got / want, for the failure message
  for (double v : g) shown += std::to_string(v) + " ";
  shown += "/ ";
  for (double v : want) shown += std::to_string(v) + " ";
  CAPTURE(shown);
  CHECK(g == want);
}

}  // namespace masks_test
