// Scaled-dot-product attention kernels with masks (see kernels_sdpa.h): the fast forward and
// backward on row blocks with one-thread GEMMs, then their plain references in double.
#include "tensor/kernels_sdpa.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/fast_math.h"
#include "tensor/kernels_matmul.h"  // gemm_one_thread

namespace dg {

namespace {

constexpr int64_t kRowBlock = 64;               // query rows per block: the scratch is rows × S
constexpr int64_t kSdpaParallelWork = 1 << 20;  // multiply-adds below which one thread runs (as the
                                                // causal kernels: kernels_attention.cpp)
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Geometry {
  int64_t batches = 1, L = 0, S = 0, E = 0, Ev = 0;
  int64_t work() const { return batches * L * S * (E + Ev); }
};

Geometry geometry_of(const SdpaInputs& in) {
  const Tensor &q = in.q, &k = in.k, &v = in.v;
  const int64_t nb = q.dim() - 2;
  bool ok = nb >= 0 && k.dim() == q.dim() && v.dim() == q.dim() && q.dtype() == k.dtype() &&
            q.dtype() == v.dtype() && is_floating(q.dtype()) && k.size(-2) == v.size(-2) &&
            q.size(-1) == k.size(-1);
  for (int64_t a = 0; ok && a < nb; ++a) ok = k.size(a) == q.size(a) && v.size(a) == q.size(a);
  Geometry g;
  if (ok) g = {1, q.size(-2), k.size(-2), q.size(-1), v.size(-1)};
  if (ok && in.mask.defined()) {
    const Tensor& m = in.mask;
    ok = m.dim() == q.dim() && m.dtype() == q.dtype() && m.size(-2) == g.L && m.size(-1) == g.S;
    for (int64_t a = 0; ok && a < nb; ++a) ok = m.size(a) == q.size(a);
  }
  if (!ok)
    throw std::invalid_argument(fmt::format(
        "scaled_dot_product_attention kernel: expected q [..., L, E], k [..., S, E], v [..., S, "
        "Ev] and mask [..., L, S] with equal batch axes and one float dtype, got q {}, k {}, v {}, "
        "mask {}",
        q.describe(), k.describe(), v.describe(),
        in.mask.defined() ? in.mask.describe() : "undefined"));
  for (int64_t a = 0; a < nb; ++a) g.batches *= q.size(a);
  return g;
}

// Element offset of batch matrix b (row-major over the batch axes) in t, through its strides.
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batches) {
  const int64_t nb = t.dim() - 2;
  std::vector<int64_t> off(batches, 0);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t rest = b, o = 0;
    for (int64_t a = nb - 1; a >= 0; --a) {
      o += (rest % t.size(a)) * t.strides()[a];
      rest /= t.size(a);
    }
    off[b] = o;
  }
  return off;
}

// A [..., R, C] tensor seen as one row-major R×C matrix per batch, rows ld apart, read in place
// when BLAS can (last axis stride 1, rows at least C apart), else from a contiguous copy.
template <class T>
struct Matrices {
  Tensor keep;
  const T* base = nullptr;
  std::vector<int64_t> offset;
  int64_t ld = 1;
  const T* at(int64_t b) const { return base + offset[b]; }
};

template <class T>
Matrices<T> matrices(const Tensor& x, int64_t batches) {
  const int64_t R = x.size(-2), C = x.size(-1), sr = x.strides()[x.dim() - 2];
  const bool usable = (C <= 1 || x.strides()[x.dim() - 1] == 1) && (R <= 1 || sr >= C);
  Matrices<T> m;
  m.keep = usable ? x : raw::clone(x);
  m.base = m.keep.template data<T>();
  m.offset = batch_offsets(m.keep, batches);
  m.ld = R <= 1 ? std::max<int64_t>(C, 1) : m.keep.strides()[m.keep.dim() - 2];
  return m;
}

// A writable [..., R, C] tensor seen as one row-major R×C matrix per batch, written in place
// through its strides (check_sdpa_strided has checked that the last axis has stride 1 and rows do
// not overlap): a contiguous result, or a view into a wider one (the heads of a [N, L, H·hd]
// tensor).
template <class T>
struct WritableMatrices {
  T* base = nullptr;
  std::vector<int64_t> offset;
  int64_t ld = 1;
  T* at(int64_t b) const { return base + offset[b]; }
};

template <class T>
WritableMatrices<T> writable_matrices(Tensor* x, int64_t batches) {
  if (!x) return {};
  const int64_t R = x->size(-2), C = x->size(-1);
  return {x->template data<T>(), batch_offsets(*x, batches),
          R <= 1 ? std::max<int64_t>(C, 1) : x->strides()[x->dim() - 2]};
}

// rows × cols of a matrix whose rows are ld apart, set to zero
template <class T>
void zero_matrix_rows(T* m, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(m + r * ld, m + r * ld + cols, T(0));
}

// The mask read through its strides (broadcast axes have stride 0); absent: reads nothing.
template <class T>
struct MaskView {
  const T* base = nullptr;
  std::vector<int64_t> offset;
  int64_t row = 0, col = 0;
};

template <class T>
MaskView<T> mask_view(const Tensor& m, int64_t batches) {
  if (!m.defined()) return {};
  return {m.template data<T>(), batch_offsets(m, batches), m.strides()[m.dim() - 2],
          m.strides()[m.dim() - 1]};
}

// S[rows, cols] (scale·Q·Kᵀ, rows i0.. of batch b, ld apart) plus the mask, −inf at causally
// hidden keys.
template <class T>
void add_masks(T* S, int64_t ld, int64_t rows, int64_t cols, int64_t i0, int64_t b,
               const MaskView<T>& mv, bool causal) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = S + r * ld;
    if (mv.base) {
      const T* m = mv.base + mv.offset[b] + (i0 + r) * mv.row;
      for (int64_t j = 0; j < cols; ++j) row[j] += m[j * mv.col];
    }
    if (causal) std::fill(row + std::min(cols, i0 + r + 1), row + cols, static_cast<T>(kNegInf));
  }
}

// Keys a row block reads: all S, or with the causal mask only those up to its last query row.
inline int64_t block_cols(const Geometry& g, bool causal, int64_t i0, int64_t rows) {
  return causal ? std::min(g.S, i0 + rows) : g.S;
}

// Each row of S [rows, cols] (ld apart) becomes its softmax in place, and lse[r] its log Σ exp;
// a row whose every key is masked (all −inf) becomes zeros with lse −inf.
template <class T>
void sdpa_softmax_rows(T* S, int64_t ld, int64_t rows, int64_t cols, T* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = S + r * ld;
    // Every key masked (all −inf): a zero row. Tested on the row itself, not on m: OpenMP's max
    // reduction may start its private copies at the lowest finite value (clang's does), so an all
    // −inf row can reduce to −max.
    const T* first_kept =
        std::find_if(row, row + cols, [](T s) { return s != static_cast<T>(kNegInf); });
    if (first_kept == row + cols) {
      std::fill(row, row + cols, T(0));
      lse[r] = static_cast<T>(kNegInf);
      continue;
    }
    T m = row[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 1; j < cols; ++j) m = row[j] > m ? row[j] : m;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) row[j] = exp_fast(row[j] - m);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) sum += row[j];
    lse[r] = static_cast<T>(static_cast<double>(m) + std::log(sum));
    const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) row[j] *= inv;
  }
}

// ---- forward: per batch, per row block: S = scale·Q·Kᵀ + mask, softmax in place, O = P·V ------
// q [Bt, L, E], k [Bt, S, E], v [Bt, S, Ev], out [Bt, L, Ev] (strided), lse [Bt, L], and when
// given probs [Bt, L, S]: the probabilities are computed there instead of in a scratch block.
template <class T>
void forward_impl(const SdpaInputs& in, const Geometry& g, Tensor& out, Tensor& lse,
                  Tensor* probs) {
  const Matrices<T> Q = matrices<T>(in.q, g.batches), K = matrices<T>(in.k, g.batches);
  const Matrices<T> V = matrices<T>(in.v, g.batches);
  const MaskView<T> mv = mask_view<T>(in.mask, g.batches);
  const WritableMatrices<T> Out = writable_matrices<T>(&out, g.batches);
  T* l = lse.data<T>();
  T* kept = probs ? probs->data<T>() : nullptr;
  const T scale = static_cast<T>(in.scale);
#pragma omp parallel if (g.work() > kSdpaParallelWork)
  {
    std::vector<T> S(kept ? 0 : std::min(kRowBlock, g.L) * g.S);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < g.batches; ++b) {
      for (int64_t i0 = 0; i0 < g.L; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, g.L - i0),
                      cols = block_cols(g, in.causal, i0, rows);
        T* ob = Out.at(b) + i0 * Out.ld;
        if (cols == 0) {  // no keys: every row is empty
          zero_matrix_rows(ob, rows, g.Ev, Out.ld);
          std::fill(l + b * g.L + i0, l + b * g.L + i0 + rows, static_cast<T>(kNegInf));
          continue;
        }
        // S [rows, cols] (rows s_ld apart) = scale · Q[i0 : i0+rows] · K[0 : cols]ᵀ + mask
        T* Sb = kept ? kept + (b * g.L + i0) * g.S : S.data();
        const int64_t s_ld = kept ? g.S : cols;
        gemm_one_thread(false, true, rows, cols, g.E, scale, Q.at(b) + i0 * Q.ld, Q.ld, K.at(b),
                        K.ld, T(0), Sb, s_ld);
        add_masks(Sb, s_ld, rows, cols, i0, b, mv, in.causal);
        sdpa_softmax_rows(Sb, s_ld, rows, cols, l + b * g.L + i0);
        // O[i0 : i0+rows] = P · V[0 : cols]
        gemm_one_thread(false, false, rows, g.Ev, cols, T(1), Sb, s_ld, V.at(b), V.ld, T(0), ob,
                        Out.ld);
      }
    }
  }
}

// ---- backward: per batch, per row block ------------------------------------------------------
//   P = exp(scale·Q·Kᵀ + mask − lse) (recomputed; 0 on empty rows),  dV += Pᵀ·dO,  dP = dO·Vᵀ,
//   D_i = Σ_d dO_id·O_id,  dS = P ∘ (dP − D),  dmask = dS,  dQ = scale·dS·K,  dK += scale·dSᵀ·Q
// The backward's two row loops. S [rows, cols] (scaled, masked scores) becomes P = exp(S − lse)
// in place, row r with lse[r]; a row with lse = −inf (every key masked) becomes zeros.
template <class T>
void probabilities_from_scores(T* S, const T* lse, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = S + r * cols;
    const T lse_i = lse[r];
    if (lse_i == static_cast<T>(kNegInf)) {
      std::fill(row, row + cols, T(0));
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) row[j] = exp_fast(row[j] - lse_i);
  }
}

// dS [rows, cols] (dP on entry) = P ∘ (dP − D) in place, D_i = Σ_d dO_id·O_id (P, O, dO [rows, Ev]
// with rows p_ld, o_ld and do_ld apart).
template <class T>
void score_gradients(T* dS, const T* P, int64_t p_ld, const T* O, int64_t o_ld, const T* dO,
                     int64_t do_ld, int64_t rows, int64_t cols, int64_t Ev) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* o_i = O + r * o_ld;
    const T* do_i = dO + r * do_ld;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t d = 0; d < Ev; ++d) acc += static_cast<double>(do_i[d]) * o_i[d];
    const T D = static_cast<T>(acc);
    const T* p = P + r * p_ld;
    T* ds = dS + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) ds[j] = p[j] * (ds[j] - D);
  }
}

template <class T>
void backward_impl(const SdpaInputs& in, const Geometry& g, const Tensor& out, const Tensor& lse,
                   const Tensor* probs, const Tensor& dout, Tensor* dq, Tensor* dk, Tensor* dv,
                   Tensor* dmask) {
  const Matrices<T> Q = matrices<T>(in.q, g.batches), K = matrices<T>(in.k, g.batches);
  const Matrices<T> V = matrices<T>(in.v, g.batches), O = matrices<T>(out, g.batches);
  const Matrices<T> dO = matrices<T>(dout, g.batches);
  const MaskView<T> mv = mask_view<T>(in.mask, g.batches);
  const WritableMatrices<T> dQ = writable_matrices<T>(dq, g.batches),
                            dK = writable_matrices<T>(dk, g.batches);
  const WritableMatrices<T> dV = writable_matrices<T>(dv, g.batches);
  const T* l = lse.data<T>();
  const T* kept = probs ? probs->data<T>() : nullptr;
  T* dmp = dmask ? dmask->data<T>() : nullptr;
  const T scale = static_cast<T>(in.scale);
  const bool need_ds = dq || dk || dmp;
#pragma omp parallel if (g.work() > kSdpaParallelWork)
  {
    const int64_t block = std::min(kRowBlock, g.L);
    std::vector<T> P(kept ? 0 : block * g.S), dS(need_ds ? block * g.S : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < g.batches; ++b) {
      T* dkb = dk ? dK.at(b) : nullptr;
      T* dvb = dv ? dV.at(b) : nullptr;
      if (dkb) zero_matrix_rows(dkb, g.S, g.E, dK.ld);
      if (dvb) zero_matrix_rows(dvb, g.S, g.Ev, dV.ld);
      if (dmp) std::fill(dmp + b * g.L * g.S, dmp + (b + 1) * g.L * g.S, T(0));
      for (int64_t i0 = 0; i0 < g.L; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, g.L - i0),
                      cols = block_cols(g, in.causal, i0, rows);
        const T* q_blk = Q.at(b) + i0 * Q.ld;
        const T* do_blk = dO.at(b) + i0 * dO.ld;
        T* dq_blk = dq ? dQ.at(b) + i0 * dQ.ld : nullptr;
        if (cols == 0) {
          if (dq_blk) zero_matrix_rows(dq_blk, rows, g.E, dQ.ld);
          continue;
        }
        // P [rows, cols] (rows p_ld apart): the forward's, or exp(scale·Q_blk·K[0:cols]ᵀ + mask −
        // lse)
        const T* Pb = kept ? kept + (b * g.L + i0) * g.S : P.data();
        const int64_t p_ld = kept ? g.S : cols;
        if (!kept) {
          gemm_one_thread(false, true, rows, cols, g.E, scale, q_blk, Q.ld, K.at(b), K.ld, T(0),
                          P.data(), cols);
          add_masks(P.data(), cols, rows, cols, i0, b, mv, in.causal);
          probabilities_from_scores(P.data(), l + b * g.L + i0, rows, cols);
        }
        // dV[0:cols] += Pᵀ · dO_blk
        if (dvb)
          gemm_one_thread(true, false, cols, g.Ev, rows, T(1), Pb, p_ld, do_blk, dO.ld, T(1), dvb,
                          dV.ld);
        if (!need_ds) continue;
        // dP [rows, cols] = dO_blk · V[0:cols]ᵀ, then dS = P ∘ (dP − D) in place
        gemm_one_thread(false, true, rows, cols, g.Ev, T(1), do_blk, dO.ld, V.at(b), V.ld, T(0),
                        dS.data(), cols);
        score_gradients(dS.data(), Pb, p_ld, O.at(b) + i0 * O.ld, O.ld, do_blk, dO.ld, rows, cols,
                        g.Ev);
        if (dmp)
          for (int64_t r = 0; r < rows; ++r)
            std::copy(dS.data() + r * cols, dS.data() + (r + 1) * cols,
                      dmp + (b * g.L + i0 + r) * g.S);
        // dQ_blk = scale · dS · K[0:cols];  dK[0:cols] += scale · dSᵀ · Q_blk
        if (dq_blk)
          gemm_one_thread(false, false, rows, g.E, cols, scale, dS.data(), cols, K.at(b), K.ld,
                          T(0), dq_blk, dQ.ld);
        if (dkb)
          gemm_one_thread(true, false, cols, g.E, rows, scale, dS.data(), cols, q_blk, Q.ld, T(1),
                          dkb, dK.ld);
      }
    }
  }
}

// t has the batch axes' product Bt and matrix axes [rows, cols] (shape: [Bt, rows, cols]), the
// dtype, and a layout the kernels can read or write in place: the last axis of stride 1 and rows at
// least a row apart (contiguous, or heads seen in a wider [N, L, H·hd] tensor).
void check_sdpa_strided(const Tensor* t, const Shape& shape, DType dtype, const char* what) {
  if (!t) return;
  const int64_t rows = shape[1], cols = shape[2];
  bool ok = t->defined() && t->dim() >= 2 && t->dtype() == dtype && t->size(-2) == rows &&
            t->size(-1) == cols;
  int64_t batches = 1;
  for (int64_t a = 0; ok && a < t->dim() - 2; ++a) batches *= t->size(a);
  ok = ok && batches == shape[0] && (cols <= 1 || t->strides()[t->dim() - 1] == 1) &&
       (rows <= 1 || t->strides()[t->dim() - 2] >= cols);
  if (!ok)
    throw std::invalid_argument(fmt::format(
        "scaled_dot_product_attention kernel: {} must be a {} {} (batch axes of any shape, the "
        "last axis of stride 1), got {}",
        what, shape_str(shape), dtype_name(dtype), t->defined() ? t->describe() : "undefined"));
}

void check_sdpa_contiguous(const Tensor* t, const Shape& shape, DType dtype, const char* what) {
  if (!t) return;
  if (!t->defined() || t->shape() != shape || t->dtype() != dtype || !t->is_contiguous())
    throw std::invalid_argument(fmt::format(
        "scaled_dot_product_attention kernel: {} must be a contiguous {} {}, got {}", what,
        shape_str(shape), dtype_name(dtype), t->defined() ? t->describe() : "undefined"));
}

}  // namespace

void sdpa_forward(const SdpaInputs& in, Tensor& out, Tensor& lse, Tensor* probs) {
  const Geometry g = geometry_of(in);
  check_sdpa_strided(&out, {g.batches, g.L, g.Ev}, in.q.dtype(), "out");
  check_sdpa_contiguous(&lse, {g.batches, g.L}, in.q.dtype(), "lse");
  check_sdpa_contiguous(probs, {g.batches, g.L, g.S}, in.q.dtype(), "probs");
  if (out.numel() == 0) return;
  dispatch_float(in.q.dtype(), "scaled_dot_product_attention",
                 [&]<class T>() { forward_impl<T>(in, g, out, lse, probs); });
}

void sdpa_backward(const SdpaInputs& in, const Tensor& out, const Tensor& lse, const Tensor& dout,
                   Tensor* dq, Tensor* dk, Tensor* dv, Tensor* dmask, const Tensor* probs) {
  const Geometry g = geometry_of(in);
  const DType dt = in.q.dtype();
  check_sdpa_strided(&out, {g.batches, g.L, g.Ev}, dt, "out");
  check_sdpa_contiguous(&lse, {g.batches, g.L}, dt, "lse");
  check_sdpa_strided(&dout, {g.batches, g.L, g.Ev}, dt, "dout");
  check_sdpa_strided(dq, {g.batches, g.L, g.E}, dt, "dq");
  check_sdpa_strided(dk, {g.batches, g.S, g.E}, dt, "dk");
  check_sdpa_strided(dv, {g.batches, g.S, g.Ev}, dt, "dv");
  check_sdpa_contiguous(dmask, {g.batches, g.L, g.S}, dt, "dmask");
  check_sdpa_contiguous(probs, {g.batches, g.L, g.S}, dt, "probs");
  for (Tensor* t : {dq, dk, dv, dmask})  // empty products: zeros (the loops below skip them)
    if (t && (g.L == 0 || g.S == 0 || g.Ev == 0)) t->fill(0.0);
  if (g.L == 0 || g.S == 0 || g.Ev == 0 || g.batches == 0) return;
  dispatch_float(dt, "scaled_dot_product_attention", [&]<class T>() {
    backward_impl<T>(in, g, out, lse, probs, dout, dq, dk, dv, dmask);
  });
}

// ---- references: explicit loops in double over the whole L×S matrix ---------------------------
namespace {
struct RefValues {
  Geometry g;
  std::vector<double> q, k, v, mask, P;  // P [Bt, L, S]
};

// Each input's values at the full batch shape, and the probabilities (0 on rows with no key).
RefValues ref_probabilities(const SdpaInputs& in) {
  RefValues r;
  r.g = geometry_of(in);
  const Geometry& g = r.g;
  r.q = in.q.contiguous().to_vector();
  r.k = in.k.contiguous().to_vector();
  r.v = in.v.contiguous().to_vector();
  if (in.mask.defined()) r.mask = in.mask.contiguous().to_vector();
  r.P.assign(g.batches * g.L * g.S, 0.0);
  std::vector<double> s(g.S);
  for (int64_t b = 0; b < g.batches; ++b)
    for (int64_t i = 0; i < g.L; ++i) {
      double m = kNegInf;
      for (int64_t j = 0; j < g.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < g.E; ++e)
          dot += r.q[(b * g.L + i) * g.E + e] * r.k[(b * g.S + j) * g.E + e];
        s[j] = in.scale * dot + (r.mask.empty() ? 0.0 : r.mask[(b * g.L + i) * g.S + j]);
        if (in.causal && j > i) s[j] = kNegInf;
        m = std::max(m, s[j]);
      }
      if (m == kNegInf) continue;
      double sum = 0;
      for (int64_t j = 0; j < g.S; ++j) sum += std::exp(s[j] - m);
      for (int64_t j = 0; j < g.S; ++j) r.P[(b * g.L + i) * g.S + j] = std::exp(s[j] - m) / sum;
    }
  return r;
}
}  // namespace

Tensor ref_sdpa_forward(const SdpaInputs& in) {
  const RefValues r = ref_probabilities(in);
  const Geometry& g = r.g;
  std::vector<double> out(g.batches * g.L * g.Ev, 0.0);
  for (int64_t b = 0; b < g.batches; ++b)
    for (int64_t i = 0; i < g.L; ++i)
      for (int64_t j = 0; j < g.S; ++j)
        for (int64_t e = 0; e < g.Ev; ++e)
          out[(b * g.L + i) * g.Ev + e] +=
              r.P[(b * g.L + i) * g.S + j] * r.v[(b * g.S + j) * g.Ev + e];
  return Tensor::from_vector(out, {g.batches, g.L, g.Ev}, in.q.dtype());
}

void ref_sdpa_backward(const SdpaInputs& in, const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv,
                       Tensor& dmask) {
  const RefValues r = ref_probabilities(in);
  const Geometry& g = r.g;
  const std::vector<double> go = dout.contiguous().to_vector();
  std::vector<double> gq(g.batches * g.L * g.E, 0.0), gk(g.batches * g.S * g.E, 0.0);
  std::vector<double> gv(g.batches * g.S * g.Ev, 0.0), gm(g.batches * g.L * g.S, 0.0);
  for (int64_t b = 0; b < g.batches; ++b)
    for (int64_t i = 0; i < g.L; ++i) {
      const double* p = &r.P[(b * g.L + i) * g.S];
      const double* gi = &go[(b * g.L + i) * g.Ev];
      std::vector<double> dp(g.S, 0.0);
      double D = 0;
      for (int64_t j = 0; j < g.S; ++j) {
        for (int64_t e = 0; e < g.Ev; ++e) {
          dp[j] += gi[e] * r.v[(b * g.S + j) * g.Ev + e];
          gv[(b * g.S + j) * g.Ev + e] += p[j] * gi[e];
        }
        D += p[j] * dp[j];
      }
      for (int64_t j = 0; j < g.S; ++j) {
        const double ds = p[j] * (dp[j] - D);
        gm[(b * g.L + i) * g.S + j] = ds;
        for (int64_t e = 0; e < g.E; ++e) {
          gq[(b * g.L + i) * g.E + e] += in.scale * ds * r.k[(b * g.S + j) * g.E + e];
          gk[(b * g.S + j) * g.E + e] += in.scale * ds * r.q[(b * g.L + i) * g.E + e];
        }
      }
    }
  const DType dt = in.q.dtype();
  dq = Tensor::from_vector(gq, {g.batches, g.L, g.E}, dt);
  dk = Tensor::from_vector(gk, {g.batches, g.S, g.E}, dt);
  dv = Tensor::from_vector(gv, {g.batches, g.S, g.Ev}, dt);
  dmask = Tensor::from_vector(gm, {g.batches, g.L, g.S}, dt);
}

}  // namespace dg
