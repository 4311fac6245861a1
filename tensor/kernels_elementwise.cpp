// Reductions used by elementwise ops and their backwards (see kernels_elementwise.h).
#include "tensor/kernels_elementwise.h"

#include <fmt/format.h>

#include <algorithm>

namespace dg {

namespace {
// Shape after reducing `axes`.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    bool reduced = std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!reduced) out.push_back(shape[k]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}
}  // namespace

// a [..] -> kept axes first, reduced axes last, then one sum per output element (row of the
// permuted copy), accumulated in order in double: one owner thread per output element.
Tensor sum_axes(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  const int64_t rank = a.dim();
  Shape order;
  for (int64_t k = 0; k < rank; ++k)
    if (std::find(axes.begin(), axes.end(), k) == axes.end()) order.push_back(k);
  for (int64_t k : axes) order.push_back(k);
  Tensor permuted = a.view_permute(order).contiguous();
  Tensor out = Tensor::empty(reduced_shape(a.shape(), axes, keepdim), a.dtype());
  const int64_t rows = out.numel();
  const int64_t inner = rows ? a.numel() / rows : 0;
  dispatch_float(a.dtype(), "sum", [&]<class T>() {
    const T* p = permuted.data<T>();
    T* o = out.data<T>();
#pragma omp parallel for if (a.numel() > kParallelGrain) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0.0;
      const T* row = p + r * inner;
      for (int64_t j = 0; j < inner; ++j) acc += row[j];
      o[r] = static_cast<T>(acc);
    }
  });
  return out;
}

Tensor ref_sum_axes(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  Tensor out = Tensor::zeros(reduced_shape(a.shape(), axes, keepdim), a.dtype());
  Shape out_keep = reduced_shape(a.shape(), axes, true);
  std::vector<double> acc(out.numel(), 0.0);
  std::vector<double> values = a.to_vector();
  Shape out_strides = contiguous_strides(out_keep);
  Shape index(a.dim(), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), pos = 0;
    for (int64_t k = a.dim() - 1; k >= 0; --k) {
      index[k] = rest % a.shape()[k];
      rest /= a.shape()[k];
      if (out_keep[k] != 1) pos += index[k] * out_strides[k];
    }
    acc[pos] += values[i];
  }
  dispatch_float(a.dtype(), "sum", [&]<class T>() {
    T* o = out.data<T>();
    for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i]);
  });
  return out;
}

void add_reduced_into(Tensor& target, const Tensor& g) {
  if (!target.is_contiguous())
    throw std::logic_error("add_reduced_into: the target gradient must be contiguous");
  if (g.dtype() != target.dtype())
    throw std::invalid_argument(fmt::format("gradient: {} cannot be added into {}", g.describe(),
                                            target.describe()));
  if (g.shape() == target.shape()) {
    Tensor src = g.contiguous();
    dispatch_float(g.dtype(), "gradient", [&]<class T>() {
      const T* s = src.data<T>();
      T* t = target.data<T>();
      const int64_t n = target.numel();
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n; ++i) t[i] += s[i];
    });
    return;
  }
  // g has the broadcast shape: sum over leading extra axes and over axes where target has size 1.
  const Shape& gs = g.shape();
  const Shape& ts = target.shape();
  if (gs.size() < ts.size() || broadcast_shapes(ts, gs, "gradient") != gs)
    throw std::invalid_argument(fmt::format("gradient: {} cannot be reduced into {}", g.describe(),
                                            target.describe()));
  const int64_t lead = static_cast<int64_t>(gs.size() - ts.size());
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < static_cast<int64_t>(gs.size()); ++k)
    if (k < lead || (ts[k - lead] == 1 && gs[k] != 1)) axes.push_back(k);
  Tensor reduced = sum_axes(g, axes, false);  // shape: ts without its broadcast size-1 axes
  dispatch_float(g.dtype(), "gradient", [&]<class T>() {
    const T* s = reduced.data<T>();
    T* t = target.data<T>();
    for (int64_t i = 0; i < target.numel(); ++i) t[i] += s[i];
  });
}

void ref_add_reduced_into(Tensor& target, const Tensor& g) {
  const Shape& gs = g.shape();
  const Shape& ts = target.shape();
  const int64_t lead = static_cast<int64_t>(gs.size() - ts.size());
  std::vector<double> values = g.to_vector();
  Shape tstrides = contiguous_strides(ts);
  dispatch_float(g.dtype(), "gradient", [&]<class T>() {
    T* t = target.data<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t rest = static_cast<int64_t>(i), pos = 0;
      for (int64_t k = static_cast<int64_t>(gs.size()) - 1; k >= lead; --k) {
        int64_t idx = rest % gs[k];
        rest /= gs[k];
        if (ts[k - lead] != 1) pos += idx * tstrides[k - lead];
      }
      t[pos] += static_cast<T>(values[i]);
    }
  });
}

}  // namespace dg
