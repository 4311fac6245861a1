// Embedding kernels (see kernels_embedding.h): the gather forward, the scatter-add backward and
// its plain reference, side by side.
// Each template is instantiated for float and double, each with int32_t and int64_t ids, right
// after its definition (DG_EMBEDDING_INSTANTIATE: template decltype(f<T, I>) f<T, I>;).
#include "tensor/kernels_embedding.h"

#include <cstring>
#include <vector>

#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/threads.h"              // parallel_for

namespace dg {

#define DG_EMBEDDING_INSTANTIATE(f)                         \
  template decltype(f<float, int32_t>) f<float, int32_t>;   \
  template decltype(f<float, int64_t>) f<float, int64_t>;   \
  template decltype(f<double, int32_t>) f<double, int32_t>; \
  template decltype(f<double, int64_t>) f<double, int64_t>;

// W [V, D], ids [N] -> out [N, D]
template <class T, class I>
void embedding_forward(T* out, const I* ids, const T* W, int64_t N, int64_t D) {
  parallel_for(N, N * D > kParallelGrain, [&](int64_t n) {
    std::memcpy(out + n * D, W + static_cast<int64_t>(ids[n]) * D, sizeof(T) * D);
  });
}
DG_EMBEDDING_INSTANTIATE(embedding_forward)

// dout [N, D], ids [N] -> dW [V, D] +=. Tokens are bucketed by id (a stable counting sort), then
// each used vocabulary row is owned by one thread, which adds its tokens in token order.
template <class T, class I>
void embedding_backward(T* dW, const T* dout, const I* ids, int64_t N, int64_t V, int64_t D) {
  std::vector<int64_t> start(V + 1, 0), order(N);
  for (int64_t n = 0; n < N; ++n) start[ids[n] + 1]++;
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  std::vector<int64_t> used, fill(start.begin(), start.end() - 1);
  for (int64_t n = 0; n < N; ++n) order[fill[ids[n]]++] = n;
  for (int64_t v = 0; v < V; ++v)
    if (start[v + 1] > start[v]) used.push_back(v);
  const int64_t nused = static_cast<int64_t>(used.size());
#pragma omp parallel for if (N * D > kParallelGrain) schedule(dynamic, 4)
  for (int64_t u = 0; u < nused; ++u) {
    const int64_t v = used[u];
    T* row = dW + v * D;
    for (int64_t k = start[v]; k < start[v + 1]; ++k) {
      const T* g = dout + order[k] * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) row[d] += g[d];
    }
  }
}
DG_EMBEDDING_INSTANTIATE(embedding_backward)

// Reference: the formula as a plain serial loop, sums in double.
template <class T, class I>
void ref_embedding_backward(T* dW, const T* dout, const I* ids, int64_t N, int64_t V, int64_t D) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) dW[ids[n] * D + d] += dout[n * D + d];
}
DG_EMBEDDING_INSTANTIATE(ref_embedding_backward)

}  // namespace dg
