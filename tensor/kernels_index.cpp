// Gather and its scatter-add backward (see kernels_index.h): fast kernels parallel over
// (o, block of i) tiles, each tile owning its output or gradient elements, and plain serial
// references. Only copies and in-order additions happen, so fast equals reference bit for bit.
#include "tensor/kernels_index.h"

#include <algorithm>

#include "tensor/kernels_elementwise.h"  // kParallelGrain

namespace dg {

namespace {
constexpr int64_t kBlock = 64;  // elements of the inner axis per tile
}

// x [O, C, I], out [O, J, I]
template <class T>
void gather_forward(T* out, const T* x, GatherIndex index, int64_t O, int64_t C, int64_t J,
                    int64_t I) {
  const int64_t blocks = (I + kBlock - 1) / kBlock;
#pragma omp parallel for if (O * J * I > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < O * blocks; ++r) {
    const int64_t o = r / blocks, i0 = (r % blocks) * kBlock, i1 = std::min(I, i0 + kBlock);
    for (int64_t j = 0; j < J; ++j)
      for (int64_t i = i0; i < i1; ++i)
        out[(o * J + j) * I + i] = x[(o * C + index.at(o, j, i)) * I + i];
  }
}
template decltype(gather_forward<float>) gather_forward<float>;
template decltype(gather_forward<double>) gather_forward<double>;
template decltype(gather_forward<int32_t>) gather_forward<int32_t>;  // integer inputs: no gradient
template decltype(gather_forward<int64_t>) gather_forward<int64_t>;
template decltype(gather_forward<bool>) gather_forward<bool>;  // masks, bytes: no gradient
template decltype(gather_forward<uint8_t>) gather_forward<uint8_t>;

// Reference: the definition, one element at a time.
template <class T>
void ref_gather_forward(T* out, const T* x, GatherIndex index, int64_t O, int64_t C, int64_t J,
                        int64_t I) {
  for (int64_t o = 0; o < O; ++o)
    for (int64_t j = 0; j < J; ++j)
      for (int64_t i = 0; i < I; ++i)
        out[(o * J + j) * I + i] = x[(o * C + index.at(o, j, i)) * I + i];
}
template decltype(ref_gather_forward<float>) ref_gather_forward<float>;
template decltype(ref_gather_forward<double>) ref_gather_forward<double>;
template decltype(ref_gather_forward<int32_t>) ref_gather_forward<int32_t>;
template decltype(ref_gather_forward<int64_t>) ref_gather_forward<int64_t>;

// dx [O, C, I], dout [O, J, I]. Tile (o, i0..i1) owns dx[o, :, i0..i1]: no other tile writes it.
template <class T>
void gather_backward(T* dx, const T* dout, GatherIndex index, int64_t O, int64_t C, int64_t J,
                     int64_t I) {
  const int64_t blocks = (I + kBlock - 1) / kBlock;
#pragma omp parallel for if (O * J * I > kParallelGrain) schedule(static)
  for (int64_t r = 0; r < O * blocks; ++r) {
    const int64_t o = r / blocks, i0 = (r % blocks) * kBlock, i1 = std::min(I, i0 + kBlock);
    for (int64_t j = 0; j < J; ++j)
      for (int64_t i = i0; i < i1; ++i)
        dx[(o * C + index.at(o, j, i)) * I + i] += dout[(o * J + j) * I + i];
  }
}
template decltype(gather_backward<float>) gather_backward<float>;
template decltype(gather_backward<double>) gather_backward<double>;

// Reference: the scatter-add as written, serially.
template <class T>
void ref_gather_backward(T* dx, const T* dout, GatherIndex index, int64_t O, int64_t C, int64_t J,
                         int64_t I) {
  for (int64_t o = 0; o < O; ++o)
    for (int64_t j = 0; j < J; ++j)
      for (int64_t i = 0; i < I; ++i)
        dx[(o * C + index.at(o, j, i)) * I + i] += dout[(o * J + j) * I + i];
}
template decltype(ref_gather_backward<float>) ref_gather_backward<float>;
template decltype(ref_gather_backward<double>) ref_gather_backward<double>;

}  // namespace dg
