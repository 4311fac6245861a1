// Kernels of one recurrent step's gate math (the LSTM and GRU cells of autograd/ops_recurrent.cpp),
// forward and backward, each with a plain reference (ref_*) beside the fast one. The fast ones
// split the batch rows over threads (each row has one owner, so the bits do not depend on the
// thread count) and, in float32, use the vectorisable exp of tensor/fast_math.h for sigmoid and
// tanh; the references are serial loops over std::exp and std::tanh. They do not check shapes or
// record autograd; all pointers are to contiguous row-major buffers. Backwards write (not add).
// Below them, the whole recurrence of a layer in one direction (lstm_sequence_*, gru_sequence_*):
// T steps of h·W_hhᵀ and the gate math, forward and backward, without a recorded op per step.
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

// ---- whole sequences -------------------------------------------------------------------------
// One layer's recurrence in one direction over `steps` time steps of a batch of `batch` rows,
// hidden size `hidden` (H). The input projections of every step come in (gates_x [T, N, G·H],
// time order, one GEMM before the recurrence); each step runs h·W_hhᵀ and the fused gate math.
// States live in hs (and cs) [T + 1, N, H]: the initial state at row 0 (row T when reverse, the
// recurrence then running from t = T − 1 down to 0) and the state after time t at row t + 1 (row
// t when reverse), so rows 1..T (0..T−1) are the output sequence in time order and the rows the
// steps read, h before time t, are the other T rows: one [T·N, H] matrix for the weight gradient.
// The fast kernels cut the hidden units into recurrent_pieces(H) pieces (fixed by H and the
// machine's cores, never by the thread count): a piece's step is one one-thread GEMM of its gates'
// columns (float32: gemm_packed_b, W_hh's piece packed once per call in the matmul precision, so
// in bf16 rounded once, and sgemm's bits in float32; float64: gemm_one_thread) and the gate math
// of its units; the pieces of a step run
// over the threads, one barrier per step (in backward, a step's carry dh = d_gates · W_hh runs
// with the next step's gate math), unless the team proves no faster than the calling thread alone
// (a busy machine), when they run on the calling thread. Several sequences (the two
// directions of a bidirectional layer) run one per thread when there are threads for each, their
// pieces in order; the bits are the same either way. The references run one serial step after
// another over ref_gemm and plain loops (std::exp, std::tanh).
int64_t recurrent_pieces(int64_t hidden);

template <class T>
struct LstmSequence {
  int64_t steps = 0, batch = 0, hidden = 0;
  bool reverse = false;
  const T* gates_x = nullptr;    // [T, N, 4H]: x·W_ihᵀ + b_ih + b_hh (i, f, g, o)
  const T* weight_hh = nullptr;  // [4H, H]
  T* hs = nullptr;               // [T + 1, N, H] (above): the initial h in, the outputs out
  T* cs = nullptr;               // [T + 1, N, H]: c likewise
  T* act = nullptr;              // [T, N, 5H]: σ(i), σ(f), tanh(g), σ(o), tanh(c') (written)
};
// The gradients of one LstmSequence: d_hs [T + 1, N, H] (of hs; the initial state's row is not
// read), d_c_last [N, H] (of the final c, or null). Writes d_gates [T, N, 4H] (of gates_x and of
// h·W_hhᵀ alike) and d_h0, d_c0 [N, H] (of the initial states).
template <class T>
struct LstmSequenceGrads {
  const T* d_hs = nullptr;
  const T* d_c_last = nullptr;
  T* d_gates = nullptr;
  T* d_h0 = nullptr;
  T* d_c0 = nullptr;
};
template <class T>
void lstm_sequence_forward(const LstmSequence<T>* sequences, int64_t count);
template <class T>
void ref_lstm_sequence_forward(const LstmSequence<T>& s);
template <class T>
void lstm_sequence_backward(const LstmSequence<T>* sequences, const LstmSequenceGrads<T>* grads,
                            int64_t count);
template <class T>
void ref_lstm_sequence_backward(const LstmSequence<T>& s, const LstmSequenceGrads<T>& g);

// GRU: gates_x [T, N, 3H] = x·W_ihᵀ + b_ih (r, z, n), bias_hh [3H] or null (inside r·(..), as
// torch's), hs as above; writes act [T, N, 3H] (r, z, n) and gh_n [T, N, H] (the n block of
// h·W_hhᵀ + b_hh, what the backward reads).
template <class T>
struct GruSequence {
  int64_t steps = 0, batch = 0, hidden = 0;
  bool reverse = false;
  const T* gates_x = nullptr;
  const T* weight_hh = nullptr;  // [3H, H]
  const T* bias_hh = nullptr;
  T* hs = nullptr;
  T* act = nullptr;
  T* gh_n = nullptr;
};
// d_hs as LSTM's; writes d_gates_x, d_gates_h [T, N, 3H] (they differ in the n block) and d_h0.
template <class T>
struct GruSequenceGrads {
  const T* d_hs = nullptr;
  T* d_gates_x = nullptr;
  T* d_gates_h = nullptr;
  T* d_h0 = nullptr;
};
template <class T>
void gru_sequence_forward(const GruSequence<T>* sequences, int64_t count);
template <class T>
void ref_gru_sequence_forward(const GruSequence<T>& s);
template <class T>
void gru_sequence_backward(const GruSequence<T>* sequences, const GruSequenceGrads<T>* grads,
                           int64_t count);
template <class T>
void ref_gru_sequence_backward(const GruSequence<T>& s, const GruSequenceGrads<T>& g);

}  // namespace dg
