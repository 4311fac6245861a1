// Gather along one axis and its scatter-add backward (the kernels of gather, index_select and the
// backward of max/min along an axis), the fast kernels beside their plain references. Every
// gradient element has one owner thread and receives its contributions in index order, so
// float32 results equal the serial reference bit for bit at any thread count. These kernels do
// not check indices or shapes and do not record autograd (autograd/ops_index.cpp does).
#pragma once
#include <cstdint>

namespace dg {

// The index of output element (o, j, i) is idx[o·so + j·sj + i·si], in [0, C) (checked by the
// caller): gather has idx [O, J, I] (so = J·I, sj = I, si = 1); index_select has idx [J]
// (so = 0, sj = 1, si = 0).
struct GatherIndex {
  const int64_t* idx;
  int64_t so, sj, si;
  int64_t at(int64_t o, int64_t j, int64_t i) const { return idx[o * so + j * sj + i * si]; }
};

// x [O, C, I] -> out [O, J, I], out[o, j, i] = x[o, index(o, j, i), i]
template <class T>
void gather_forward(T* out, const T* x, GatherIndex index, int64_t O, int64_t C, int64_t J,
                    int64_t I);
template <class T>
void ref_gather_forward(T* out, const T* x, GatherIndex index, int64_t O, int64_t C, int64_t J,
                        int64_t I);
// dx [O, C, I] += scatter of dout [O, J, I]: dx[o, index(o, j, i), i] += dout[o, j, i], with j
// in increasing order for every dx element (repeated indices add up).
template <class T>
void gather_backward(T* dx, const T* dout, GatherIndex index, int64_t O, int64_t C, int64_t J,
                     int64_t I);
template <class T>
void ref_gather_backward(T* dx, const T* dout, GatherIndex index, int64_t O, int64_t C, int64_t J,
                         int64_t I);

}  // namespace dg
