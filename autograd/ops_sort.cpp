// Sorting ops, torch 1.13's semantics: sort (values and int64 indices), argsort, topk. NaN is
// larger than every number (last when ascending, first when descending), as torch. Ties keep
// their order in x (the lower index first) in every mode: torch's order with stable = true;
// torch's stable = false may order ties otherwise on rows longer than 16 (std::sort there), and
// its topk leaves the order of ties unspecified. topk(sorted = false) returns the sorted order
// (torch leaves that order unspecified too). The values' gradient scatters g to the picked
// elements: the values are recorded as a gather of x at the indices (create_graph works).
// Any dtype sorts; float ones record. Does not do: sorting along several axes, msort, kthvalue.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), torch 1.13 goldens,
// ties, NaN and errors in tests/test_torch_ops_a.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// a before b in the order (NaN largest; ties by index, so any sort of these keys is stable).
template <class T>
bool precedes(T a, int64_t ia, T b, int64_t ib, bool descending) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na && nb) return ia < ib;
      return descending ? na : nb;  // NaN first when descending, last when ascending
    }
  }
  if (a != b) return descending ? a > b : a < b;
  return ia < ib;
}

// The first k of each line along axis ax of a (a with at least one axis), in order: int64 indices
// and, when values is defined, the values, both of a's shape with k along ax.
void sort_lines(const Tensor& a, int64_t ax, int64_t k, bool descending, Tensor& indices,
                Tensor& values) {
  const Tensor x = kernel_input(a);
  const int64_t C = a.size(ax);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d < ax) outer *= a.size(d);
    if (d > ax) inner *= a.size(d);
  }
  dispatch_any(a.dtype(), [&]<class T>() {
    const T* xs = x.data<T>();
    int64_t* is = indices.data<int64_t>();
    T* vs = values.defined() ? values.data<T>() : nullptr;
    std::vector<std::pair<T, int64_t>> line(static_cast<size_t>(C));  // (value, index), copied
    auto before = [&](const std::pair<T, int64_t>& p, const std::pair<T, int64_t>& q) {
      return precedes(p.first, p.second, q.first, q.second, descending);
    };
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t c = 0; c < C; ++c) line[c] = {xs[(o * C + c) * inner + i], c};
        if (k == C)  // a total order (ties by index): any sort gives the stable result
          std::sort(line.begin(), line.end(), before);
        else
          std::partial_sort(line.begin(), line.begin() + k, line.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t e = (o * k + j) * inner + i;
          is[e] = line[j].second;
          if (vs) vs[e] = line[j].first;
        }
      }
  });
}

// sort / topk: the first k along dim; values are gathered (recorded) when x requires grad.
ValuesAndIndices first_k(const Tensor& x, int64_t k, int64_t dim, bool descending, bool want_values,
                         const char* op) {
  ScopedOpTimer op_timer(OpFamily::other);
  check_arg(x.defined(), op, x, "a defined tensor");
  if (x.dim() == 0) {  // a 0-d tensor is one line of one element (dim 0 or −1), as torch
    normalize_axis(dim, 1, op);
    if (k < 0 || k > 1)
      throw std::out_of_range(fmt::format(
          "{}: selected index k = {} out of range for a 0-d tensor (k is 0 or 1)", op, k));
    ValuesAndIndices r = first_k(reshape(x, {1}), 1, 0, descending, want_values, op);
    return {want_values ? reshape(r.values, {}) : Tensor(), reshape(r.indices, {})};
  }
  const int64_t ax = normalize_axis(dim, x.dim(), op);
  if (k < 0 || k > x.size(ax))
    throw std::out_of_range(
        fmt::format("{}: selected index k = {} out of range: axis {} of {} has {} elements", op, k,
                    dim, x.describe(), x.size(ax)));
  Shape out_shape = x.shape();
  out_shape[ax] = k;
  const bool gathered = want_values && is_floating(x.dtype()) && should_record({x});
  ValuesAndIndices r{want_values && !gathered ? Tensor::empty(out_shape, x.dtype()) : Tensor(),
                     Tensor::empty(out_shape, DType::i64)};
  sort_lines(x, ax, k, descending, r.indices, r.values);
  if (gathered) r.values = gather(x, ax, r.indices);  // the backward scatters g to the picks
  return r;
}
}  // namespace

ValuesAndIndices sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;  // every sort here is stable (see the file's comment)
  const int64_t n = x.defined() && x.dim() > 0 ? x.size(normalize_axis(dim, x.dim(), "sort")) : 1;
  return first_k(x, n, dim, descending, true, "sort");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;
  const int64_t n =
      x.defined() && x.dim() > 0 ? x.size(normalize_axis(dim, x.dim(), "argsort")) : 1;
  return first_k(x, n, dim, descending, false, "argsort").indices;
}

ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted (see the file's comment)
  return first_k(x, k, dim, largest, true, "topk");
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the sort family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> sort_op_cases() {
  using V = const std::vector<Tensor>&;
  // Uniform random inputs: ties have probability zero and the gaps between values dwarf eps.
  auto one = [](Shape s, uint64_t seed) {
    return [=] { return std::vector<Tensor>{random_tensor(s, seed, -2, 2).set_name("x")}; };
  };
  return {
      {"sort/last axis", one({3, 6}, 91), [](V in) { return sort(in[0]).values; }},
      {"sort/axis 1, descending", one({2, 5, 3}, 92),
       [](V in) { return sort(in[0], 1, true).values; }},
      {"sort/of a transposed view, stable", one({4, 3}, 93),
       [](V in) { return sort(transpose(in[0], 0, 1), 0, false, true).values; }},
      {"topk/k 3 largest", one({4, 7}, 94), [](V in) { return topk(in[0], 3).values; }},
      {"topk/k 2 smallest along axis 0", one({5, 2, 3}, 95),
       [](V in) { return topk(in[0], 2, 0, false).values; }},
      {"topk/k = the axis' size, unsorted", one({3, 4}, 96),
       [](V in) { return topk(in[0], 4, -1, true, false).values; }},
  };
}

}  // namespace dg
