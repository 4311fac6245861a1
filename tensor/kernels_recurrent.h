// Kernels of one recurrent step's gate math (the LSTM and GRU cells of autograd/ops_recurrent.cpp),
// forward and backward, each with a plain reference (ref_*) beside the fast one. The fast ones
// split the batch rows over threads (each row has one owner, so the bits do not depend on the
// thread count) and, in float32, use the vectorisable exp of tensor/fast_math.h for sigmoid and
// tanh; the references are serial loops over std::exp and std::tanh. They do not check shapes or
// record autograd; all pointers are to contiguous row-major buffers. Backwards write (not add).
#pragma once
#include <cstdint>

namespace dg {

// LSTM: gates = gx + gh [N, 4H] in torch's order (i, f, g, o); c [N, H] ->
//   hc [2, N, H]: hc[0] = h' = σ(o)·tanh(c'), hc[1] = c' = σ(f)·c + σ(i)·tanh(g);
//   act [N, 5H]: σ(i), σ(f), tanh(g), σ(o), tanh(c') (what the backward reads).
template <class T>
void lstm_cell_forward(T* hc, T* act, const T* gx, const T* gh, const T* c, int64_t N, int64_t H);
template <class T>
void ref_lstm_cell_forward(T* hc, T* act, const T* gx, const T* gh, const T* c, int64_t N,
                           int64_t H);
// From dhc [2, N, H] (the gradients of h' and c'), act and c: dgates [N, 4H] (the gradient of gx
// and of gh alike) and dc [N, H] (of c).
template <class T>
void lstm_cell_backward(T* dgates, T* dc, const T* dhc, const T* act, const T* c, int64_t N,
                        int64_t H);
template <class T>
void ref_lstm_cell_backward(T* dgates, T* dc, const T* dhc, const T* act, const T* c, int64_t N,
                            int64_t H);

// GRU: gx, gh [N, 3H] in torch's order (r, z, n); h [N, H] -> h' [N, H]:
//   r = σ(gx_r + gh_r), z = σ(gx_z + gh_z), n = tanh(gx_n + r·gh_n), h' = (1 − z)·n + z·h;
//   act [N, 3H]: r, z, n.
template <class T>
void gru_cell_forward(T* h_out, T* act, const T* gx, const T* gh, const T* h, int64_t N, int64_t H);
template <class T>
void ref_gru_cell_forward(T* h_out, T* act, const T* gx, const T* gh, const T* h, int64_t N,
                          int64_t H);
// From dh_out [N, H], act, gh and h: dgx, dgh [N, 3H] and dh [N, H].
template <class T>
void gru_cell_backward(T* dgx, T* dgh, T* dh, const T* dh_out, const T* act, const T* gh,
                       const T* h, int64_t N, int64_t H);
template <class T>
void ref_gru_cell_backward(T* dgx, T* dgh, T* dh, const T* dh_out, const T* act, const T* gh,
                           const T* h, int64_t N, int64_t H);

}  // namespace dg
