// LSTM and GRU cell kernels (see kernels_recurrent.h): one row function per kernel, written once
// and instantiated twice: fast (rows over threads, float32 sigmoid and tanh through exp_f32 so the
// inner loops vectorise) and reference (serial, std::exp and std::tanh). Then the whole-sequence
// kernels, likewise written once: fast (pieces of hidden units over a team, one-thread GEMMs) and
// reference (one piece, ref_gemm, libm).
#include "tensor/kernels_recurrent.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <vector>

#include "tensor/fast_math.h"
#include "tensor/gemm_kernels.h"
#include "tensor/gemm_packed.h"
#include "tensor/kernels_matmul.h"
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

// ---- whole sequences -------------------------------------------------------------------------
int64_t recurrent_pieces(int64_t hidden) {
  static const int64_t cores = physical_cores();
  return std::clamp<int64_t>(hidden / 64, 1, cores);
}

namespace {
// Hidden units [lo, lo + len) of piece p: equal widths rounded up to 16 (whole vectors).
struct UnitRange {
  int64_t lo, len;
};
UnitRange piece_units(int64_t hidden, int64_t pieces, int64_t p) {
  const int64_t width = ((hidden + pieces - 1) / pieces + 15) / 16 * 16;
  const int64_t lo = std::min(hidden, p * width);
  return {lo, std::min(width, hidden - lo)};
}

// Rows of h and c a step at time t reads (prev) and writes (next) in hs / cs (see the header).
struct StateRows {
  int64_t prev, next;
};
StateRows state_rows(bool reverse, int64_t t) {
  return reverse ? StateRows{t + 1, t} : StateRows{t, t + 1};
}

// A step's pieces over a team pay one barrier a step. On a machine whose cores are busy with
// other work that barrier can wait a scheduler quantum for a descheduled thread: a 2-thread LSTM
// training step once took 1.3 s against 0.14 s on one thread. So the team's first kProbeSteps
// steps are timed against one step on the calling thread alone; when the team is not clearly
// faster, the rest of the call, and the next kTeamBackoff calls, run on the calling thread. Only
// where the pieces run changes, never the pieces, so no bit does.
constexpr int64_t kProbeSteps = 8, kTeamBackoff = 8;
std::atomic<int64_t> g_team_backoff{0};

template <class F>
void run_team(int64_t q, int64_t steps, int64_t pieces, int team, const F& piece_fn) {
  using Clock = std::chrono::steady_clock;
  auto serial_steps = [&](int64_t from, int64_t to) {
    OneOmpThread hold;
    for (int64_t s = from; s < to; ++s)
      for (int64_t p = 0; p < pieces; ++p) piece_fn(q, s, p);
  };
  if (g_team_backoff.load(std::memory_order_relaxed) > 0) {
    g_team_backoff.fetch_sub(1, std::memory_order_relaxed);
    return serial_steps(0, steps);
  }
  // Steps 0 and 1 alone, step 1 timed (a backward's step 0 has no GEMM).
  const int64_t first = std::min<int64_t>(steps, 2);
  serial_steps(0, first - 1);
  const auto t0 = Clock::now();
  serial_steps(first - 1, first);
  const double serial_step = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t probe_last = std::min(steps, first + kProbeSteps) - 1;
  int64_t done = steps;  // the steps the team ran to (shared)
#pragma omp parallel num_threads(team)
  {
    const auto start = Clock::now();
    for (int64_t s = first; s < steps; ++s) {
#pragma omp for schedule(static)
      for (int64_t p = 0; p < pieces; ++p) piece_fn(q, s, p);
      if (s == probe_last && s + 1 < steps) {
#pragma omp single
        {
          const double team_step = std::chrono::duration<double>(Clock::now() - start).count() /
                                   static_cast<double>(s - first + 1);
          if (team_step > 0.8 * serial_step) done = s + 1;
        }  // its barrier: every thread reads the same `done`
        if (done < steps) break;
      }
    }
  }
  if (done < steps) {
    g_team_backoff.store(kTeamBackoff, std::memory_order_relaxed);
    serial_steps(done, steps);
  }
}

// piece_fn(sequence, step, piece) for every step of every sequence, each step's pieces before the
// next step's. Sequences run one per thread when there are threads for each (their pieces in
// order), else in turn with each step's pieces over a team (run_team). Every call writes its own
// outputs, so the bits are the same however the calls are spread.
template <class F>
void run_pieces(int64_t count, int64_t steps, int64_t pieces, const F& piece_fn) {
  const int nt = omp_in_parallel() ? 1 : threads();
  auto serial = [&](int64_t q) {
    for (int64_t s = 0; s < steps; ++s)
      for (int64_t p = 0; p < pieces; ++p) piece_fn(q, s, p);
  };
  if (nt == 1 || (count == 1 && pieces == 1)) {
    OneOmpThread hold(nt > 1);
    for (int64_t q = 0; q < count; ++q) serial(q);
  } else if (count > 1 && nt >= count) {
#pragma omp parallel for num_threads(static_cast <int>(count)) schedule(static, 1)
    for (int64_t q = 0; q < count; ++q) serial(q);
  } else {
    const int team = static_cast<int>(std::min<int64_t>(nt, pieces));
    for (int64_t q = 0; q < count; ++q) run_team(q, steps, pieces, team, piece_fn);
  }
}

// W [G·H, H] with each piece's gate rows together: piece p's rows are gate 0's units of p, gate
// 1's, ..., so a step's piece is one GEMM writing G·len adjacent columns.
template <class T>
std::vector<T> weight_by_piece(const T* w, int64_t gates, int64_t hidden, int64_t pieces) {
  std::vector<T> out(static_cast<size_t>(gates * hidden * hidden));
  for (int64_t p = 0; p < pieces; ++p) {
    const UnitRange u = piece_units(hidden, pieces, p);
    for (int64_t g = 0; g < gates; ++g)
      std::copy(w + (g * hidden + u.lo) * hidden, w + (g * hidden + u.lo + u.len) * hidden,
                out.begin() + (gates * u.lo + g * u.len) * hidden);
  }
  return out;
}

// One row's LSTM gate math over `len` units: gate k of unit j at x[k·xs + j] and y[k·ys + j];
// writes h', c' and act (gate k at a[k·as + j], tanh c' last). Flattened: GCC otherwise calls
// exp_f32 out of line here (five calls a unit) and the loop does not vectorise.
template <class T, bool Fast>
[[gnu::flatten]] inline void lstm_gates_row(T* h_out, T* c_out, T* a, int64_t as, const T* x,
                                            int64_t xs, const T* y, int64_t ys, const T* c_in,
                                            int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const T i = sigmoid_of<T, Fast>(x[j] + y[j]);
    const T f = sigmoid_of<T, Fast>(x[xs + j] + y[ys + j]);
    const T g = tanh_of<T, Fast>(x[2 * xs + j] + y[2 * ys + j]);
    const T o = sigmoid_of<T, Fast>(x[3 * xs + j] + y[3 * ys + j]);
    const T cn = f * c_in[j] + i * g;
    const T tc = tanh_of<T, Fast>(cn);
    a[j] = i, a[as + j] = f, a[2 * as + j] = g, a[3 * as + j] = o, a[4 * as + j] = tc;
    c_out[j] = cn;
    h_out[j] = o * tc;
  }
}

// dh (in: the gradient of h'; kept) and dc (in: of c'; out: of c) over `len` units; writes the
// four gates' gradients at d[k·ds + j]. The formulas are lstm_backward's.
template <class T>
inline void lstm_gates_backward_row(T* d, int64_t ds, T* dc, const T* dh, const T* a, int64_t as,
                                    const T* c_in, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const T i = a[j], f = a[as + j], g = a[2 * as + j], o = a[3 * as + j], tc = a[4 * as + j];
    const T dcn = dc[j] + dh[j] * o * (T(1) - tc * tc);
    d[j] = dcn * g * i * (T(1) - i);
    d[ds + j] = dcn * c_in[j] * f * (T(1) - f);
    d[2 * ds + j] = dcn * i * (T(1) - g * g);
    d[3 * ds + j] = dh[j] * tc * o * (T(1) - o);
    dc[j] = dcn * f;
  }
}

// The GEMM of a step with the weight as it lies, C [M, N] = op(A) · op(B) + beta·C: one-thread
// BLAS (float64's fast kernels), or the naive reference.
template <class T, bool Fast>
void step_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (Fast)
    gemm_one_thread(trans_a, trans_b, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
  else
    ref_gemm<T>(trans_a, trans_b, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
}

// The fast float32 kernels multiply by W_hh through PackedB (tensor/gemm_packed.h): each piece's
// block of the weight packed once per call, in the matmul precision (so in bf16 rounded once), and
// no step packs anything (OpenBLAS packed the weight on every call: about a tenth of an LSTM
// step). In float32 the bits are sgemm's. float64 and the references read W_hh as it lies.
template <class T, bool Fast>
constexpr bool kPacksWeight = (Fast && std::is_same_v<T, float>);

// Piece p's forward B: its gates' rows of the by-piece weight, transposed (h [N, H] · B gives the
// piece's G·len columns of h·W_hhᵀ in order).
template <class T, bool Fast>
std::vector<PackedB> forward_weights(const std::vector<T>& by_piece, int64_t gates, int64_t H,
                                     int64_t pieces) {
  std::vector<PackedB> out;
  if constexpr (kPacksWeight<T, Fast>)
    for (int64_t p = 0; p < pieces; ++p) {
      const UnitRange u = piece_units(H, pieces, p);
      out.emplace_back(true, H, gates * u.len, by_piece.data() + gates * u.lo * H, H,
                       matmul_precision());
    }
  return out;
}

// Piece p's backward B: W_hh's columns of its units, [G·H, len] (d_gates · B is its part of dh).
template <class T, bool Fast>
std::vector<PackedB> backward_weights(const T* w, int64_t gates, int64_t H, int64_t pieces) {
  std::vector<PackedB> out;
  if constexpr (kPacksWeight<T, Fast>)
    for (int64_t p = 0; p < pieces; ++p) {
      const UnitRange u = piece_units(H, pieces, p);
      out.emplace_back(false, gates * H, u.len, w + u.lo, H, matmul_precision());
    }
  return out;
}

// dh [N, len] (row stride H) = d_gates [N, G·H] · W_hh's columns of piece p, + beta · dh.
template <class T, bool Fast>
void piece_carry(int64_t N, int64_t G, int64_t H, const T* d_gates, const T* w, UnitRange u,
                 const std::vector<PackedB>& packed, int64_t p, T beta, T* dh) {
  if constexpr (kPacksWeight<T, Fast>)
    gemm_packed_b(N, d_gates, G * H, packed[size_t(p)], beta, dh, H);
  else
    step_gemm<T, Fast>(false, false, N, u.len, G * H, d_gates, G * H, w + u.lo, H, beta, dh, H);
}

// A sequence's forward weight: W_hh by piece (weight_by_piece), its pieces packed where the
// kernel packs, and the step's h·W_hhᵀ (gh) with scratch for its transpose.
template <class T, bool Fast>
struct ForwardWeight {
  std::vector<T> by_piece, gh, scratch;
  std::vector<PackedB> packed;
  ForwardWeight(const T* w, int64_t gates, int64_t N, int64_t H, int64_t pieces)
      : by_piece(weight_by_piece(w, gates, H, pieces)),
        gh(static_cast<size_t>(N * gates * H)),
        scratch(kPacksWeight<T, Fast> ? 0 : static_cast<size_t>(N * gates * H)),
        packed(forward_weights<T, Fast>(by_piece, gates, H, pieces)) {}
};

// The forward GEMM of a step's piece p (units u), h · W_pᵀ [N, G·len] into y (row stride ldy):
// packed, or computed as its transpose W_p · hᵀ [G·len, N] (one-thread OpenBLAS runs [512, 32] ×
// 256 at 96 GFLOP/s, [32, 512] at 81; the transpose back is a few microseconds).
template <class T, bool Fast>
void piece_projection(int64_t N, int64_t G, int64_t H, const T* h, ForwardWeight<T, Fast>& w,
                      int64_t p, UnitRange u, T* y, int64_t ldy) {
  if constexpr (kPacksWeight<T, Fast>) {
    gemm_packed_b(N, h, H, w.packed[size_t(p)], 0.0f, y, ldy);
  } else {
    const int64_t rows = G * u.len;
    T* scratch = w.scratch.data() + G * u.lo * N;
    step_gemm<T, Fast>(false, true, rows, N, H, w.by_piece.data() + G * u.lo * H, H, h, H, T(0),
                       scratch, N);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t r = 0; r < rows; ++r) y[n * ldy + r] = scratch[r * N + n];
  }
}

template <class T, bool Fast>
void lstm_forward_sequences(const LstmSequence<T>* seqs, int64_t count) {
  const int64_t H = seqs[0].hidden, N = seqs[0].batch, pieces = Fast ? recurrent_pieces(H) : 1;
  std::vector<ForwardWeight<T, Fast>> w;
  for (int64_t q = 0; q < count; ++q) w.emplace_back(seqs[q].weight_hh, 4, N, H, pieces);
  run_pieces(count, seqs[0].steps, pieces, [&](int64_t q, int64_t s, int64_t p) {
    const LstmSequence<T>& seq = seqs[q];
    const int64_t t = seq.reverse ? seq.steps - 1 - s : s;
    const StateRows rows = state_rows(seq.reverse, t);
    const UnitRange u = piece_units(H, pieces, p);
    const T* h_in = seq.hs + rows.prev * N * H;
    T* y = w[q].gh.data() + 4 * u.lo;
    piece_projection<T, Fast>(N, 4, H, h_in, w[q], p, u, y, 4 * H);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (t * N + n), state = n * H + u.lo;
      lstm_gates_row<T, Fast>(seq.hs + rows.next * N * H + state,
                              seq.cs + rows.next * N * H + state, seq.act + at * 5 * H + u.lo, H,
                              seq.gates_x + at * 4 * H + u.lo, H, y + n * 4 * H, u.len,
                              seq.cs + rows.prev * N * H + state, u.len);
    }
  });
}

// Backward, from the last step. Call s of a piece first finishes step s − 1's carry, dh =
// d_gates · W_hh for the piece's units (every piece's d_gates of that step are done: the call
// before the barrier), then adds step s's output gradient to the carried dh and runs the gate
// math's backward for the piece's units: one barrier a step. d_h0 and d_c0 are the carries.
template <class T, bool Fast>
void lstm_backward_sequences(const LstmSequence<T>* seqs, const LstmSequenceGrads<T>* grads,
                             int64_t count) {
  const int64_t H = seqs[0].hidden, N = seqs[0].batch, steps = seqs[0].steps;
  const int64_t pieces = Fast ? recurrent_pieces(H) : 1;
  for (int64_t q = 0; q < count; ++q) {
    std::fill(grads[q].d_h0, grads[q].d_h0 + N * H, T(0));
    if (grads[q].d_c_last)
      std::copy(grads[q].d_c_last, grads[q].d_c_last + N * H, grads[q].d_c0);
    else
      std::fill(grads[q].d_c0, grads[q].d_c0 + N * H, T(0));
  }
  std::vector<std::vector<PackedB>> packed(count);
  for (int64_t q = 0; q < count; ++q)
    packed[q] = backward_weights<T, Fast>(seqs[q].weight_hh, 4, H, pieces);
  auto time_of = [&](const LstmSequence<T>& seq, int64_t s) {
    return seq.reverse ? s : steps - 1 - s;
  };
  run_pieces(count, steps + 1, pieces, [&](int64_t q, int64_t s, int64_t p) {
    const LstmSequence<T>& seq = seqs[q];
    const LstmSequenceGrads<T>& g = grads[q];
    const UnitRange u = piece_units(H, pieces, p);
    if (s > 0)
      piece_carry<T, Fast>(N, 4, H, g.d_gates + time_of(seq, s - 1) * N * 4 * H, seq.weight_hh, u,
                           packed[q], p, T(0), g.d_h0 + u.lo);
    if (s == steps) return;
    const int64_t t = time_of(seq, s);
    const StateRows rows = state_rows(seq.reverse, t);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (t * N + n), state = n * H + u.lo;
      T* dh = g.d_h0 + state;
      const T* d_out = g.d_hs + rows.next * N * H + state;
      for (int64_t j = 0; j < u.len; ++j) dh[j] += d_out[j];
      lstm_gates_backward_row<T>(g.d_gates + at * 4 * H + u.lo, H, g.d_c0 + state, dh,
                                 seq.act + at * 5 * H + u.lo, H, seq.cs + rows.prev * N * H + state,
                                 u.len);
    }
  });
}

// One row's GRU gate math over `len` units: x as LSTM's, y = the piece's h·W_hhᵀ columns (gate
// stride ys), b the hidden bias (gate stride H); writes h', act (gate stride as) and gh_n.
template <class T, bool Fast>
[[gnu::flatten]] inline void gru_gates_row(T* h_out, T* a, int64_t as, T* gh_n, const T* x,
                                           int64_t xs, const T* y, int64_t ys, const T* b,
                                           int64_t bs, const T* h_in, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const T r = sigmoid_of<T, Fast>(x[j] + (y[j] + b[j]));
    const T z = sigmoid_of<T, Fast>(x[xs + j] + (y[ys + j] + b[bs + j]));
    const T yn = y[2 * ys + j] + b[2 * bs + j];
    const T nn = tanh_of<T, Fast>(x[2 * xs + j] + r * yn);
    a[j] = r, a[as + j] = z, a[2 * as + j] = nn;
    gh_n[j] = yn;
    h_out[j] = (T(1) - z) * nn + z * h_in[j];
  }
}

// dh (in: the gradient of h'; out: its part through z·h, before the GEMM adds the rest); the
// formulas are gru_backward's.
template <class T>
inline void gru_gates_backward_row(T* dx, T* dy, int64_t ds, T* dh, const T* a, int64_t as,
                                   const T* gh_n, const T* h_in, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const T r = a[j], z = a[as + j], nn = a[2 * as + j], g = dh[j];
    const T dn = g * (T(1) - z) * (T(1) - nn * nn);
    const T dr = dn * gh_n[j] * r * (T(1) - r);
    const T dz = g * (h_in[j] - nn) * z * (T(1) - z);
    dx[j] = dr, dx[ds + j] = dz, dx[2 * ds + j] = dn;
    dy[j] = dr, dy[ds + j] = dz, dy[2 * ds + j] = dn * r;
    dh[j] = g * z;
  }
}

template <class T, bool Fast>
void gru_forward_sequences(const GruSequence<T>* seqs, int64_t count) {
  const int64_t H = seqs[0].hidden, N = seqs[0].batch, pieces = Fast ? recurrent_pieces(H) : 1;
  std::vector<ForwardWeight<T, Fast>> w;
  std::vector<std::vector<T>> bias(count);
  for (int64_t q = 0; q < count; ++q) {
    w.emplace_back(seqs[q].weight_hh, 3, N, H, pieces);
    bias[q].assign(static_cast<size_t>(3 * H), T(0));
    if (seqs[q].bias_hh) std::copy(seqs[q].bias_hh, seqs[q].bias_hh + 3 * H, bias[q].begin());
  }
  run_pieces(count, seqs[0].steps, pieces, [&](int64_t q, int64_t s, int64_t p) {
    const GruSequence<T>& seq = seqs[q];
    const int64_t t = seq.reverse ? seq.steps - 1 - s : s;
    const StateRows rows = state_rows(seq.reverse, t);
    const UnitRange u = piece_units(H, pieces, p);
    const T* h_in = seq.hs + rows.prev * N * H;
    T* y = w[q].gh.data() + 3 * u.lo;
    piece_projection<T, Fast>(N, 3, H, h_in, w[q], p, u, y, 3 * H);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (t * N + n), state = n * H + u.lo;
      gru_gates_row<T, Fast>(seq.hs + rows.next * N * H + state, seq.act + at * 3 * H + u.lo, H,
                             seq.gh_n + at * H + u.lo, seq.gates_x + at * 3 * H + u.lo, H,
                             y + n * 3 * H, u.len, bias[q].data() + u.lo, H, h_in + state, u.len);
    }
  });
}

// Backward as LSTM's: call s adds step s − 1's d_gates_h · W_hh to the carried dh (which holds
// its z·h part), then runs step s's gate math backward.
template <class T, bool Fast>
void gru_backward_sequences(const GruSequence<T>* seqs, const GruSequenceGrads<T>* grads,
                            int64_t count) {
  const int64_t H = seqs[0].hidden, N = seqs[0].batch, steps = seqs[0].steps;
  const int64_t pieces = Fast ? recurrent_pieces(H) : 1;
  for (int64_t q = 0; q < count; ++q) std::fill(grads[q].d_h0, grads[q].d_h0 + N * H, T(0));
  std::vector<std::vector<PackedB>> packed(count);
  for (int64_t q = 0; q < count; ++q)
    packed[q] = backward_weights<T, Fast>(seqs[q].weight_hh, 3, H, pieces);
  auto time_of = [&](const GruSequence<T>& seq, int64_t s) {
    return seq.reverse ? s : steps - 1 - s;
  };
  run_pieces(count, steps + 1, pieces, [&](int64_t q, int64_t s, int64_t p) {
    const GruSequence<T>& seq = seqs[q];
    const GruSequenceGrads<T>& g = grads[q];
    const UnitRange u = piece_units(H, pieces, p);
    if (s > 0)
      piece_carry<T, Fast>(N, 3, H, g.d_gates_h + time_of(seq, s - 1) * N * 3 * H, seq.weight_hh, u,
                           packed[q], p, T(1), g.d_h0 + u.lo);
    if (s == steps) return;
    const int64_t t = time_of(seq, s);
    const StateRows rows = state_rows(seq.reverse, t);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t at = (t * N + n), state = n * H + u.lo;
      T* dh = g.d_h0 + state;
      const T* d_out = g.d_hs + rows.next * N * H + state;
      for (int64_t j = 0; j < u.len; ++j) dh[j] += d_out[j];
      gru_gates_backward_row<T>(g.d_gates_x + at * 3 * H + u.lo, g.d_gates_h + at * 3 * H + u.lo, H,
                                dh, seq.act + at * 3 * H + u.lo, H, seq.gh_n + at * H + u.lo,
                                seq.hs + rows.prev * N * H + state, u.len);
    }
  });
}
}  // namespace

template <class T>
void lstm_sequence_forward(const LstmSequence<T>* sequences, int64_t count) {
  lstm_forward_sequences<T, true>(sequences, count);
}
template <class T>
void ref_lstm_sequence_forward(const LstmSequence<T>& s) {
  lstm_forward_sequences<T, false>(&s, 1);
}
template <class T>
void lstm_sequence_backward(const LstmSequence<T>* sequences, const LstmSequenceGrads<T>* grads,
                            int64_t count) {
  lstm_backward_sequences<T, true>(sequences, grads, count);
}
template <class T>
void ref_lstm_sequence_backward(const LstmSequence<T>& s, const LstmSequenceGrads<T>& g) {
  lstm_backward_sequences<T, false>(&s, &g, 1);
}
template <class T>
void gru_sequence_forward(const GruSequence<T>* sequences, int64_t count) {
  gru_forward_sequences<T, true>(sequences, count);
}
template <class T>
void ref_gru_sequence_forward(const GruSequence<T>& s) {
  gru_forward_sequences<T, false>(&s, 1);
}
template <class T>
void gru_sequence_backward(const GruSequence<T>* sequences, const GruSequenceGrads<T>* grads,
                           int64_t count) {
  gru_backward_sequences<T, true>(sequences, grads, count);
}
template <class T>
void ref_gru_sequence_backward(const GruSequence<T>& s, const GruSequenceGrads<T>& g) {
  gru_backward_sequences<T, false>(&s, &g, 1);
}

#define DG_SEQUENCE_KERNELS(T)                                                                 \
  template void lstm_sequence_forward<T>(const LstmSequence<T>*, int64_t);                     \
  template void ref_lstm_sequence_forward<T>(const LstmSequence<T>&);                          \
  template void lstm_sequence_backward<T>(const LstmSequence<T>*, const LstmSequenceGrads<T>*, \
                                          int64_t);                                            \
  template void ref_lstm_sequence_backward<T>(const LstmSequence<T>&,                          \
                                              const LstmSequenceGrads<T>&);                    \
  template void gru_sequence_forward<T>(const GruSequence<T>*, int64_t);                       \
  template void ref_gru_sequence_forward<T>(const GruSequence<T>&);                            \
  template void gru_sequence_backward<T>(const GruSequence<T>*, const GruSequenceGrads<T>*,    \
                                         int64_t);                                             \
  template void ref_gru_sequence_backward<T>(const GruSequence<T>&, const GruSequenceGrads<T>&);
DG_SEQUENCE_KERNELS(float)
DG_SEQUENCE_KERNELS(double)
#undef DG_SEQUENCE_KERNELS

}  // namespace dg
