// Elementwise kernels (see kernels_elementwise.h): reductions used by elementwise ops and their
// backwards, then SwiGLU and the depth mix, each fast kernel beside its plain reference.
#include "tensor/kernels_elementwise.h"

#include <fmt/format.h>

#include <algorithm>

#include "tensor/fast_math.h"  // exp_fast (SwiGLU)
#include "tensor/threads.h"    // parallel_for

namespace dg {

namespace {
// Shape after reducing `axes`.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    bool reduced = std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!reduced)
      out.push_back(shape[k]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}
}  // namespace

namespace {
// Columns summed at once by sum_run_of_axes: 4 KB of double accumulators, which stay in L1.
constexpr int64_t kSumColumns = 512;
// Rows summed side by side by sum_axes's general path.
constexpr int64_t kSumRows = 8;

// a contiguous [P, R, K] -> out [P, K]: out[p, k] = Σ_r a[p, r, k], r in increasing order, in
// double. The order is the general path's (which sums the reduced axes of each output element in
// row-major order) and ref_sum_axes's, so the bits are theirs; but rows are read as they lie,
// with no transposing copy, and the adds run across k (one accumulator per column) where the
// general path adds along one strided column at a time. Columns are cut into blocks, each with
// one owner thread; the cut depends on the thread count, an element's sum order does not.
template <class T>
void sum_run_of_axes(T* out, const T* a, int64_t P, int64_t R, int64_t K) {
  const bool parallel = P * R * K > kParallelGrain;
  int64_t parts = (K + kSumColumns - 1) / kSumColumns;  // column blocks per p
  if (parallel && P < omp_get_max_threads())
    parts = std::max(parts, std::min<int64_t>(omp_get_max_threads(), (K + 15) / 16));
  const int64_t width = (K + parts - 1) / parts;  // <= kSumColumns
  parallel_for(P * parts, parallel, [&](int64_t job) {
    const int64_t p = job / parts, k0 = (job % parts) * width, k1 = std::min(K, k0 + width);
    if (k0 >= k1) return;
    double acc[kSumColumns];
    const int64_t w = k1 - k0;
    std::fill(acc, acc + w, 0.0);
    const T* base = a + p * R * K + k0;
    for (int64_t r = 0; r < R; ++r) {
      const T* row = base + r * K;
#pragma omp simd
      for (int64_t k = 0; k < w; ++k) acc[k] += row[k];
    }
    for (int64_t k = 0; k < w; ++k) out[p * K + k0 + k] = static_cast<T>(acc[k]);
  });
}
}  // namespace

// a [..] -> kept axes first, reduced axes last, then one sum per output element (row of the
// permuted copy), accumulated in order in double: one owner thread per output element. When the
// reduced axes are one run of consecutive axes, not the last, of a contiguous a (a bias gradient:
// [N, D] -> [D]; [B, T, D] -> [B, D]), sum_run_of_axes gives the same bits without the copy.
Tensor sum_axes(const Tensor& a, const std::vector<int64_t>& axes, bool keepdim) {
  const int64_t rank = a.dim();
  if (!axes.empty() && axes.back() < rank - 1 &&
      axes.back() - axes.front() + 1 == int64_t(axes.size()) && a.is_contiguous()) {
    const Shape& s = a.shape();
    int64_t P = 1, R = 1, K = 1;
    for (int64_t k = 0; k < rank; ++k) (k < axes.front() ? P : k <= axes.back() ? R : K) *= s[k];
    Tensor out = Tensor::empty(reduced_shape(s, axes, keepdim), a.dtype());
    if (out.numel() == 0) return out;
    dispatch_float(a.dtype(), "sum",
                   [&]<class T>() { sum_run_of_axes(out.data<T>(), a.data<T>(), P, R, K); });
    return out;
  }
  Shape order;
  for (int64_t k = 0; k < rank; ++k)
    if (std::find(axes.begin(), axes.end(), k) == axes.end()) order.push_back(k);
  for (int64_t k : axes) order.push_back(k);
  Tensor permuted = raw::view_permute(a, order);
  if (!permuted.is_contiguous()) permuted = raw::clone(permuted);  // tensor/ records nothing
  Tensor out = Tensor::empty(reduced_shape(a.shape(), axes, keepdim), a.dtype());
  const int64_t rows = out.numel();
  const int64_t inner = rows ? a.numel() / rows : 0;
  dispatch_float(a.dtype(), "sum", [&]<class T>() {
    const T* p = permuted.data<T>();
    T* o = out.data<T>();
    // Rows in groups of kSumRows, each row's sum still its own chain of adds in order: the
    // group's chains are independent, so the adds overlap where one chain waits on each add's
    // latency. The same bits as row by row; groups are what the threads share.
    const int64_t groups = (rows + kSumRows - 1) / kSumRows;
#pragma omp parallel for if (a.numel() > kParallelGrain) schedule(static)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t r0 = gi * kSumRows;
      const T* rows_p = p + r0 * inner;
      if (rows - r0 >= kSumRows) {
        double acc[kSumRows] = {};
        for (int64_t j = 0; j < inner; ++j)
          for (int64_t q = 0; q < kSumRows; ++q) acc[q] += rows_p[q * inner + j];
        for (int64_t q = 0; q < kSumRows; ++q) o[r0 + q] = static_cast<T>(acc[q]);
        continue;
      }
      for (int64_t r = r0; r < rows; ++r) {
        double acc = 0.0;
        const T* row = p + r * inner;
        for (int64_t j = 0; j < inner; ++j) acc += row[j];
        o[r] = static_cast<T>(acc);
      }
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
    throw std::invalid_argument(
        fmt::format("gradient: {} cannot be added into {}", g.describe(), target.describe()));
  if (g.shape() == target.shape()) {
    Tensor src = g.is_contiguous() ? g : raw::clone(g);
    dispatch_float(g.dtype(), "gradient", [&]<class T>() {
      const T* s = src.data<T>();
      T* t = target.data<T>();
      const int64_t n = target.numel();
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
      for (int64_t i = 0; i < n; ++i) t[i] += s[i];
    });
    return;
  }
  // g has the broadcast shape: sum over leading extra axes and over axes where target has size 1.
  const Shape& gs = g.shape();
  const Shape& ts = target.shape();
  if (gs.size() < ts.size() || broadcast_shapes(ts, gs, "gradient") != gs)
    throw std::invalid_argument(
        fmt::format("gradient: {} cannot be reduced into {}", g.describe(), target.describe()));
  // shape: ts without its broadcast size-1 axes (the same elements in the same order)
  Tensor reduced = sum_axes(g, broadcast_reduction_axes(ts, gs), false);
  if (reduced.numel() != target.numel())  // only a wrong broadcast_reduction_axes gets here
    throw std::logic_error(
        fmt::format("gradient: {} summed over broadcast_reduction_axes is {}, "
                    "which does not fit {}",
                    g.describe(), reduced.describe(), target.describe()));
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

// ============================================================================================
// SwiGLU
// ============================================================================================

// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)

// gate, up, out [n]
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
  constexpr int64_t chunk = 4096;  // elements per task
  parallel_for((n + chunk - 1) / chunk, n > kParallelGrain, [&](int64_t c) {
    const int64_t end = std::min(n, (c + 1) * chunk);
#pragma omp simd
    for (int64_t i = c * chunk; i < end; ++i)
      out[i] = gate[i] / (T(1) + exp_fast(-gate[i])) * up[i];
  });
}
template decltype(swiglu_forward<float>) swiglu_forward<float>;
template decltype(swiglu_forward<double>) swiglu_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<T>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}
template decltype(ref_swiglu_forward<float>) ref_swiglu_forward<float>;
template decltype(ref_swiglu_forward<double>) ref_swiglu_forward<double>;

// dgate, dup, dout, gate, up [n]
template <class T>
void swiglu_backward(T* dgate, bool overwrite_gate, T* dup, bool overwrite_up, const T* dout,
                     const T* gate, const T* up, int64_t n) {
#pragma omp parallel for simd if (parallel : n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], e = exp_fast(-g);
    const T s = T(1) / (T(1) + e), silu = g / (T(1) + e);
    if (dgate) {
      const T d = dout[i] * up[i] * s * (T(1) + g * (T(1) - s));
      dgate[i] = overwrite_gate ? d : dgate[i] + d;
    }
    if (dup) {
      const T d = dout[i] * silu;
      dup[i] = overwrite_up ? d : dup[i] + d;
    }
  }
}
template decltype(swiglu_backward<float>) swiglu_backward<float>;
template decltype(swiglu_backward<double>) swiglu_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = 1.0 / (1.0 + std::exp(-g));
    if (dgate) dgate[i] += static_cast<T>(double(dout[i]) * up[i] * s * (1.0 + g * (1.0 - s)));
    if (dup) dup[i] += static_cast<T>(double(dout[i]) * g * s);
  }
}
template decltype(ref_swiglu_backward<float>) ref_swiglu_backward<float>;
template decltype(ref_swiglu_backward<double>) ref_swiglu_backward<double>;

// ============================================================================================
// depth mix
// ============================================================================================

// S[j], out [rows, D]; alpha [rows, J]
template <class T>
void depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                       int64_t D) {
  parallel_for(rows, rows * D * J > kParallelGrain, [&](int64_t n) {
    T* o = out + n * D;
    const T* a = alpha + n * J;
    const T* s0 = S[0] + n * D;
    const T a0 = a[0];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) o[d] = a0 * s0[d];
    for (int64_t j = 1; j < J; ++j) {
      const T* sj = S[j] + n * D;
      const T aj = a[j];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] += aj * sj[d];
    }
  });
}
template decltype(depth_mix_forward<float>) depth_mix_forward<float>;
template decltype(depth_mix_forward<double>) depth_mix_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_depth_mix_forward(T* out, const T* const* S, const T* alpha, int64_t rows, int64_t J,
                           int64_t D) {
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0.0;
      for (int64_t j = 0; j < J; ++j)
        acc += static_cast<double>(alpha[n * J + j]) * S[j][n * D + d];
      out[n * D + d] = static_cast<T>(acc);
    }
}
template decltype(ref_depth_mix_forward<float>) ref_depth_mix_forward<float>;
template decltype(ref_depth_mix_forward<double>) ref_depth_mix_forward<double>;

// dout, S[j], dS[j] [rows, D]; alpha, dalpha [rows, J]
template <class T>
void depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S, const T* alpha,
                        int64_t rows, int64_t J, int64_t D) {
#pragma omp parallel for if (rows * D * J > kParallelGrain) schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const T* g = dout + n * D;
    for (int64_t j = 0; j < J; ++j) {
      if (dalpha) {
        const T* sj = S[j] + n * D;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(g[d]) * sj[d];
        dalpha[n * J + j] += static_cast<T>(dot);
      }
      if (dS[j]) {
        T* dsj = dS[j] + n * D;
        const T aj = alpha[n * J + j];
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) dsj[d] += aj * g[d];
      }
    }
  }
}
template decltype(depth_mix_backward<float>) depth_mix_backward<float>;
template decltype(depth_mix_backward<double>) depth_mix_backward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_depth_mix_backward(T* const* dS, T* dalpha, const T* dout, const T* const* S,
                            const T* alpha, int64_t rows, int64_t J, int64_t D) {
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t j = 0; j < J; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        dot += static_cast<double>(dout[n * D + d]) * S[j][n * D + d];
        if (dS[j]) dS[j][n * D + d] += alpha[n * J + j] * dout[n * D + d];
      }
      if (dalpha) dalpha[n * J + j] += static_cast<T>(dot);
    }
}
template decltype(ref_depth_mix_backward<float>) ref_depth_mix_backward<float>;
template decltype(ref_depth_mix_backward<double>) ref_depth_mix_backward<double>;

}  // namespace dg
