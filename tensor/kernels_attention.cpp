// Causal attention kernels (see kernels_attention.h): the fast forward/backward pair built on
// BLAS gemm over row blocks of the causal triangle, each public kernel followed by its plain
// reference; then RoPE.
#include "tensor/kernels_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/fast_math.h"
#include "tensor/kernels_elementwise.h"  // kParallelGrain
#include "tensor/kernels_matmul.h"
#include "tensor/threads.h"  // parallel_for

namespace dg {

// ---- shape checks ------------------------------------------------------------------------

AttentionShape attention_shape(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("{}: {} (q {}, k {}, v {})", op, why, q.describe(),
                                             k.describe(), v.describe()));
  };
  if (!q.defined() || !k.defined() || !v.defined())
    throw std::invalid_argument(fmt::format("{}: q, k and v must be defined", op));
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    throw fail("expected 4-D q [B, H, T, hd] and k, v [B, Hkv, T, hd]");
  if (k.shape() != v.shape())
    throw fail(fmt::format("k {} and v {} must have the same shape", shape_str(k.shape()),
                           shape_str(v.shape())));
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype())
    throw fail("q, k and v must have one dtype");
  if (!is_floating(q.dtype())) throw fail("expected float32 or float64 tensors");
  AttentionShape s{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3)};
  if (k.size(0) != s.B || k.size(2) != s.T || k.size(3) != s.hd)
    throw fail(fmt::format("q {} and k {} must agree on batch, length and head size",
                           shape_str(q.shape()), shape_str(k.shape())));
  if (s.hd < 1) throw fail("the head size must be positive");
  if (s.Hkv < 1 || s.H % s.Hkv != 0)
    throw fail(fmt::format("q has {} heads, which is not a multiple of the {} heads of k {}", s.H,
                           s.Hkv, shape_str(k.shape())));
  return s;
}

double attention_scale(double scale, int64_t hd, const char* op) {
  if (!std::isfinite(scale))
    throw std::invalid_argument(fmt::format("{}: scale {} is not finite", op, scale));
  return scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(hd)) : scale;
}

namespace {

// Row blocks of the causal triangle: block [i0, i0+rows) attends to keys [0, i0+rows), so the
// gemms skip most of the masked upper triangle while the scratch stays rows × T.
constexpr int64_t kRowBlock = 64;

// Multiply-adds of one causal pass over all heads. Below kAttentionParallelWork a call runs on one
// thread: waking a second (passively waiting) thread saves nothing on such a pass. The micro
// preset's pass (B 4, H 4, T 64, hd 16: 532,480) runs on one thread: a micro step then has no
// parallel region and takes the same time at 2 threads as at 1 (measured within 2%, which with the
// region was up to 0.87x). The choice depends only on the shape, and every (b, head) task
// computes the same way on any thread.
constexpr int64_t kAttentionParallelWork = 1 << 20;
inline int64_t causal_work(const AttentionShape& s) {
  return s.B * s.H * s.T * (s.T + 1) / 2 * s.hd;
}

// Row-major C[M,N] = alpha · op(A) · op(B) + beta · C on the calling thread (float32 in the
// process's matmul precision: QKᵀ and PV take bf16 inputs when it is bf16).
template <class T>
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                 int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  gemm_one_thread(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// A [B, Hx, T, hd] tensor seen as one row-major T×hd matrix per (b, head) with leading dimension
// ld, read in place when the last axis has stride 1 (the permuted [B,T,H,hd] case: ld = H·hd).
template <class T>
struct HeadMatrices {
  Tensor keep;  // the tensor read (a contiguous copy when the layout needed one)
  const T* base = nullptr;
  int64_t stride_b = 0, stride_h = 0, ld = 0;
  const T* at(int64_t b, int64_t h) const { return base + b * stride_b + h * stride_h; }
};

template <class T>
HeadMatrices<T> head_matrices(const Tensor& x) {
  auto usable = [](const Tensor& t) {
    const Shape& sh = t.shape();
    const Shape& st = t.strides();
    if (sh[3] > 1 && st[3] != 1) return false;
    return sh[2] <= 1 || st[2] >= std::max<int64_t>(sh[3], 1);
  };
  HeadMatrices<T> m;
  m.keep = usable(x) ? x : raw::clone(x);  // a contiguous copy
  const Shape& sh = m.keep.shape();
  const Shape& st = m.keep.strides();
  m.base = m.keep.template data<T>();
  m.stride_b = st[0];
  m.stride_h = st[1];
  m.ld = sh[2] <= 1 ? std::max<int64_t>(sh[3], 1) : st[2];
  return m;
}

// A [B, Hx, T, hd] tensor written in place: each (b, head) a T×hd matrix with rows ld apart
// (contiguous, or e.g. [B,T,H,hd] storage seen as [B,H,T,hd]). Rows of different (b, head) and t
// must not overlap; writable_layout() checks that.
template <class T>
struct OutMatrices {
  T* base = nullptr;
  int64_t stride_b = 0, stride_h = 0, ld = 0;
  T* at(int64_t b, int64_t h) const { return base + b * stride_b + h * stride_h; }
};

// Last axis stride 1, rows at least hd apart, heads apart by whole rows or whole T-row blocks,
// batches beyond everything: the layouts of a contiguous [B,H,T,hd] and of a permuted dense
// [B,T,H,hd]. Anything else (overlapping or broadcast views) is refused.
bool writable_layout(const Tensor& t) {
  const Shape& sh = t.shape();
  const Shape& st = t.strides();
  const int64_t Hx = sh[1], T = sh[2], hd = sh[3];
  if (hd > 1 && st[3] != 1) return false;
  if (T > 1 && st[2] < hd) return false;
  if (Hx > 1 &&
      !(st[1] >= T * std::max<int64_t>(st[2], hd) || (st[1] >= hd && st[2] >= Hx * st[1])))
    return false;
  return sh[0] <= 1 || st[0] >= Hx * T * hd;
}

template <class T>
OutMatrices<T> out_matrices(Tensor& t) {
  const Shape& st = t.strides();
  return {t.template data<T>(), st[0], st[1], t.size(2) <= 1 ? t.size(3) : st[2]};
}

void check_target(const Tensor* t, const Shape& shape, DType dtype, const char* what) {
  if (!t) return;
  if (!t->defined() || t->shape() != shape || t->dtype() != dtype || !writable_layout(*t))
    throw std::invalid_argument(fmt::format(
        "causal_attention backward: {} must be a {} {} with rows that do not overlap (contiguous, "
        "or [B,T,H,hd] seen as [B,H,T,hd]), got {}",
        what, shape_str(shape), dtype_name(dtype), t->defined() ? t->describe() : "undefined"));
}

// ---- forward: per (b, h), per row block: S = scale·Q·Kᵀ, masked softmax in place, O = P·V ------
// q [B,H,T,hd], k v [B,Hkv,T,hd] (strided) -> out [B,H,T,hd] (writable layout), lse [B,H,T]
template <class T>
void forward_impl(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                  T scale, Tensor& out, Tensor& lse) {
  const HeadMatrices<T> Q = head_matrices<T>(q), K = head_matrices<T>(k), V = head_matrices<T>(v);
  const OutMatrices<T> O = out_matrices<T>(out);
  T* l = lse.data<T>();
  const int64_t T_ = s.T, hd = s.hd, group = s.H / s.Hkv, tasks = s.B * s.H;
#pragma omp parallel if (causal_work(s) > kAttentionParallelWork)
  {
    std::vector<T> S(std::min(kRowBlock, T_) * T_);  // one rows × cols block, per thread
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / s.H, h = task % s.H, g = h / group;
      const T* qh = Q.at(b, h);
      const T* kh = K.at(b, g);
      const T* vh = V.at(b, g);
      T* oh = O.at(b, h);
      T* lh = l + task * T_;
      for (int64_t i0 = 0; i0 < T_; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, T_ - i0), cols = i0 + rows;
        // S [rows, cols] = scale · Q[i0 : i0+rows] · K[0 : cols]ᵀ
        gemm(false, true, rows, cols, hd, scale, qh + i0 * Q.ld, Q.ld, kh, K.ld, T(0), S.data(),
             cols);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = S.data() + r * cols;
          const int64_t n = i0 + r + 1;  // keys 0..i are visible
          T m = row[0];
#pragma omp simd reduction(max : m)
          for (int64_t j = 1; j < n; ++j) m = row[j] > m ? row[j] : m;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] = exp_fast(row[j] - m);
          double sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < n; ++j) sum += row[j];
          lh[i0 + r] = static_cast<T>(static_cast<double>(m) + std::log(sum));
          const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] *= inv;
          std::fill(row + n, row + cols, T(0));
        }
        // O[i0 : i0+rows] = P · V[0 : cols]
        gemm(false, false, rows, hd, cols, T(1), S.data(), cols, vh, V.ld, T(0), oh + i0 * O.ld,
             O.ld);
      }
    }
  }
}

// ---- backward: per (b, kv head), its query heads in order, per row block ------------------------
//   P = exp(scale·Q·Kᵀ − lse) (recomputed),  dV += Pᵀ·dO,  dP = dO·Vᵀ,  D_i = Σ_d dO_id·O_id,
//   dS = P ∘ (dP − D),  dQ += scale·dS·K,  dK += scale·dSᵀ·Q
// dout [B,H,T,hd] (strided); dq [B,H,T,hd], dk dv [B,Hkv,T,hd] (writable layouts), added into.
template <class T>
void backward_impl(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Tensor& out, const Tensor& lse, const Tensor& dout, T scale, Tensor* dq,
                   Tensor* dk, Tensor* dv) {
  const HeadMatrices<T> Q = head_matrices<T>(q), K = head_matrices<T>(k), V = head_matrices<T>(v);
  const HeadMatrices<T> O = head_matrices<T>(out), dO = head_matrices<T>(dout);
  const Tensor lse_c = lse.is_contiguous() ? lse : raw::clone(lse);
  const T* l = lse_c.data<T>();
  const OutMatrices<T> dQ = dq ? out_matrices<T>(*dq) : OutMatrices<T>{};
  const OutMatrices<T> dK = dk ? out_matrices<T>(*dk) : OutMatrices<T>{};
  const OutMatrices<T> dV = dv ? out_matrices<T>(*dv) : OutMatrices<T>{};
  T* dqp = dQ.base;
  T* dkp = dK.base;
  T* dvp = dV.base;
  const int64_t T_ = s.T, hd = s.hd, group = s.H / s.Hkv, tasks = s.B * s.Hkv;
  const bool need_ds = dqp || dkp;
#pragma omp parallel if (causal_work(s) > kAttentionParallelWork)
  {
    const int64_t block = std::min(kRowBlock, T_);
    std::vector<T> P(block * T_), dS(need_ds ? block * T_ : 0);  // per thread
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / s.Hkv, g = task % s.Hkv;
      const T* kh = K.at(b, g);
      const T* vh = V.at(b, g);
      T* dkh = dkp ? dK.at(b, g) : nullptr;
      T* dvh = dvp ? dV.at(b, g) : nullptr;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {  // fixed order into dk, dv
        const T* qh = Q.at(b, h);
        const T* oh = O.at(b, h);
        const T* doh = dO.at(b, h);
        const T* lh = l + (b * s.H + h) * T_;
        T* dqh = dqp ? dQ.at(b, h) : nullptr;
        for (int64_t i0 = 0; i0 < T_; i0 += kRowBlock) {
          const int64_t rows = std::min(kRowBlock, T_ - i0), cols = i0 + rows;
          const T* q_blk = qh + i0 * Q.ld;
          const T* do_blk = doh + i0 * dO.ld;
          // P [rows, cols] = exp(scale · Q_blk · K[0:cols]ᵀ − lse), zero where j > i
          gemm(false, true, rows, cols, hd, scale, q_blk, Q.ld, kh, K.ld, T(0), P.data(), cols);
          for (int64_t r = 0; r < rows; ++r) {
            T* row = P.data() + r * cols;
            const int64_t n = i0 + r + 1;
            const T lse_i = lh[i0 + r];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) row[j] = exp_fast(row[j] - lse_i);
            std::fill(row + n, row + cols, T(0));
          }
          // dV[0:cols] += Pᵀ · dO_blk
          if (dvh)
            gemm(true, false, cols, hd, rows, T(1), P.data(), cols, do_blk, dO.ld, T(1), dvh,
                 dV.ld);
          if (!need_ds) continue;
          // dP [rows, cols] = dO_blk · V[0:cols]ᵀ, then dS = P ∘ (dP − D) in place
          gemm(false, true, rows, cols, hd, T(1), do_blk, dO.ld, vh, V.ld, T(0), dS.data(), cols);
          for (int64_t r = 0; r < rows; ++r) {
            const T* o_i = oh + (i0 + r) * O.ld;
            const T* do_i = do_blk + r * dO.ld;
            double acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t d = 0; d < hd; ++d) acc += static_cast<double>(do_i[d]) * o_i[d];
            const T D = static_cast<T>(acc);
            const T* p = P.data() + r * cols;
            T* ds = dS.data() + r * cols;
            const int64_t n = i0 + r + 1;
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - D);
            std::fill(ds + n, ds + cols, T(0));
          }
          // dQ_blk += scale · dS · K[0:cols];  dK[0:cols] += scale · dSᵀ · Q_blk
          if (dqh)
            gemm(false, false, rows, hd, cols, scale, dS.data(), cols, kh, K.ld, T(1),
                 dqh + i0 * dQ.ld, dQ.ld);
          if (dkh)
            gemm(true, false, cols, hd, rows, scale, dS.data(), cols, q_blk, Q.ld, T(1), dkh,
                 dK.ld);
        }
      }
    }
  }
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor& out,
                       Tensor& lse) {
  const AttentionShape s = attention_shape(q, k, v, "causal_attention");
  const Shape out_shape{s.B, s.H, s.T, s.hd}, lse_shape{s.B, s.H, s.T};
  if (!out.defined() || out.shape() != out_shape || out.dtype() != q.dtype() ||
      !writable_layout(out) || !lse.defined() || lse.shape() != lse_shape ||
      lse.dtype() != q.dtype() || !lse.is_contiguous())
    throw std::invalid_argument(
        fmt::format("causal_attention: out must be a {} with rows that do not overlap and lse a "
                    "contiguous {} of {}, "
                    "got {} and {}",
                    shape_str(out_shape), shape_str(lse_shape), dtype_name(q.dtype()),
                    out.defined() ? out.describe() : "undefined",
                    lse.defined() ? lse.describe() : "undefined"));
  if (out.numel() == 0) return;
  dispatch_float(q.dtype(), "causal_attention",
                 [&]<class T>() { forward_impl<T>(s, q, k, v, static_cast<T>(scale), out, lse); });
}

// ---- reference forward (and, after the fast backward, the reference backward): explicit loops
// in double over the full T×T probabilities ---------------------------------------------------

namespace {
Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype) {
  return Tensor::from_vector(values, shape, dtype);
}

// P[b][h] as a flat T×T matrix (zeros above the diagonal), and the logsumexp of each row.
std::vector<double> ref_probabilities(const AttentionShape& s, const std::vector<double>& q,
                                      const std::vector<double>& k, double scale,
                                      std::vector<double>& lse) {
  const int64_t T = s.T, hd = s.hd, group = s.H / s.Hkv;
  std::vector<double> P(s.B * s.H * T * T, 0.0);
  lse.assign(s.B * s.H * T, 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t g = h / group;
      const double* qh = &q[((b * s.H + h) * T) * hd];
      const double* kh = &k[((b * s.Hkv + g) * T) * hd];
      double* Ph = &P[(b * s.H + h) * T * T];
      for (int64_t i = 0; i < T; ++i) {
        double m = -std::numeric_limits<double>::infinity();
        std::vector<double> score(T, -std::numeric_limits<double>::infinity());
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += qh[i * hd + d] * kh[j * hd + d];
          score[j] = scale * dot;
          m = std::max(m, score[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(score[j] - m);
        for (int64_t j = 0; j <= i; ++j) Ph[i * T + j] = std::exp(score[j] - m) / sum;
        lse[(b * s.H + h) * T + i] = m + std::log(sum);
      }
    }
  return P;
}
}  // namespace

Tensor ref_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                             Tensor* lse_out) {
  const AttentionShape s = attention_shape(q, k, v, "ref_attention_forward");
  scale = attention_scale(scale, s.hd, "ref_attention_forward");
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  std::vector<double> lse;
  const std::vector<double> P = ref_probabilities(s, qv, kv, scale, lse);
  const int64_t T = s.T, hd = s.hd, group = s.H / s.Hkv;
  std::vector<double> out(s.B * s.H * T * hd, 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          for (int64_t d = 0; d < hd; ++d)
            out[((b * s.H + h) * T + i) * hd + d] +=
                P[((b * s.H + h) * T + i) * T + j] * vv[((b * s.Hkv + h / group) * T + j) * hd + d];
  if (lse_out) *lse_out = from_doubles(lse, {s.B, s.H, T}, q.dtype());
  return from_doubles(out, {s.B, s.H, T, hd}, q.dtype());
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, double scale, Tensor* dq, Tensor* dk,
                        Tensor* dv) {
  const AttentionShape s = attention_shape(q, k, v, "causal_attention backward");
  const Shape qs{s.B, s.H, s.T, s.hd}, ks{s.B, s.Hkv, s.T, s.hd};
  if (out.shape() != qs || dout.shape() != qs || lse.shape() != Shape{s.B, s.H, s.T} ||
      out.dtype() != q.dtype() || dout.dtype() != q.dtype() || lse.dtype() != q.dtype())
    throw std::invalid_argument(fmt::format(
        "causal_attention backward: expected out and dout {} and lse {} of {}, got {}, {} and {}",
        shape_str(qs), shape_str(Shape{s.B, s.H, s.T}), dtype_name(q.dtype()), out.describe(),
        dout.describe(), lse.describe()));
  check_target(dq, qs, q.dtype(), "dq");
  check_target(dk, ks, q.dtype(), "dk");
  check_target(dv, ks, q.dtype(), "dv");
  if (out.numel() == 0 || (!dq && !dk && !dv)) return;
  dispatch_float(q.dtype(), "causal_attention backward", [&]<class T>() {
    backward_impl<T>(s, q, k, v, out, lse, dout, static_cast<T>(scale), dq, dk, dv);
  });
}

// dS_ij = P_ij (dP_ij − Σ_k P_ik dP_ik) (the softmax Jacobian written out, not the D = dO·O trick)
void ref_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                            double scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const AttentionShape s = attention_shape(q, k, v, "ref_attention_backward");
  scale = attention_scale(scale, s.hd, "ref_attention_backward");
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  const std::vector<double> dov = dout.to_vector();
  std::vector<double> lse;
  const std::vector<double> P = ref_probabilities(s, qv, kv, scale, lse);
  const int64_t T = s.T, hd = s.hd, group = s.H / s.Hkv;
  std::vector<double> gq(qv.size(), 0.0), gk(kv.size(), 0.0), gv(vv.size(), 0.0);
  std::vector<double> dP(T * T), dS(T * T);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t qo = (b * s.H + h) * T * hd, ko = (b * s.Hkv + h / group) * T * hd;
      const double* Ph = &P[(b * s.H + h) * T * T];
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < hd; ++d) acc += dov[qo + i * hd + d] * vv[ko + j * hd + d];
          dP[i * T + j] = acc;
        }
      for (int64_t i = 0; i < T; ++i) {
        double row = 0;
        for (int64_t j = 0; j < T; ++j) row += Ph[i * T + j] * dP[i * T + j];
        for (int64_t j = 0; j < T; ++j) dS[i * T + j] = Ph[i * T + j] * (dP[i * T + j] - row);
      }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          for (int64_t d = 0; d < hd; ++d) {
            gq[qo + i * hd + d] += scale * dS[i * T + j] * kv[ko + j * hd + d];
            gk[ko + j * hd + d] += scale * dS[i * T + j] * qv[qo + i * hd + d];
            gv[ko + j * hd + d] += Ph[i * T + j] * dov[qo + i * hd + d];
          }
    }
  dq = from_doubles(gq, q.shape(), q.dtype());
  dk = from_doubles(gk, k.shape(), q.dtype());
  dv = from_doubles(gv, v.shape(), q.dtype());
}

// ============================================================================================
// RoPE (rotate-half): the tables, the rotation of rows anywhere in memory, and the
// contiguous forward (with its reference) and backward
// ============================================================================================

// Each template is instantiated for float and double right after its definition:
//   template decltype(f<float>) f<float>;   (the signature comes from the declaration)

// cos, sin [T, hd/2]. For float every step is float32 arithmetic, as in the torch reference:
// inv_freq = 1 / base^(float(2i) / hd), angle = float(position) * inv_freq, cosf / sinf.
template <class T>
void rope_tables(T* cos, T* sin, int64_t Tn, int64_t hd, double base, int64_t offset) {
  const int64_t h = hd / 2;
  std::vector<T> inv_freq(h);
  for (int64_t i = 0; i < h; ++i)
    inv_freq[i] = T(1) / std::pow(static_cast<T>(base), static_cast<T>(2 * i) / static_cast<T>(hd));
  for (int64_t t = 0; t < Tn; ++t) {
    const T pos = static_cast<T>(offset + t);
    for (int64_t i = 0; i < h; ++i) {
      const T angle = pos * inv_freq[i];
      cos[t * h + i] = std::cos(angle);
      sin[t * h + i] = std::sin(angle);
    }
  }
}
template decltype(rope_tables<float>) rope_tables<float>;
template decltype(rope_tables<double>) rope_tables<double>;

// x, out: [B, H, T, hd] rows at the given strides; cos, sin [T, hd/2]. Forward rotation
// out[i] = x[i]cos − x[i+h]sin, out[i+h] = x[i]sin + x[i+h]cos; inverse (the transpose):
// out[i] (+)= x[i]cos + x[i+h]sin, out[i+h] (+)= −x[i]sin + x[i+h]cos.
template <class T>
void rope_rows(T* out, RowStrides os, const T* x, RowStrides xs, const T* cos, const T* sin,
               int64_t B, int64_t H, int64_t Tn, int64_t hd, bool inverse, bool overwrite) {
  const int64_t h = hd / 2, rows = B * H * Tn;
  parallel_for(rows, rows * hd > kParallelGrain, [&](int64_t row) {
    const int64_t t = row % Tn, bh = row / Tn, b = bh / H, head = bh % H;
    const T* xr = x + b * xs.b + head * xs.h + t * xs.t;
    T* o = out + b * os.b + head * os.h + t * os.t;
    const T* c = cos + t * h;
    const T* s = sin + t * h;
    if (!inverse) {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] = a * c[i] - bb * s[i];
        o[i + h] = a * s[i] + bb * c[i];
      }
    } else if (overwrite) {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] = a * c[i] + bb * s[i];
        o[i + h] = bb * c[i] - a * s[i];
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < h; ++i) {
        const T a = xr[i], bb = xr[i + h];
        o[i] += a * c[i] + bb * s[i];
        o[i + h] += bb * c[i] - a * s[i];
      }
    }
  });
}
template decltype(rope_rows<float>) rope_rows<float>;
template decltype(rope_rows<double>) rope_rows<double>;

// x, out [BH, T, hd] contiguous; cos, sin [T, hd/2]
template <class T>
void rope_forward(T* out, const T* x, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                  int64_t hd) {
  const RowStrides rows{0, Tn * hd, hd};
  rope_rows(out, rows, x, rows, cos, sin, 1, BH, Tn, hd, false, true);
}
template decltype(rope_forward<float>) rope_forward<float>;
template decltype(rope_forward<double>) rope_forward<double>;

// Reference: the formula as a plain serial loop, sums in double.
template <class T>
void ref_rope_forward(T* out, const T* x, int64_t BH, int64_t Tn, int64_t hd, double base,
                      int64_t offset) {
  const int64_t h = hd / 2;
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t i = 0; i < h; ++i) {
        const T inv_freq =
            T(1) / std::pow(static_cast<T>(base), static_cast<T>(2 * i) / static_cast<T>(hd));
        const T angle = static_cast<T>(offset + t) * inv_freq;
        const T c = std::cos(angle), s = std::sin(angle);
        const int64_t at = (bh * Tn + t) * hd + i;
        out[at] = x[at] * c - x[at + h] * s;
        out[at + h] = x[at] * s + x[at + h] * c;
      }
}
template decltype(ref_rope_forward<float>) ref_rope_forward<float>;
template decltype(ref_rope_forward<double>) ref_rope_forward<double>;

// dout, dx [BH, T, hd] contiguous; cos, sin [T, hd/2]: the transpose (= inverse) rotation, added.
template <class T>
void rope_backward(T* dx, const T* dout, const T* cos, const T* sin, int64_t BH, int64_t Tn,
                   int64_t hd) {
  const RowStrides rows{0, Tn * hd, hd};
  rope_rows(dx, rows, dout, rows, cos, sin, 1, BH, Tn, hd, true, false);
}
template decltype(rope_backward<float>) rope_backward<float>;
template decltype(rope_backward<double>) rope_backward<double>;

}  // namespace dg
