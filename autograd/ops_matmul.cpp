// matmul, bmm and linear (with its fused forms linear_add and linear_rope, after their plain twins
// plain_linear_add and plain_linear_rope): forward and backward as BLAS GEMMs
// (tensor/kernels_matmul.h).
// Operands are read in place whenever BLAS can (row-major, or a transposed view passed as
// CblasTrans; batch axes by pointer offsets, broadcast ones by offset 0); only scattered layouts
// (e.g. stride-0 rows) are copied. Backwards accumulate with beta = 1 straight into the inputs'
// gradient buffers, summing broadcast batch axes inside the batched GEMM (no temporaries).
// Under create_graph (autograd/tape.h) matmul, bmm, linear and linear_add run a recorded backward
// instead (g·Bᵀ and Aᵀ·g as matmuls, linear's bias gradient a sum); linear_rope refuses it. linear
// saves x and W for the version check, not the bias or the residual, which its backward never
// reads. Does not accept 1-D matmul operands (numpy's vector rules) and does not mix dtypes.
// Checks: the rows at the end (tests/test_gradcheck_ops.cpp runs them), the kernels in
// tests/test_kernels_matmul.cpp, the plain twins against the fused ops in tests/test_plain_ops.cpp.
#include <fmt/format.h>

#include <memory>
#include <vector>

#include "autograd/grad_sink.h"
#include "autograd/op_steps.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/exercise.h"
#include "tensor/gemm_kernels.h"       // Bf16Rounded
#include "tensor/kernels_attention.h"  // rope_rows (linear_rope)
#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_matmul.h"
#include "tensor/kernels_pointwise.h"  // relu (linear_relu)
#include "tensor/profile.h"

namespace dg {

namespace {

// A matrix operand as BLAS reads it: the tensor itself, or a contiguous copy when its last two
// axes are not BLAS-readable, with its layout.
struct Operand {
  Tensor t;
  MatrixLayout layout;
};

Operand blas_operand(const Tensor& x) {
  MatrixLayout l = blas_layout(x);
  if (l.ok) return {x, l};
  Tensor c = Tensor::empty(x.shape(), x.dtype());
  copy_strided(c, x);
  return {c, blas_layout(c)};
}

Shape batch_shape(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// Element offset (from t's first element) of each batch entry's matrix, for t's batch axes
// broadcast to `batch` (flat row-major order over `batch`).
std::vector<int64_t> batch_offsets(const Shape& shape, const Shape& strides, const Shape& batch) {
  const Shape own(shape.begin(), shape.end() - 2), own_strides(strides.begin(), strides.end() - 2);
  const Shape st = broadcast_strides(own, own_strides, batch);
  const int64_t n = shape_numel(batch), rank = static_cast<int64_t>(batch.size());
  std::vector<int64_t> offsets(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0, rest = i;
    for (int64_t k = rank - 1; k >= 0; --k) {
      off += (rest % batch[k]) * st[k];
      rest /= batch[k];
    }
    offsets[i] = off;
  }
  return offsets;
}

bool all_equal(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x != v[0]) return false;
  return true;
}
// v[i] = v[0] + i·step: the matrices are consecutive blocks of one larger row-major matrix.
bool is_progression(const std::vector<int64_t>& v, int64_t step) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != v[0] + static_cast<int64_t>(i) * step) return false;
  return true;
}

// ---- matmul forward and backward ------------------------------------------------------------
// a [.., M, K] @ b [.., K, N] -> out [batch.., M, N], batch = broadcast(a.batch, b.batch): the
// operands as BLAS reads them and each batch entry's matrix offset in a, b and out.
struct MatmulPlan {
  Operand A, B;
  std::vector<int64_t> ao, bo, co;
  Shape batch, out_shape;
  int64_t M, N, K;
};

MatmulPlan plan_matmul(const Tensor& a, const Tensor& b, const char* op) {
  check_arg(a.defined() && a.dim() >= 2, op, a, "a first operand with at least 2 axes [.., M, K]");
  check_arg(b.defined() && b.dim() >= 2, op, b, "a second operand with at least 2 axes [.., K, N]");
  check_same_dtype(a, b, op);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (b.size(-2) != K)
    throw std::invalid_argument(fmt::format("{}: {} @ {}: inner sizes differ ({} vs {})", op,
                                            a.describe(), b.describe(), K, b.size(-2)));
  const Shape batch = broadcast_shapes(batch_shape(a), batch_shape(b), op);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);

  const Operand A = blas_operand(a), B = blas_operand(b);
  const std::vector<int64_t> ao = batch_offsets(A.t.shape(), A.t.strides(), batch);
  const std::vector<int64_t> bo = batch_offsets(B.t.shape(), B.t.strides(), batch);
  const int64_t nb = shape_numel(batch);
  std::vector<int64_t> co(nb);
  for (int64_t i = 0; i < nb; ++i) co[i] = i * M * N;
  return {A, B, ao, bo, co, batch, out_shape, M, N, K};
}

// out [batch.., M, N] = A_i · B_i per entry, written with beta = 0 (no zeroing pass).
void matmul_forward(const MatmulPlan& p, Tensor& out, const char* op) {
  const int64_t M = p.M, N = p.N, K = p.K, nb = static_cast<int64_t>(p.co.size());
  dispatch_float(out.dtype(), op, [&]<class T>() {
    const T* pa = p.A.t.data<T>();
    const T* pb = p.B.t.data<T>();
    T* pc = out.data<T>();
    if (out.numel() == 0) return;
    // b one matrix for all entries and a's matrices consecutive rows: one GEMM [nb·M, K]·[K, N].
    if (nb > 1 && all_equal(p.bo) && !p.A.layout.trans && is_progression(p.ao, M * p.A.layout.ld))
      return gemm(false, p.B.layout.trans, nb * M, N, K, T(1), pa + p.ao[0], p.A.layout.ld,
                  pb + p.bo[0], p.B.layout.ld, T(0), pc, N);
    gemm_batched(p.A.layout.trans, p.B.layout.trans, M, N, K, T(1), pa, p.A.layout.ld, p.ao, pb,
                 p.B.layout.ld, p.bo, T(0), pc, N, p.co);
  });
}

// dA_i += dC_i [M, N] · op(B_i)ᵀ [N, K]; entries broadcast over a sum into one dA.
template <class T>
void matmul_backward_a(const MatmulPlan& p, const Tensor& a, const T* pdc) {
  const int64_t M = p.M, N = p.N, K = p.K, nb = static_cast<int64_t>(p.co.size());
  const T* pb = p.B.t.data<T>();
  GradSink sink(a);
  const std::vector<int64_t> go = batch_offsets(a.shape(), contiguous_strides(a.shape()), p.batch);
  if (nb > 1 && all_equal(p.bo) && is_progression(go, M * K))
    gemm(false, !p.B.layout.trans, nb * M, K, N, T(1), pdc, N, pb + p.bo[0], p.B.layout.ld,
         sink.beta<T>(), sink.data<T>() + go[0], K);
  else {
    sink.zero_if_fresh();  // entries may share one dA: the batched path adds
    gemm_batched(false, !p.B.layout.trans, M, K, N, T(1), pdc, N, p.co, pb, p.B.layout.ld, p.bo,
                 T(1), sink.data<T>(), K, go);
  }
  sink.finish();
}

// dB_i += op(A_i)ᵀ [K, M] · dC_i [M, N]; with one b for all entries: [K, nb·M]·[nb·M, N].
template <class T>
void matmul_backward_b(const MatmulPlan& p, const Tensor& b, const T* pdc) {
  const int64_t M = p.M, N = p.N, K = p.K, nb = static_cast<int64_t>(p.co.size());
  const T* pa = p.A.t.data<T>();
  GradSink sink(b);
  const std::vector<int64_t> go = batch_offsets(b.shape(), contiguous_strides(b.shape()), p.batch);
  if (nb > 1 && all_equal(go) && !p.A.layout.trans && is_progression(p.ao, M * p.A.layout.ld))
    gemm(true, false, K, N, nb * M, T(1), pa + p.ao[0], p.A.layout.ld, pdc, N, sink.beta<T>(),
         sink.data<T>() + go[0], N);
  else {
    sink.zero_if_fresh();
    gemm_batched(!p.A.layout.trans, false, K, N, M, T(1), pa, p.A.layout.ld, p.ao, pdc, N, p.co,
                 T(1), sink.data<T>(), N, go);
  }
  sink.finish();
}

// The kernel backward: g [batch.., M, N] into a's and b's gradients.
void matmul_backward(const MatmulPlan& p, const Tensor& a, const Tensor& b, const Tensor& g,
                     const char* op) {
  const Tensor dc = g.contiguous();   // [batch.., M, N]
  if (dc.numel() == 0 || p.K == 0) {  // every gradient element is an empty sum: 0
    for (const Tensor& t : {a, b})
      if (t.requires_grad()) grad_of(t);
    return;
  }
  dispatch_float(dc.dtype(), op, [&]<class T>() {
    if (a.requires_grad()) matmul_backward_a<T>(p, a, dc.data<T>());
    if (b.requires_grad()) matmul_backward_b<T>(p, b, dc.data<T>());
  });
}

Tensor matmul_impl(const Tensor& a, const Tensor& b, const char* op) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const MatmulPlan plan = plan_matmul(a, b, op);
  Tensor out = Tensor::empty(plan.out_shape, a.dtype());
  matmul_forward(plan, out, op);
  if (tracing()) trace_op(op, {a, b}, {out});
  if (should_record({a, b}))
    record(op, {a, b}, out, [a, b, plan, op](const Tensor& g) {
      matmul_backward(plan, a, b, g, op);
    }).differentiable([a, b](const Tensor& g, const Tensor&) {
      matmul_backward_recorded(g, a, b);
    });
  return out;
}
}  // namespace

// dA = g·Bᵀ, dB = Aᵀ·g as recorded matmuls; accumulate_grad sums broadcast batch axes
DG_EXERCISE void matmul_backward_recorded(const Tensor& g, const Tensor& a, const Tensor& b) {
  if (a.requires_grad()) accumulate_grad(a, matmul(g, transpose(b, -1, -2)));
  if (b.requires_grad()) accumulate_grad(b, matmul(transpose(a, -1, -2), g));
}

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, "matmul"); }

// a [B, M, K] @ b [B, K, N] -> [B, M, N]
Tensor bmm(const Tensor& a, const Tensor& b) {
  check_arg(a.defined() && a.dim() == 3, "bmm", a, "a first operand [B, M, K]");
  check_arg(b.defined() && b.dim() == 3, "bmm", b, "a second operand [B, K, N]");
  if (a.size(0) != b.size(0))
    throw std::invalid_argument(
        fmt::format("bmm: batch sizes differ: {} and {}", a.describe(), b.describe()));
  return matmul_impl(a, b, "bmm");
}

// ---- linear: y [.., out] = (residual [.., out] +) x [.., in] · W [out, in]ᵀ + bias [out] ------
// Forward: one GEMM on x read as [R, in] (R = product of leading axes), the residual and the
// bias pre-filled and beta = 1. Backward: dx [R, in] += dy [R, out] · W;  dW [out, in] += dyᵀ ·
// x;  db [out] += column sums of dy;  dresidual += dy. With a residual (linear_add) the sum is
// one tensor: no separate output of the GEMM is kept alive by the tape until the backward.
// With rope_heads > 0 (linear_rope) the output [.., T, heads·hd] is rotated in place by RoPE per
// head (heads-last layout, positions along axis −2); the backward rotates dy back first.
// dx [R, in] += dy·W, dW [out, in] += dyᵀ·x, db [out] += Σ_rows dy; x_rows/ldx and w/w_layout
// as the forward's GEMM read x and W.
DG_EXERCISE void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, const Tensor& x_rows, int64_t ldx,
                                 const Tensor& w, const MatrixLayout& w_layout,
                                 const uint16_t* x_rows_bf16) {
  const int64_t out_features = weight.size(0), in = weight.size(1);
  const int64_t R = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  dispatch_float(dy.dtype(), "linear", [&]<class T>() {
    const T* pdy = dy.data<T>();
    if (dy.numel() == 0) {  // every gradient element is an empty sum: 0
      for (const Tensor& t : {x, weight, bias})
        if (t.requires_grad()) grad_of(t);
      return;
    }
    // In bf16 precision both GEMMs read dy: rounded once (tensor/gemm_kernels.h).
    const bool both = x.requires_grad() && weight.requires_grad() && in > 0;
    const Bf16Rounded dy16(pdy, both ? R : 0, out_features, out_features);
    if (x.requires_grad() && in > 0) {  // dx [R, in] += dy [R, out] · W [out, in]
      GradSink sink(x);
      gemm(false, w_layout.trans, R, in, out_features, T(1), pdy, out_features, w.data<T>(),
           w_layout.ld, sink.beta<T>(), sink.data<T>(), in, dy16.data());
      sink.finish();
    }
    if (weight.requires_grad() && in > 0) {  // dW [out, in] += dyᵀ [out, R] · x [R, in]
      GradSink sink(weight);
      gemm(true, false, out_features, in, R, T(1), pdy, out_features,
           x_rows.defined() ? x_rows.data<T>() : nullptr, ldx, sink.beta<T>(), sink.data<T>(), in,
           dy16.data(), x_rows_bf16);
      sink.finish();
    }
    if (bias.defined() && bias.requires_grad()) {  // db [out] += Σ_rows dy
      GradSink sink(bias);
      sink.zero_if_fresh();
      add_column_sums(pdy, R, out_features, out_features, sink.data<T>());
      sink.finish();
    }
  });
}

namespace {
// linear's (and linear_add's) backward as recorded ops, for create_graph: dx = g·W (a linear by
// Wᵀ), dW = gᵀ·x and db = Σ_rows g over the [R, ..] rows, dresidual = g.
DifferentiableBackwardFn linear_differentiable(const Tensor& x, const Tensor& weight,
                                               const Tensor& bias, const Tensor& residual,
                                               int64_t R) {
  return [x, weight, bias, residual, R](const Tensor& g, const Tensor&) {
    const int64_t out_features = weight.size(0), in = weight.size(1);
    if (x.requires_grad()) accumulate_grad(x, linear(g, transpose(weight, 0, 1)));
    const Tensor rows = reshape(g, {R, out_features});  // [R, out]
    if (weight.requires_grad())
      accumulate_grad(weight, matmul(transpose(rows, 0, 1), reshape(x, {R, in})));
    if (bias.defined() && bias.requires_grad()) accumulate_grad(bias, sum(rows, {0}));
    if (residual.defined() && residual.requires_grad()) accumulate_grad(residual, g);
  };
}

// The bf16 copies of linear inputs made on this thread, while a node keeps them: linears that read
// the same x (Q and K from one norm's output, SwiGLU's gate and up) share one copy. An entry is
// found by x's storage, first element, layout and version; it goes once its copy or x is gone.
struct InputCopy {
  std::weak_ptr<Storage> source;
  const float* data;
  int64_t rows, cols, ld;
  uint64_t version;
  std::weak_ptr<Storage> copy;
};
thread_local std::vector<InputCopy> t_input_copies;

// X [R, in] (row stride ld, float32) rounded to bf16 laid out as X is: the copy another linear
// already made of these values, or a new one.
std::shared_ptr<Storage> bf16_copy_of_input(const Tensor& X, int64_t R, int64_t in, int64_t ld) {
  const std::shared_ptr<Storage>& source = X.storage();
  const float* p = X.data<float>();
  std::shared_ptr<Storage> found;
  size_t kept = 0;
  for (InputCopy& e : t_input_copies) {
    std::shared_ptr<Storage> copy = e.copy.lock(), from = e.source.lock();
    if (!copy || !from) continue;
    if (!found && from == source && e.data == p && e.rows == R && e.cols == in && e.ld == ld &&
        e.version == source->version())
      found = copy;
    t_input_copies[kept++] = std::move(e);
  }
  t_input_copies.resize(kept);
  if (found) return found;
  auto copy = std::make_shared<Storage>(size_t((R - 1) * ld + in) * sizeof(uint16_t));
  round_rows_to_bf16(p, R, in, ld, static_cast<uint16_t*>(copy->data()));
  t_input_copies.push_back({source, p, R, in, ld, source->version(), copy});
  return copy;
}

// The bf16 copy of linear's input [R, in] (row stride ld) as the backward's dW GEMM reads it:
// nothing in bf16 precision (the GEMM reads the copy itself); in float32 precision (changed after
// the forward) the copy widened to float32, so dW is the product with the input as it was kept.
Tensor bf16_input_as_read(const Storage& x16, int64_t R, int64_t in, int64_t ld) {
  if (matmul_precision() == MatmulPrecision::bf16) return Tensor();
  Tensor wide = Tensor::empty({(R - 1) * ld + in}, DType::f32);
  const uint16_t* p = static_cast<const uint16_t*>(x16.data());
  float* w = wide.data<float>();
  for (int64_t i = 0; i < wide.numel(); ++i) w[i] = from_bf16(p[i]);
  return wide;
}

// Checks linear's arguments (weight [out, in], x [.., in], bias [out], residual [.., out], the
// RoPE heads) and returns the output's shape [.., out].
Shape check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Tensor& residual, const char* op, int64_t rope_heads, double rope_base) {
  check_arg(weight.defined() && weight.dim() == 2, op, weight, "a weight [out, in]");
  const int64_t out_features = weight.size(0), in = weight.size(1);
  check_arg(x.defined() && x.dim() >= 1 && x.size(-1) == in, op, x,
            fmt::format("an input [.., {}] matching weight {}", in, weight.describe()));
  check_same_dtype(x, weight, op);
  if (bias.defined()) {
    check_arg(bias.dim() == 1 && bias.size(0) == out_features, op, bias,
              fmt::format("a bias [{}] matching weight {}", out_features, weight.describe()));
    check_same_dtype(bias, weight, op);
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  if (residual.defined()) {
    check_arg(residual.shape() == out_shape, op, residual,
              fmt::format("a residual of the output's shape {}", shape_str(out_shape)));
    check_same_dtype(residual, weight, op);
  }
  if (rope_heads > 0) {
    const int64_t hd = out_features / rope_heads;
    check_arg(x.dim() >= 2 && out_features % rope_heads == 0 && hd % 2 == 0, op, weight,
              fmt::format("a weight whose {} output features split into {} heads of an even size, "
                          "for an input [.., T, in] (got input {})",
                          out_features, rope_heads, x.describe()));
    check_arg(rope_base > 0, op, weight, fmt::format("a positive RoPE base (got {})", rope_base));
  }
  return out_shape;
}

// linear_rope's rotation of y [R / T, T, heads·hd] (heads = 0: none): its tables and y's rows
// read as [B, heads, T, hd] (heads-last).
struct LinearRope {
  int64_t heads = 0, Tn = 0, hd = 0, Bn = 0;
  Tensor cos, sin;
  RowStrides heads_last{0, 0, 0};
};

LinearRope plan_linear_rope(const Tensor& x, int64_t out_features, int64_t R, int64_t rope_heads,
                            double rope_base) {
  LinearRope r;
  if (rope_heads <= 0) return r;
  r.heads = rope_heads;
  r.hd = out_features / rope_heads;
  r.Tn = x.size(-2);
  const RopeTables tables = rope_tables_for(r.Tn, r.hd, rope_base, 0, x.dtype());
  r.cos = tables.cos;
  r.sin = tables.sin;
  r.heads_last = {r.Tn * out_features, r.hd, out_features};
  r.Bn = R / std::max<int64_t>(r.Tn, 1);
  return r;
}

// y [R, out] (the residual already in it when there is one) = (y +) bias + X [R, in] · op(W)ᵀ,
// then rotated in place by RoPE. x16_data: X rounded to bf16, or null.
void linear_forward(Tensor& y, int64_t R, const Tensor& X, int64_t ldx, const Operand& W,
                    const Tensor& bias_c, bool has_residual, const LinearRope& rope,
                    const uint16_t* x16_data, const char* op) {
  const int64_t out_features = W.t.size(0), in = W.t.size(1);
  dispatch_float(y.dtype(), op, [&]<class T>() {
    T* py = y.data<T>();
    if (y.numel() == 0) return;
    if (bias_c.defined()) {
      const T* pb = bias_c.data<T>();
      const bool add = has_residual;
#pragma omp parallel for if (R * out_features > kParallelGrain) schedule(static)
      for (int64_t r = 0; r < R; ++r) {
        T* row = py + r * out_features;
        if (add) {
#pragma omp simd
          for (int64_t j = 0; j < out_features; ++j) row[j] += pb[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < out_features; ++j) row[j] = pb[j];
        }
      }
    }
    // y [R, out] = x [R, in] · op(W)ᵀ (+ y when the residual or the bias is in it)
    const bool accumulate = bias_c.defined() || has_residual;
    gemm(false, !W.layout.trans, R, out_features, in, T(1), X.data<T>(), ldx, W.t.data<T>(),
         W.layout.ld, accumulate ? T(1) : T(0), py, out_features, x16_data);
    if (rope.heads > 0)  // y rotated in place
      rope_rows<T>(py, rope.heads_last, py, rope.heads_last, rope.cos.data<T>(), rope.sin.data<T>(),
                   rope.Bn, rope.heads, rope.Tn, rope.hd, false, true);
  });
}

// What linear's kernel backward reads: X [R, in] (x, or its row-major copy) with row stride ldx,
// W as the forward's GEMM read it, and x's bf16 copy when the node keeps that instead of x.
struct LinearSaved {
  Tensor X;
  int64_t ldx, R, in;
  Operand W;
  std::shared_ptr<Storage> x16;
  Tensor rectified;  // linear_relu: its output (detached), which masks the gradient
};

// linear_relu's gradient of the GEMM's output: dy where the output y is positive, else 0 (torch's
// threshold_backward on the output, as relu's).
Tensor relu_gradient(const Tensor& dy, const Tensor& y) {
  Tensor dz = Tensor::empty(dy.shape(), dy.dtype());
  dispatch_float(dy.dtype(), "linear_relu", [&]<class T>() {
    pointwise_backward<T>(UnaryOp::relu, {}, dz.data<T>(), dy.data<T>(), nullptr, y.data<T>(),
                          dy.numel());
  });
  return dz;
}

// Records y's node: the kernel backward (RoPE rotated back, linear_backward, then dresidual),
// and, without the bf16 copy or RoPE, the recorded backward for create_graph.
void record_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Tensor& residual, Tensor& y, const LinearSaved& s,
                   const LinearRope& rope) {
  // With x16 the backward holds x only weakly (the node's input list keeps it while it runs).
  const std::shared_ptr<Storage>& x16 = s.x16;
  const Tensor x_kept = x16 ? Tensor() : x, X_kept = x16 ? Tensor() : s.X;
  RecordedNode node =
      record(op, {x, weight, bias, residual}, y,
             [x_kept, x_weak = WeakTensor(x), x16, weight, bias, residual, X_kept, ldx = s.ldx,
              W = s.W, R = s.R, in = s.in, rope, rectified = s.rectified](const Tensor& g) {
               const Tensor x = x16 ? x_weak.lock() : x_kept;
               Tensor dy = g.contiguous();  // [R, out]
               if (rectified.defined()) dy = relu_gradient(dy, rectified);
               if (rope.heads > 0) {  // the gradient of the GEMM's output: rotated back
                 Tensor dz = Tensor::empty(dy.shape(), dy.dtype());
                 dispatch_float(dy.dtype(), "linear_rope", [&]<class T>() {
                   rope_rows<T>(dz.data<T>(), rope.heads_last, dy.data<T>(), rope.heads_last,
                                rope.cos.data<T>(), rope.sin.data<T>(), rope.Bn, rope.heads,
                                rope.Tn, rope.hd, true, true);
                 });
                 dy = dz;
               }
               const Tensor x_rows = x16 ? bf16_input_as_read(*x16, R, in, ldx) : X_kept;
               linear_backward(
                   dy, x, weight, bias, x_rows, ldx, W.t, W.layout,
                   x16 && !x_rows.defined() ? static_cast<const uint16_t*>(x16->data()) : nullptr);
               // dresidual = g, last: g may become the residual's gradient (tape.h, rule 1), and
               // then x's gradient, when x is the residual, must not be written over dy before.
               dy = Tensor();
               if (residual.defined() && residual.requires_grad()) accumulate_grad(residual, g);
             });
  if (x16) {  // the GEMMs read W and x's bf16 copy; create_graph is refused (tape.h)
    node.saves({weight});
    node.releases_values_of(0);
    return;
  }
  // the GEMMs read x and W (and linear_relu its output); the bias and the residual are not read
  if (s.rectified.defined())
    node.saves({x, weight, y});
  else
    node.saves({x, weight});
  if (rope.heads > 0) return;
  DifferentiableBackwardFn linear_grad = linear_differentiable(x, weight, bias, residual, s.R);
  if (s.rectified.defined())
    node.differentiable([linear_grad, y = s.rectified](const Tensor& g, const Tensor& out) {
      linear_grad(where(gt(y, 0.0), g, 0.0), out);
    });
  else
    node.differentiable(linear_grad);
}

Tensor linear_impl(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Tensor& residual, const char* op, int64_t rope_heads = 0,
                   double rope_base = 0.0, bool rectify = false) {
  ScopedOpTimer op_timer(OpFamily::matmul);
  const Shape out_shape = check_linear(x, weight, bias, residual, op, rope_heads, rope_base);
  const int64_t out_features = weight.size(0), in = weight.size(1);
  const int64_t R = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const LinearRope rope = plan_linear_rope(x, out_features, R, rope_heads, rope_base);

  Tensor X = x;
  int64_t ldx = rows_ld(x);
  if (ldx < 0) {  // leading axes not one row-major block: copy
    X = Tensor::empty(x.shape(), x.dtype());
    copy_strided(X, x);
    ldx = std::max<int64_t>(in, 1);
  }
  const Operand W = blas_operand(weight);
  const Tensor bias_c = bias.defined() ? kernel_input(bias) : Tensor();
  // In bf16 precision, when W's gradient will read x: x rounded to bf16 once, into storage the
  // node keeps. The forward GEMM reads it as A and the backward's dW GEMM as B, and x's float32
  // values are released once nothing else holds them (PyTorch's autocast saves the bf16 cast of
  // x the same way). Half of x's memory, one rounding instead of two; the same bits.
  // Not when another op's backward reads x anyway (attention's output, which the output
  // projection reads): the copy would add memory.
  const bool keeps_x16 = x.dtype() == DType::f32 && matmul_precision() == MatmulPrecision::bf16 &&
                         R > 0 && in > 0 && weight.requires_grad() && should_record({weight}) &&
                         !x.storage()->read_by_backward();
  const std::shared_ptr<Storage> x16 = keeps_x16 ? bf16_copy_of_input(X, R, in, ldx) : nullptr;
  const uint16_t* x16_data = x16 ? static_cast<const uint16_t*>(x16->data()) : nullptr;

  Tensor y = Tensor::empty(out_shape, x.dtype());
  if (residual.defined()) copy_strided(y, residual);
  linear_forward(y, R, X, ldx, W, bias_c, residual.defined(), rope, x16_data, op);
  if (rectify)  // in place: the GEMM's output is not kept
    dispatch_float(y.dtype(), op, [&]<class T>() {
      pointwise_forward<T>(UnaryOp::relu, {}, y.data<T>(), y.data<T>(), y.numel());
    });
  if (tracing())
    trace_op(op, {x, weight, bias, residual}, {y},
             {{"rope_heads", rope_heads}, {"rope_base", rope_base}});
  if (should_record({x, weight, bias, residual}))
    record_linear(op, x, weight, bias, residual, y,
                  {X, ldx, R, in, W, x16, rectify ? detach(y) : Tensor()}, rope);
  return y;
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl(x, weight, bias, Tensor(), "linear");
}

// ---- plain_linear_rope, plain_linear_add: the fused forms from primitive ops (read these first)
// --- plain_linear_rope: y = linear(x, W, b) [.., T, heads·hd] reshaped to [B, T, heads, hd],
// permuted to [B, heads, T, hd], rope(), permuted back and merged to y's shape. The tape keeps the
// unrotated projection and the copies; linear_rope rotates the GEMM's output in place instead.
Tensor plain_linear_rope(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads,
                         double base) {
  if (heads < 1)
    throw std::invalid_argument(
        fmt::format("plain_linear_rope: heads must be >= 1, got {}", heads));
  const Tensor y = linear(x, weight, bias);  // [.., T, heads·hd]
  const int64_t out_features = y.size(-1), hd = out_features / heads;
  check_arg(y.dim() >= 2 && out_features % heads == 0 && hd % 2 == 0, "plain_linear_rope", weight,
            fmt::format("a weight whose {} output features split into {} heads of an even size, "
                        "for an input [.., T, in] (got input {})",
                        out_features, heads, x.describe()));
  const int64_t T = y.size(-2), B = T ? y.numel() / (T * out_features) : 0;
  const Tensor split = permute(reshape(y, {B, T, heads, hd}), {0, 2, 1, 3});  // [B, heads, T, hd]
  return reshape(permute(rope(split, base), {0, 2, 1, 3}), y.shape());
}

// plain_linear_add: residual + linear(x, W, b), two recorded ops. The tape keeps the projection
// [.., out]; linear_add pre-fills the GEMM's output with the residual instead.
Tensor plain_linear_add(const Tensor& residual, const Tensor& x, const Tensor& weight,
                        const Tensor& bias) {
  check_arg(residual.defined(), "plain_linear_add", residual, "a residual tensor");
  const Tensor y = linear(x, weight, bias);
  check_arg(residual.shape() == y.shape(), "plain_linear_add", residual,
            fmt::format("a residual of the output's shape {}", shape_str(y.shape())));
  return add(residual, y);
}

Tensor linear_rope(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads,
                   double base) {
  if (heads < 1)
    throw std::invalid_argument(fmt::format("linear_rope: heads must be >= 1, got {}", heads));
  return linear_impl(x, weight, bias, Tensor(), "linear_rope", heads, base);
}

Tensor linear_add(const Tensor& residual, const Tensor& x, const Tensor& weight,
                  const Tensor& bias) {
  check_arg(residual.defined(), "linear_add", residual, "a residual tensor");
  return linear_impl(x, weight, bias, residual, "linear_add");
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl(x, weight, bias, Tensor(), "linear_relu", 0, 0.0, true);
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the matmul family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> matmul_op_cases() {
  auto two = [](Shape sa, Shape sb) {
    return [=] {
      return std::vector<Tensor>{random_tensor(sa, 11).set_name("a"),
                                 random_tensor(sb, 12).set_name("b")};
    };
  };
  auto lin = [](Shape sx, int64_t out, bool with_bias) {
    return [=] {
      std::vector<Tensor> in{random_tensor(sx, 21).set_name("x"),
                             random_tensor({out, sx.back()}, 22).set_name("W")};
      if (with_bias) in.push_back(random_tensor({out}, 23).set_name("bias"));
      return in;
    };
  };
  using V = const std::vector<Tensor>&;
  return {
      {"matmul/2d", two({3, 4}, {4, 5}), [](V in) { return matmul(in[0], in[1]); }},
      {"matmul/batched", two({2, 3, 4}, {2, 4, 5}), [](V in) { return matmul(in[0], in[1]); }},
      {"matmul/broadcast-batch", two({2, 1, 3, 4}, {3, 4, 2}),
       [](V in) { return matmul(in[0], in[1]); }},
      {"matmul/2d@batched (a summed over batch)", two({3, 4}, {3, 4, 2}),
       [](V in) { return matmul(in[0], in[1]); }},
      {"matmul/batched@2d (one GEMM)", two({2, 3, 4}, {4, 5}),
       [](V in) { return matmul(in[0], in[1]); }},
      {"matmul/transposed-view operands", two({4, 3}, {5, 4}),
       [](V in) { return matmul(transpose(in[0], 0, 1), transpose(in[1], 0, 1)); }},
      {"matmul/batched transposed b (q·kᵀ)", two({2, 3, 4}, {2, 5, 4}),
       [](V in) { return matmul(in[0], transpose(in[1], -1, -2)); }},
      {"matmul/row-sliced a (ld > K)", two({3, 7}, {4, 2}),
       [](V in) { return matmul(slice(in[0], 1, 2, 6), in[1]); }},
      {"matmul/expanded a (copied)", two({1, 4}, {4, 3}),
       [](V in) {
         return matmul(expand(in[0], {3, 4}), in[1]);
       }},
      {"bmm", two({3, 2, 4}, {3, 4, 3}), [](V in) { return bmm(in[0], in[1]); }},
      {"linear/bias", lin({4, 3}, 5, true), [](V in) { return linear(in[0], in[1], in[2]); }},
      {"linear/no bias", lin({4, 3}, 5, false), [](V in) { return linear(in[0], in[1]); }},
      {"linear/1-D input", lin({3}, 4, true), [](V in) { return linear(in[0], in[1], in[2]); }},
      {"linear/3-D input", lin({2, 3, 4}, 5, true),
       [](V in) { return linear(in[0], in[1], in[2]); }},
      {"linear/transposed-view weight", two({3, 4}, {4, 5}),
       [](V in) { return linear(in[0], transpose(in[1], 0, 1)); }},
      {"linear_rope/bias, 2 heads of 6",
       [] {
         return std::vector<Tensor>{random_tensor({2, 5, 4}, 25).set_name("x"),
                                    random_tensor({12, 4}, 26).set_name("W"),
                                    random_tensor({12}, 27).set_name("bias")};
       },
       [](V in) { return linear_rope(in[0], in[1], in[2], 2, 100.0); }},
      {"linear_rope/2-D input, one head", lin({6, 3}, 4, false),
       [](V in) { return linear_rope(in[0], in[1], Tensor(), 1, 10000.0); }},
      {"linear_add/bias",
       [] {
         return std::vector<Tensor>{random_tensor({2, 3, 5}, 24).set_name("residual"),
                                    random_tensor({2, 3, 4}, 21).set_name("x"),
                                    random_tensor({5, 4}, 22).set_name("W"),
                                    random_tensor({5}, 23).set_name("bias")};
       },
       [](V in) { return linear_add(in[0], in[1], in[2], in[3]); }},
      {"linear_add/no bias, transposed residual, x is W", two({5, 5}, {5, 4}),
       [](V in) { return linear_add(transpose(in[0], 0, 1), in[1], in[1]); }},
      {"linear_relu/bias, 3-D input", lin({2, 3, 4}, 5, true),
       [](V in) { return linear_relu(in[0], in[1], in[2]); }},
  };
}

}  // namespace dg
