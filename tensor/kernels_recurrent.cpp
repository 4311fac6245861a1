// LSTM and GRU cell kernels (see kernels_recurrent.h): one row function per kernel, written once
// and instantiated twice: fast (rows over threads, float32 sigmoid and tanh through exp_f32 so the
// inner loops vectorise) and reference (serial, std::exp and std::tanh).
#include "tensor/kernels_recurrent.h"

#include <cmath>

#include "tensor/fast_math.h"
#include "tensor/threads.h"

namespace dg {

namespace {
// σ(x) and tanh(x): the fast float32 forms go through exp_f32 (tanh x = 1 − 2/(e^{2x} + 1),
// within a few 1e-7 of std::tanh); float64 and the references use libm.
template <class T, bool Fast>
inline T sigmoid_of(T x) {
  if constexpr (Fast) return T(1) / (T(1) + exp_fast(-x));
  return T(1) / (T(1) + std::exp(-x));
}
template <class T, bool Fast>
inline T tanh_of(T x) {
  if constexpr (Fast && sizeof(T) == 4) return T(1) - T(2) / (exp_f32(T(2) * x) + T(1));
  return std::tanh(x);
}

// Rows run over threads only for the fast kernels and when a step is large enough to pay for it.
template <bool Fast, class F>
void for_rows(int64_t N, int64_t H, const F& row) {
  parallel_for(N, Fast && N * H >= 16384, row);
}

template <class T, bool Fast>
void lstm_forward(T* hc, T* act, const T* gx, const T* gh, const T* c, int64_t N, int64_t H) {
  for_rows<Fast>(N, H, [&](int64_t n) {
    const T* x = gx + n * 4 * H;
    const T* y = gh + n * 4 * H;
    T* a = act + n * 5 * H;
    T* h_out = hc + n * H;
    T* c_out = hc + (N + n) * H;
    const T* c_in = c + n * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = sigmoid_of<T, Fast>(x[j] + y[j]);
      const T f = sigmoid_of<T, Fast>(x[H + j] + y[H + j]);
      const T g = tanh_of<T, Fast>(x[2 * H + j] + y[2 * H + j]);
      const T o = sigmoid_of<T, Fast>(x[3 * H + j] + y[3 * H + j]);
      const T cn = f * c_in[j] + i * g;
      const T tc = tanh_of<T, Fast>(cn);
      a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o, a[4 * H + j] = tc;
      c_out[j] = cn;
      h_out[j] = o * tc;
    }
  });
}

// dc' in total = dc'_out + dh'·o·(1 − tanh²c'); then do = dh'·tanh c'·o(1 − o),
// di = dc'·g·i(1 − i), dg = dc'·i·(1 − g²), df = dc'·c·f(1 − f), dc = dc'·f.
template <class T, bool Fast>
void lstm_backward(T* dgates, T* dc, const T* dhc, const T* act, const T* c, int64_t N, int64_t H) {
  for_rows<Fast>(N, H, [&](int64_t n) {
    const T* a = act + n * 5 * H;
    const T* dh_out = dhc + n * H;
    const T* dc_out = dhc + (N + n) * H;
    const T* c_in = c + n * H;
    T* d = dgates + n * 4 * H;
    T* dc_in = dc + n * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], tc = a[4 * H + j];
      const T dcn = dc_out[j] + dh_out[j] * o * (T(1) - tc * tc);
      d[j] = dcn * g * i * (T(1) - i);
      d[H + j] = dcn * c_in[j] * f * (T(1) - f);
      d[2 * H + j] = dcn * i * (T(1) - g * g);
      d[3 * H + j] = dh_out[j] * tc * o * (T(1) - o);
      dc_in[j] = dcn * f;
    }
  });
}

template <class T, bool Fast>
void gru_forward(T* h_out, T* act, const T* gx, const T* gh, const T* h, int64_t N, int64_t H) {
  for_rows<Fast>(N, H, [&](int64_t n) {
    const T* x = gx + n * 3 * H;
    const T* y = gh + n * 3 * H;
    const T* h_in = h + n * H;
    T* a = act + n * 3 * H;
    T* out = h_out + n * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T r = sigmoid_of<T, Fast>(x[j] + y[j]);
      const T z = sigmoid_of<T, Fast>(x[H + j] + y[H + j]);
      const T nn = tanh_of<T, Fast>(x[2 * H + j] + r * y[2 * H + j]);
      a[j] = r, a[H + j] = z, a[2 * H + j] = nn;
      out[j] = (T(1) - z) * nn + z * h_in[j];
    }
  });
}

// dn = dh'·(1 − z)·(1 − n²) (the gradient of gx_n), dgh_n = dn·r, dr = dn·gh_n·r(1 − r),
// dz = dh'·(h − n)·z(1 − z), dh = dh'·z.
template <class T, bool Fast>
void gru_backward(T* dgx, T* dgh, T* dh, const T* dh_out, const T* act, const T* gh, const T* h,
                  int64_t N, int64_t H) {
  for_rows<Fast>(N, H, [&](int64_t n) {
    const T* a = act + n * 3 * H;
    const T* y = gh + n * 3 * H;
    const T* h_in = h + n * H;
    const T* g = dh_out + n * H;
    T* dx = dgx + n * 3 * H;
    T* dy = dgh + n * 3 * H;
    T* dh_in = dh + n * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const T r = a[j], z = a[H + j], nn = a[2 * H + j];
      const T dn = g[j] * (T(1) - z) * (T(1) - nn * nn);
      const T dr = dn * y[2 * H + j] * r * (T(1) - r);
      const T dz = g[j] * (h_in[j] - nn) * z * (T(1) - z);
      dx[j] = dr, dx[H + j] = dz, dx[2 * H + j] = dn;
      dy[j] = dr, dy[H + j] = dz, dy[2 * H + j] = dn * r;
      dh_in[j] = g[j] * z;
    }
  });
}
}  // namespace

template <class T>
void lstm_cell_forward(T* hc, T* act, const T* gx, const T* gh, const T* c, int64_t N, int64_t H) {
  lstm_forward<T, true>(hc, act, gx, gh, c, N, H);
}
template <class T>
void ref_lstm_cell_forward(T* hc, T* act, const T* gx, const T* gh, const T* c, int64_t N,
                           int64_t H) {
  lstm_forward<T, false>(hc, act, gx, gh, c, N, H);
}
template <class T>
void lstm_cell_backward(T* dgates, T* dc, const T* dhc, const T* act, const T* c, int64_t N,
                        int64_t H) {
  lstm_backward<T, true>(dgates, dc, dhc, act, c, N, H);
}
template <class T>
void ref_lstm_cell_backward(T* dgates, T* dc, const T* dhc, const T* act, const T* c, int64_t N,
                            int64_t H) {
  lstm_backward<T, false>(dgates, dc, dhc, act, c, N, H);
}
template <class T>
void gru_cell_forward(T* h_out, T* act, const T* gx, const T* gh, const T* h, int64_t N,
                      int64_t H) {
  gru_forward<T, true>(h_out, act, gx, gh, h, N, H);
}
template <class T>
void ref_gru_cell_forward(T* h_out, T* act, const T* gx, const T* gh, const T* h, int64_t N,
                          int64_t H) {
  gru_forward<T, false>(h_out, act, gx, gh, h, N, H);
}
template <class T>
void gru_cell_backward(T* dgx, T* dgh, T* dh, const T* dh_out, const T* act, const T* gh,
                       const T* h, int64_t N, int64_t H) {
  gru_backward<T, true>(dgx, dgh, dh, dh_out, act, gh, h, N, H);
}
template <class T>
void ref_gru_cell_backward(T* dgx, T* dgh, T* dh, const T* dh_out, const T* act, const T* gh,
                           const T* h, int64_t N, int64_t H) {
  gru_backward<T, false>(dgx, dgh, dh, dh_out, act, gh, h, N, H);
}

#define DG_RECURRENT_KERNELS(T)                                                                    \
  template void lstm_cell_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);      \
  template void ref_lstm_cell_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);  \
  template void lstm_cell_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);     \
  template void ref_lstm_cell_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t); \
  template void gru_cell_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);       \
  template void ref_gru_cell_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t);   \
  template void gru_cell_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t,  \
                                     int64_t);                                                     \
  template void ref_gru_cell_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,       \
                                         int64_t, int64_t);
DG_RECURRENT_KERNELS(float)
DG_RECURRENT_KERNELS(double)
#undef DG_RECURRENT_KERNELS

}  // namespace dg
