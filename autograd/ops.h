// Every differentiable op of depthgrad. Each op computes its forward with a kernel from tensor/
// and, when an input requires grad, records a backward on the tape (autograd/tape.h) that adds
// vector-Jacobian products into the inputs' gradients. Forward and backward of an op sit side by
// side in one autograd/ops_<family>.cpp file. Every op here has a row in the gradient-check table
// (tests/test_gradcheck_ops.cpp); adding an op means adding its row.
//
// Kernels take contiguous inputs: ops call contiguous() where a view is not (a copy only then).
// Binary elementwise ops broadcast with numpy's rules; a mismatch names both shapes and the op.
// Ops refuse mixed dtypes (float32 with float64) rather than promoting silently; the comparisons,
// logical and bitwise ops promote as torch's (their results are bool or integer, never a copy of
// a model's floats). Masks are bool (DType::b8); autograd/README.md tables each op's polarity.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "tensor/tensor.h"

namespace dg {

// ---- elementwise (ops_arithmetic.cpp, ops_unary.cpp; silu, gelu, gelu_tanh: ops_activation.cpp)
// a [..] -> [..] for the unary ops; binary ones broadcast.
Tensor add(const Tensor& a, const Tensor& b);  // broadcasting
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor scale(const Tensor& a, double factor);      // a * factor
Tensor add_scalar(const Tensor& a, double value);  // a + value
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
// The backwards of mul, div and exp, which those ops record (chapter 3 of the learner's path,
// autograd/learn-03-an-op.md, has them written again). Each adds its vector-Jacobian product into
// the gradient of every input that requires grad, with accumulate_grad: g has the output's shape
// (the broadcast of the inputs'), and accumulate_grad sums it back to each input's shape. out is
// the op's output. Written with recorded ops only, so under create_graph they are differentiated
// in turn (then out carries its graph).
void mul_backward(const Tensor& g, const Tensor& a, const Tensor& b);  // g·b, g·a
void div_backward(const Tensor& g, const Tensor& a, const Tensor& b,
                  const Tensor& out);                                    // g/b, −g·out/b
void exp_backward(const Tensor& g, const Tensor& a, const Tensor& out);  // g·out
// Elementary functions (ops_unary.cpp): a [..] -> [..], float32 or float64, as torch's.
// Their backwards are recorded ops (create_graph works): sin' = cos, cos' = −sin, log1p' =
// 1/(1 + a), expm1' = out + 1, square' = 2a, rsqrt' = −½·out³, erf' = 2/√π·e^(−a²).
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor log1p(const Tensor& a);   // log(1 + a), accurate near 0
Tensor expm1(const Tensor& a);   // e^a − 1, accurate near 0
Tensor square(const Tensor& a);  // a·a
Tensor rsqrt(const Tensor& a);   // 1/√a
Tensor erf(const Tensor& a);
// Piecewise constant, zero gradient everywhere (torch's zeros_like(g)): sign (0 at 0 and NaN),
// floor, ceil, round (half to even, as torch.round: round(0.5) = 0, round(1.5) = 2).
Tensor sign(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);
Tensor silu(const Tensor& a);  // a * sigmoid(a)
Tensor gelu(const Tensor& a);  // exact: 0.5 a (1 + erf(a / sqrt 2))
// tanh approximation (GPT-2's gelu_new, torch's gelu(approximate='tanh'), the same float steps):
// 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
Tensor gelu_tanh(const Tensor& a);

// ---- reductions (ops_reduce.cpp) -------------------------------------------------------------
// Sum / mean over `axes` (negative allowed; empty = all axes). As torch's: the sum of a bool or
// integer tensor is int64 (mask.sum() counts, exactly; not recorded); mean refuses them (torch:
// "mean(): could not infer output dtype"), write mean(to_dtype(x, DType::f32)).
Tensor sum(const Tensor& a, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& axes = {}, bool keepdim = false);
// torch.any / torch.all: whether any (all) element is nonzero (NaN counts), over every axis or
// along `dim`; bool out (torch 1.13 returns uint8 for a uint8 input, and so does this). Never
// recorded.
Tensor any(const Tensor& a);
Tensor all(const Tensor& a);
Tensor any(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& a, int64_t dim, bool keepdim = false);
// a [.., C, ..] -> [.., C, ..]: the running sum along axis (torch.cumsum; accumulated in double,
// as torch's CPU kernel). Backward: the running sum of g from the end, itself a recorded op.
Tensor cumsum(const Tensor& a, int64_t axis);

// ---- shape (ops_shape.cpp) -------------------------------------------------------------------
Tensor reshape(const Tensor& a, const Shape& shape);  // copies only when a is not contiguous
Tensor transpose(const Tensor& a, int64_t axis0, int64_t axis1);          // a view
Tensor permute(const Tensor& a, const Shape& order);                      // a view
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end);  // a view of [start, end)
Tensor contiguous(const Tensor& a);  // recorded copy when a is a non-contiguous view
Tensor clone(const Tensor& a);       // always a copy (contiguous); the gradient passes through
// torch's view: a's values under another shape (one size may be -1) without a copy, or an error
// when a's strides do not allow one (torch's rule: only axes contiguous with one another in
// memory are merged). reshape copies a non-contiguous a even where view would not: same values.
Tensor view(const Tensor& a, const Shape& shape);
// torch.narrow: `length` elements of `axis` from `start` (negative counts from the end); a view.
Tensor narrow(const Tensor& a, int64_t axis, int64_t start, int64_t length);
Tensor expand(const Tensor& a, const Shape& shape);  // a broadcast view; -1 keeps a size
// Views (storage shared; backward reshapes g back), as torch's: squeeze drops every size-1 axis
// (or `axis`, when its size is 1; otherwise a itself, viewed); unsqueeze inserts a size-1 axis
// at axis ∈ [−rank − 1, rank]; flatten merges axes start_dim..end_dim (a 0-d a gives [1]); it
// copies first when those axes cannot be merged in place, as torch.flatten.
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t axis);
Tensor unsqueeze(const Tensor& a, int64_t axis);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor stack(const std::vector<Tensor>& parts, int64_t axis);
// A copy of a in another dtype (torch's a.to(dtype)); a itself when the dtype is already dtype.
// Between floating dtypes it records (the gradient is converted back); to or from an integer
// dtype it records nothing (integers carry no gradient). Float to integer truncates toward zero.
Tensor to_dtype(const Tensor& a, DType dtype);

// ---- indexing, max/min, split/chunk, dropout, losses with a reduction ------------------------
// (ops_index, ops_reduce, ops_shape, ops_dropout, ops_loss, ops_loss_regression; torch semantics)
// cat: parts joined along `axis` (torch::cat; any axis, negative counts from the end); each part
// gets its slice of the gradient.
Tensor cat(const std::vector<Tensor>& parts, int64_t axis = 0);
// Views of consecutive pieces of `axis`, as torch.split / torch.chunk: pieces of split_size (the
// last one shorter), or of the given sizes (they must sum to the axis' size), or `chunks` pieces
// of ceil(n / chunks) (fewer when that already covers n). Each piece is a slice: gradients from
// several pieces add into the one input. Note split(a, {2}) picks the size overload, as in C++.
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t axis = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t axis = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t axis = 0);
// input [.., C, ..], index int64/int32 with input's rank (no longer than input on other axes) ->
// out (index's shape), out[.., j, ..] = input[.., index[.., j, ..], ..]. Backward scatter-adds.
// An index outside [0, C) (negative included) throws naming the op, the index and its position.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
// input [.., C, ..], index int64/int32 [J] -> [.., J, ..]. Backward scatter-adds; checks as gather.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);
// torch.masked_select(input, mask), torch's x[mask]: the elements of input where mask (bool, True =
// taken) is set, input and mask broadcast together, in row-major order -> [count]. Any dtype of
// input; a floating one gets a gradient: g scattered back to the taken positions (0 elsewhere),
// itself a recorded op (create_graph). A non-bool mask is refused (torch 1.13 refuses integers and
// warns on uint8; refused here too).
Tensor masked_select(const Tensor& input, const Tensor& mask);
// max/min along dim: values (the gradient goes to the index position) and int64 indices of the
// first extreme; NaN is the extreme when present. As torch.max(x, dim, keepdim).
struct ValuesAndIndices {
  Tensor values, indices;
};
ValuesAndIndices max(const Tensor& a, int64_t dim, bool keepdim = false);
ValuesAndIndices min(const Tensor& a, int64_t dim, bool keepdim = false);
// max/min of every element -> scalar; the gradient is split evenly among tied elements (torch).
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
// int64 indices of the first max/min along dim (no gradient); without dim, into the flattened
// tensor (a scalar), as torch.argmax.
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& a);
Tensor argmin(const Tensor& a);
// Inverted dropout: identity (x itself) when !training or p == 0; else x ⊙ keep / (1 − p) with
// keep ~ Bernoulli(1 − p) drawn from `generator` (one uniform_ draw per element, row-major, kept
// when u < 1 − p), zeros when p == 1. Same distribution as torch, not torch's mask stream.
class TorchGenerator;
Tensor dropout(const Tensor& x, double p, bool training, TorchGenerator& generator);
// Losses' reduction, as torch's reduction= 'mean' | 'sum' | 'none'.
// batchmean is kl_div's only (the sum divided by the batch size); the other losses refuse it.
enum class Reduction { mean, sum, none, batchmean };
// Pointwise losses over input and target of one shape (torch broadcasts them with a warning; these
// refuse a shape mismatch); both may require grad. mean of no elements is NaN, as torch.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// max(x, 0) − x·y + log(1 + exp(−|x|)), the stable form; with pos_weight [C] (x's last axis) or
// [1]: (1 − y)·x + (1 + (pos_weight − 1)·y)·softplus(−x). pos_weight is a constant here
// (one that requires grad is refused; torch would differentiate it).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::mean,
                                        const Tensor& pos_weight = Tensor());
// log_probs [N, C], targets int64/int32 [N] -> −log_probs[n, t_n], reduced over rows whose target
// is not ignore_index (mean divides by their count; 0/0 = NaN; none gives 0 at ignored rows).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets,
                Reduction reduction = Reduction::mean, int64_t ignore_index = -100);

// ---- sorting (ops_sort.cpp), padding and element moves (ops_pad.cpp), var/std (ops_reduce.cpp),
// one_hot (ops_embedding.cpp); torch 1.13's names, arguments and defaults --------------------
// sort along dim: values and int64 indices (x's shape), ascending unless descending; NaN counts
// as the largest value. Ties keep their order in x (torch's stable = true order; every sort here
// is stable, so `stable` changes nothing). The values' gradient goes to the picked elements.
ValuesAndIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                      bool stable = false);
// The indices of sort (int64, no gradient).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (smallest when !largest) along dim, sorted, with int64 indices; ties: the lower
// index first (torch leaves their order unspecified); sorted = false gives the same sorted order
// (torch's order is then unspecified). k outside [0, size] throws std::out_of_range.
ValuesAndIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                      bool sorted = true);
// torch.nn.functional.pad's modes.
enum class PadMode { constant, reflect, replicate, circular };
// torch.nn.functional.pad: pads = {left, right} of the last axis, then {top, bottom} of the one
// before, and so on (at most x.dim() pairs); a negative pad crops. constant fills with value
// (any rank, any dtype); reflect mirrors without repeating the edge (each pad < the axis' size)
// and replicate repeats the edge, over the last 1, 2 or 3 axes of a tensor with one or two
// more axes (torch 1.13's rule; float dtypes); circular wraps around over the last 1, 2 or 3 axes
// of a tensor with two more (batch and channel), negative pads cropping first (each positive pad
// <= the size left), as torch 1.13; value must stay 0 in these modes. Backward: g summed back to
// the elements each output read (create_graph works).
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, PadMode mode = PadMode::constant,
           double value = 0.0);
// x with the order of elements reversed along each of dims (a copy, as torch.flip).
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
// torch.roll: out[.., i, ..] = x[.., (i − shift) mod n, ..] along each dims[k] by shifts[k] (a dim
// listed twice rolls twice); without dims, one shift rolls the flattened tensor.
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts,
            const std::vector<int64_t>& dims = {});
// The lower (upper) triangle of the last two axes: element (i, j) kept where j − i <= diagonal
// (>= diagonal for triu), zeros elsewhere; x has at least 2 axes (batched below them).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// torch.var / torch.std over dims (empty: all), dividing by max(0, N − correction): correction 1
// (torch's default, unbiased = True) or 0 (unbiased = False; var(x, {1}, false) reads as torch's
// var(x, 1, unbiased=False)). Float dtypes. Supports create_graph.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1,
           bool keepdim = false);
// (var, mean) and (std, mean) over the same dims, as torch.var_mean / torch.std_mean.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<int64_t>& dims = {},
                                   int64_t correction = 1, bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const std::vector<int64_t>& dims = {},
                                   int64_t correction = 1, bool keepdim = false);
// ids (int64, or int32) [..] -> int64 [.., num_classes] with a 1 at each id (no gradient);
// num_classes −1: the largest id + 1. Negative ids, ids >= num_classes and an empty ids with
// num_classes −1 throw, as torch.nn.functional.one_hot.
Tensor one_hot(const Tensor& ids, int64_t num_classes = -1);

// ---- more losses (ops_loss_regression.cpp; torch 1.13's formulas, gradients and checks) -----
// input (log-probabilities) and target of one shape -> target·(log target − input) (log_target
// false; 0 where target = 0, torch's xlogy) or exp(target)·(target − input) (log_target true).
// Reduction::batchmean (torch's 'batchmean', the mathematically right KL) is the sum divided by
// input's first size; Reduction::mean divides by every element (torch warns that it is not KL).
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
              bool log_target = false);
// z = |input − target|: 0.5·z²/beta where z < beta, else z − 0.5·beta; beta >= 0 (0: l1_loss's
// values, torch's smooth_l1 gradient: −1 where input = target).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
// z = |input − target|: 0.5·z² where z < delta, else delta·(z − 0.5·delta); delta > 0.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                  double delta = 1.0);
// torch 1.13's F.cosine_similarity: x1 and x2 broadcast together, then along dim
//   sum((x1 / sqrt(max(Σ x1², eps²))) · (x2 / sqrt(max(Σ x2², eps²))))
// (each squared norm clamped on its own; the clamp passes the gradient through, as torch's
// no-grad clamp_min_ does). The output drops dim. Every step is a recorded op: create_graph works.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);

// ---- resizing (ops_resize.cpp): torch.nn.functional.interpolate, modes nearest and bilinear --
// The keyword arguments of F.interpolate (use designated initialisers:
// interpolate(x, {.scale_factor = {2}}), interpolate(x, {.size = {5, 7}, .mode = "bilinear"})).
// size and scale_factor: one value for every spatial axis or one per axis; exactly one of them.
struct InterpolateOptions {
  std::vector<int64_t> size = {};
  std::vector<double> scale_factor = {};
  std::string mode = "nearest";                     // "nearest" (3-D or 4-D) or "bilinear" (4-D)
  std::optional<bool> align_corners = {};           // bilinear only; unset means false, as torch
  std::optional<bool> recompute_scale_factor = {};  // true: the source scale from the sizes
};
// x [N, C, W] (nearest) or [N, C, H, W] -> [N, C, (Ho,) Wo], torch 1.13's index arithmetic
// (autograd/ops_resize.cpp says it step by step). Recorded as index_select, mul and add: the
// gradient is torch's, and create_graph works.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// ---- random sampling (ops_random.cpp; no gradient) -------------------------------------------
// torch.randperm(n, generator=g, dtype=dtype): a random permutation of 0..n−1 (int64 by default;
// int32, float32, float64 too). The same values as torch 1.13 for the same seed (its CPU swap
// loop, one 32-bit draw per position). generator nullptr: default_generator().
Tensor randperm(int64_t n, TorchGenerator* generator = nullptr, DType dtype = DType::i64);
// torch.multinomial(input, num_samples, replacement=False, generator=g): input [C] or [N, C] of
// non-negative weights (float32 or float64; rows need not sum to 1) -> int64 [num_samples] or
// [N, num_samples] category indices, by torch 1.13's CPU kernels: without replacement or for one
// sample, argmax / top-k of input / Exp(1) draws; with replacement and more than one sample, a
// binary search of the normalised cumulative sums per 53-bit uniform draw. The same values for
// the same seed as a torch built without MKL (the goldens' build); a torch with MKL (the pip
// wheels) draws its Exp(1) values from MKL's own stream, so there only the replacement kernel is
// the same bit for bit and the exponential one the same in distribution.
Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement = false,
                   TorchGenerator* generator = nullptr);

// ---- indexing (ops_indexing.cpp): torch's x[i], x[a:b:c], x[...] = v, recorded ----------------
// a [.., S, ..] -> [.., ..]: the view at `index` of `axis` (negative counts from the end), the
// axis dropped (torch's x.select(axis, index), x[index] for axis 0).
Tensor select(const Tensor& a, int64_t axis, int64_t index);
// The strided view of elements start, start + step, .. < end of `axis` (start and end as the
// four-argument slice: negative counts from the end, out of range throws; step >= 1). torch's
// x.slice(axis, start, end, step), x[start:end:step] (Python's slicing clamps; use index()).
Tensor slice(const Tensor& a, int64_t axis, int64_t start, int64_t end, int64_t step);
// libtorch's tensor indexing (x.index({Slice(1, None, 2), 3}) is index(x, {Slice(1, None, 2), 3})):
// each entry consumes one axis, in order. An integer selects (drops the axis; negative counts from
// the end; out of range throws), a Slice slices as Python does (None = the default, start and stop
// clamped to the axis, step >= 1), Ellipsis stands for as many full slices as the rest needs, and
// one int64/int32 tensor [J] picks entries as index_select (more than one tensor index, torch's
// advanced indexing, is refused). Axes not named keep their full extent.
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop, step;
};
inline constexpr std::nullopt_t None = std::nullopt;
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};
class TensorIndex {
 public:
  TensorIndex(int64_t i) : kind_(Kind::integer), integer_(i) {}  // NOLINT: implicit, as libtorch
  TensorIndex(int i) : TensorIndex(static_cast<int64_t>(i)) {}   // NOLINT
  TensorIndex(Slice s) : kind_(Kind::slice), slice_(s) {}        // NOLINT
  TensorIndex(EllipsisIndex) : kind_(Kind::ellipsis) {}          // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::tensor), tensor_(std::move(t)) {}  // NOLINT
  enum class Kind { integer, slice, ellipsis, tensor };
  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};
Tensor index(const Tensor& a, const std::vector<TensorIndex>& indices);
// torch's `y[indices] = values` as a new tensor (torch.index_put's out-of-place form): a's values
// with the indexed region set to values, broadcast to the region's shape (same dtype as a).
// Integers, Slices and Ellipsis only. Gradients: g with the region zeroed to a, the region of g
// to values (summed over the axes values was broadcast along). Supports create_graph.
Tensor index_put(const Tensor& a, const std::vector<TensorIndex>& indices, const Tensor& values);
Tensor index_put(const Tensor& a, const std::vector<TensorIndex>& indices, double value);
// The same written into a in place (torch's y[indices] = values, y.index_put_): a's version goes
// up by one, and when recording a's history becomes this write (its old value's node is the
// write's input, as torch's CopySlices). Refused, as torch refuses, for a leaf that requires grad
// (write under NoGradGuard, or into a copy), and, unlike torch, for a recorded view of another
// tensor or a tensor that other handles hold (graph nodes that read it would see the new history):
// use the out-of-place index_put there. Returns a.
Tensor& index_put_(Tensor& a, const std::vector<TensorIndex>& indices, const Tensor& values);
Tensor& index_put_(Tensor& a, const std::vector<TensorIndex>& indices, double value);

// ---- matmul (ops_matmul.cpp) -----------------------------------------------------------------
// a [.., M, K] @ b [.., K, N] -> [.., M, N]; batch axes broadcast; 2-D both -> plain GEMM.
// Transposed views are passed to BLAS as transposes, not copied.
Tensor matmul(const Tensor& a, const Tensor& b);
// a [B, M, K] @ b [B, K, N] -> [B, M, N]
Tensor bmm(const Tensor& a, const Tensor& b);
// x [.., in] · weight[out, in]ᵀ (+ bias[out]) -> [.., out]
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
struct QuantizedMatrix;  // tensor/quantized_matrix.h
// linear over a frozen weight stored in bf16 or int8 (tensor/quantized_matrix.h), dequantised
// inside the kernel (autograd/ops_quantized.cpp). x float32 or float64 [.., in]. The backward gives
// x's gradient and the bias's, never the weight's: the weight is not a tensor and never trains.
Tensor quantized_linear(const Tensor& x, const QuantizedMatrix& weight,
                        const Tensor& bias = Tensor());
// x [.., T, in] -> linear(x, weight, bias) [.., T, heads·hd] with RoPE (as rope(): rotate-half,
// positions 0..T−1) applied to each head of hd values, in place on the projection's output:
// the same values as splitting the heads off, rope() and merging them back, without keeping the
// unrotated projection for the backward.
// Fuses: linear + split heads + rope + merge heads. Plain twin: plain_linear_rope.
Tensor linear_rope(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads,
                   double base = 10000.0);
// linear_rope written with primitive ops (linear, reshape, permute, rope), each recorded.
Tensor plain_linear_rope(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t heads,
                         double base = 10000.0);
// residual [.., out] + linear(x, weight, bias) as one op (the residual pre-fills the GEMM's
// output), so the projection is not kept as a separate tensor; residual has the output's shape.
// Fuses: add(residual, linear(x, weight, bias)). Plain twin: plain_linear_add.
Tensor linear_add(const Tensor& residual, const Tensor& x, const Tensor& weight,
                  const Tensor& bias = Tensor());
// linear_add written as that composition, each op recorded: the reference.
Tensor plain_linear_add(const Tensor& residual, const Tensor& x, const Tensor& weight,
                        const Tensor& bias = Tensor());
// relu(linear(x, weight, bias)) as one op: the GEMM's output rectified in place, so only the
// rectified output is kept (its sign masks the backward's gradient). Fuses: linear, relu. Plain
// twin: relu(linear(x, weight, bias)).
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- embedding (ops_embedding.cpp), softmax (ops_softmax.cpp), losses (ops_loss.cpp), norms
// (ops_norm.cpp), rope (ops_attention.cpp), depth_mix (elementwise), swiglu (ops_activation.cpp) -
// weight [V, D], ids int64 or int32 [..] -> [.., D]; backward scatter-adds rows. Ids out of range
// throw naming the id, its position and the vocabulary size. padding_idx (in [−V, V), negative
// counts from V), as torch's: that row is read as any other, but gets no gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids,
                 std::optional<int64_t> padding_idx = std::nullopt);
Tensor softmax(const Tensor& a, int64_t axis = -1);
Tensor log_softmax(const Tensor& a, int64_t axis = -1);
// logits [N, C], targets int64 or int32 [N] -> per-row loss lse(x[n]) − x[n, t_n], 0 at rows whose
// target is ignore_index, reduced as torch: mean over the kept rows (divides by their count; 0/0
// -> NaN when every target is ignored), sum, or none ([N]). Fuses: log_softmax + pick the target
// + reduce. label_smoothing ε in [0, 1], torch's definition: each kept row's loss is
// (1 − ε)·(−log p[t]) + ε·mean over classes of −log p (ε = 0: the unsmoothed kernels, unchanged).
// Plain twin: plain_cross_entropy.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
// cross_entropy written with primitive ops, each recorded on the tape: the reference.
//   log p = x − m − log(sum(exp(x − m))) per row (m the row max, a constant),
//   loss[n] = −sum_c onehot[n, c]·log p[n, c] (onehot a constant: 1 at the kept rows' targets),
//   then the reduction (mean: sum / count of kept rows). With ε > 0 each kept row is
//   (1 − ε)·loss[n] + ε·(−sum_c log p[n, c])/C. Every target ignored: mean gives NaN and a zero
//   gradient, as the fused op.
Tensor plain_cross_entropy(const Tensor& logits, const Tensor& targets,
                           Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                           double label_smoothing = 0.0);
// x [N, D], weight [V, D], targets int64 or int32 [N] -> scalar:
// cross_entropy(linear(x, weight), targets, reduction, ignore_index) without holding the [N, V]
// logits or their gradient (the language-model head: column chunks of the logits are computed,
// used and dropped; the backward recomputes them). reduction mean or sum (none throws: its
// gradient differs per row; use cross_entropy on the logits).
// Fuses: linear + cross_entropy, chunked over V. Plain twin: plain_linear_cross_entropy.
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            Reduction reduction = Reduction::mean, int64_t ignore_index = -100);
// The plain composition linear_cross_entropy stands for: cross_entropy(linear(x, weight), ..)
// with the [N, V] logits held as a tensor. The reference tests/test_plain_ops.cpp compares with.
Tensor plain_linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                                  Reduction reduction = Reduction::mean,
                                  int64_t ignore_index = -100);
// x [.., D] * 1/sqrt(mean(x²) + eps) * weight[D]
// Fuses: mul, mean, add_scalar, sqrt, div, mul into one pass (saves rstd only). Plain twin below.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
// rms_norm written with those primitive ops, each recorded on the tape: the reference.
Tensor plain_rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
// (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance)
// Fuses: the mean, variance, normalisation and affine steps into one pass (saves mean, rstd).
// Plain twin: plain_layer_norm.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// layer_norm written with primitive ops (mean, sub, mul, add_scalar, sqrt, div, add), each
// recorded.
Tensor plain_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        double eps = 1e-5);
// torch.nn.functional.batch_norm on x [N, C, *] (ops_batchnorm.cpp): training normalises by the
// batch's mean and biased variance per channel and, when running_mean/running_var [C] are given,
// updates them in place (a version bump, not recorded): running ← (1 − momentum)·running +
// momentum·batch, the variance unbiased (N·S/(N·S − 1)), as torch. Eval normalises by the running
// statistics (required). weight, bias [C] optional. Supports create_graph.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...)) with the same arguments and the same bits, in one pass forward (the
// affine map and relu) and one backward (relu's mask recomputed from x: no output saved, no masked
// gradient made). nn::Sequential uses it for a BatchNorm followed by ReLU (nn/containers.h).
// Fuses: batch_norm + relu. Plain twin: plain_batch_norm_relu. Supports create_graph.
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                       bool training = false, double momentum = 0.1, double eps = 1e-5);
Tensor plain_batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                             bool training = false, double momentum = 0.1, double eps = 1e-5);
// torch.nn.functional.group_norm: x [N, C, *], statistics per sample over each group of
// C/num_groups consecutive channels (biased variance), then weight[c], bias[c] (optional).
// Supports create_graph.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Rotate-half RoPE on x [B, H, T, hd] (hd even): pairs (i, i + hd/2), θ_i = base^(-2i/hd),
// positions 0..T-1 plus `position_offset`. Angles and cos/sin in float32 as the reference does.
Tensor rope(const Tensor& x, double base = 10000.0, int64_t position_offset = 0);
// The cos and sin tables [T, hd/2] rope uses, computed once per (T, hd, base, offset, dtype) and
// kept per thread (the few most recent), so a training step does not recompute them.
struct RopeTables {
  Tensor cos, sin;
};
RopeTables rope_tables_for(int64_t T, int64_t hd, double base, int64_t position_offset,
                           DType dtype);
// Causal scaled-dot-product attention. q [B, H, T, hd]; k, v [B, Hkv, T, hd] with H % Hkv == 0
// (grouped-query attention: query head h reads kv head h / (H / Hkv)). scale defaults to
// 1/sqrt(hd). Fused: saves only the per-row softmax statistics, not the T×T probabilities. Fuses:
// matmul(q, kᵀ)·scale + causal mask + softmax + matmul with v (flash-style, no T×T kept).
// Plain twin: plain_causal_attention.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale = 0.0);
// The additive causal mask [T, T] of the plain attentions: 0 where key j <= query i (visible),
// −inf where j > i (the future), so softmax gives the hidden keys weight exactly 0. A constant:
// it records nothing. T >= 0; refuses a dtype that is not float32 or float64.
Tensor causal_mask(int64_t T, DType dtype);
// causal_attention written with those primitive ops (and expand/reshape for the kv groups), each
// recorded: the reference.
Tensor plain_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              double scale = 0.0);
// The attention of a transformer block in one op, from the projections to the merged heads:
// q [B, T, H·hd], k and v [B, T, Hkv·hd] (the Q/K/V linear outputs) -> [B, T, H·hd], equal to
// merge(causal_attention(rope(split(q)), rope(split(k)), split(v))) with split = reshape to
// [B, T, H, hd] and permute to [B, H, T, hd], merge its inverse, rope only when rope_base > 0.
// Heads are read and written in place in the [B, T, H·hd] layout: no split, merge or rope copies
// in either direction.
// Fuses: split heads + rope + causal_attention + merge heads. Plain twin: plain_attention.
Tensor attention_heads(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                       int64_t kv_heads, double rope_base = 0.0, double scale = 0.0);
// Self-attention written plainly, from the block's inputs to the merged heads, every step a
// primitive op on the tape (the version to read first; the fused equivalent is
// linear_rope/linear + attention_heads):
//   q = linear(u_qk, wq, bq), k = linear(u_qk, wk, bk), v = linear(u_v, wv, bv)   [B, T, n·hd]
//   split each into heads [B, n, T, hd]; rope(q), rope(k) when rope_base > 0
//   repeat each kv head for its H / Hkv query heads (grouped-query attention)
//   scores = q·kᵀ · scale [B, H, T, T] (scale 0: 1/sqrt(hd)); + mask (−inf above the diagonal)
//   p = softmax(scores); o = p·v [B, H, T, hd]; merge heads -> [B, T, H·hd]
// wq [H·hd, D], wk and wv [Hkv·hd, D]; biases may be undefined.
Tensor plain_attention(const Tensor& u_qk, const Tensor& u_v, const Tensor& wq, const Tensor& bq,
                       const Tensor& wk, const Tensor& bk, const Tensor& wv, const Tensor& bv,
                       int64_t heads, int64_t kv_heads, double rope_base = 0.0, double scale = 0.0);
// torch 2's F.scaled_dot_product_attention without dropout (ops_sdpa.cpp): q [..., L, E],
// k [..., S, E], v [..., S, Ev] -> [..., L, Ev] = softmax(q·kᵀ·scale + mask) v, batch axes
// broadcast, L and S free (cross-attention). scale defaults to 1/sqrt(E). mask broadcasts to
// [..., L, S]: a bool mask, True = the key takes part (torch's polarity here; the OPPOSITE of
// MultiheadAttention's); a floating one of q's dtype is added to the scores and gets a gradient;
// an integer mask is refused (torch 2 too). is_causal: key j hidden from query i when j > i
// (torch's top-left tril); not together with a mask (torch refuses both too). A query row whose
// every key is masked gives a zero row and zero gradients, as torch 2.5's math path (its
// _safe_softmax); torch 1.13 and 2.0 to 2.4 give NaN there. Fused: keeps one logsumexp per row, not
// the L×S probabilities. Fuses: matmul, scale, masked add, softmax, matmul. Plain twin:
// plain_scaled_dot_product_attention. Supports create_graph (the backward written with recorded
// ops).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);
// The same from recorded ops (matmul, scale, add, softmax, masked_fill for the empty rows).
Tensor plain_scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& mask = Tensor(), bool is_causal = false,
                                          std::optional<double> scale = std::nullopt);
// The probabilities softmax(q·kᵀ·scale + mask) [..., L, S] of that attention (0 on rows with no
// key), from recorded ops: what MultiheadAttention returns as its weights.
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask = Tensor(),
                         bool is_causal = false, std::optional<double> scale = std::nullopt);
// MultiheadAttention's self-attention on its packed in-projection: qkv [N, L, 3·E] holds q, k, v
// side by side (each H heads of hd = E / H), mask is undefined or additive [N, H or 1, L, L] (of
// qkv's dtype, differentiable) -> [N, L, E], the heads merged. Equals splitting qkv into heads,
// scaled_dot_product_attention (scale 1/sqrt(hd)) and merging them, with the same kernels, but
// reads and writes the heads in place. Fuses: the head split, attention, the head merge.
Tensor packed_self_attention(const Tensor& qkv, int64_t heads, const Tensor& mask = Tensor());
// The depth mix: sources S_j [.., D] (all the same shape), weights alpha [.., J] (per token)
// -> sum_j alpha[.., j] * S_j  [.., D].
// Fuses: J slices of alpha, J muls and J − 1 adds into one pass. Plain twin: plain_depth_mix.
Tensor depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha);
// depth_mix written with primitive ops (slice, mul, add), each recorded: the reference.
Tensor plain_depth_mix(const std::vector<Tensor>& sources, const Tensor& alpha);
// silu(gate)·up in one fused pass (the SwiGLU feed-forward's nonlinearity); gate, up same shape.
// Fuses: mul(silu(gate), up). Plain twin: plain_swiglu.
Tensor swiglu(const Tensor& gate, const Tensor& up);
// swiglu written as that composition, each op recorded: the reference.
Tensor plain_swiglu(const Tensor& gate, const Tensor& up);

// ---- convolution and pooling (ops_conv.cpp; torch.nn.functional's semantics, zero padding) ----
// (height, width) pairs: stride, padding, dilation, kernel and output sizes. As torch's int or
// tuple arguments: a single number means both axes (conv2d(x, w, b, 2) strides 2 on each), a
// brace pair {h, w} each axis its own. A module whose first two arguments are pairs cannot take a
// bare brace pair as its first (MaxPool2d({2, 3}) could be a kernel or a kernel and a stride, and
// the compiler says it is ambiguous): write MaxPool2d(2) or MaxPool2d(dg::IntPair{2, 3}).
struct IntPair : std::array<int64_t, 2> {
  constexpr IntPair(int64_t both = 0) : std::array<int64_t, 2>{both, both} {}  // NOLINT: implicit
  constexpr IntPair(int64_t h, int64_t w) : std::array<int64_t, 2>{h, w} {}
};
// x [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] or undefined -> [N, O, Ho, Wo],
// Ho = floor((H + 2p − d(kH − 1) − 1) / s) + 1. im2col + GEMM; every backward supports
// create_graph (the input gradient is a conv_transpose2d, the weight gradient a recorded op whose
// backward is a conv2d and a conv_transpose2d).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              IntPair stride = {1, 1}, IntPair padding = {0, 0}, IntPair dilation = {1, 1},
              int64_t groups = 1);
// x [N, C, L], weight [O, C/groups, k] -> [N, O, Lo]: conv2d with H = 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// x [N, Cin, H, W], weight [Cin, O/groups, kH, kW] -> [N, O, Hout, Wout],
// Hout = (H − 1)·s − 2p + d(kH − 1) + output_padding + 1 (the arguments in torch's order).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntPair stride = {1, 1}, IntPair padding = {0, 0},
                        IntPair output_padding = {0, 0}, int64_t groups = 1,
                        IntPair dilation = {1, 1});
// Max over windows of x [N, C, H, W] -> [N, C, Ho, Wo], as torch's F.max_pool2d; the first max in
// scan order wins, NaN wins. stride {0, 0} = kernel (torch's None).
Tensor max_pool2d(const Tensor& x, IntPair kernel, IntPair stride = {0, 0},
                  IntPair padding = {0, 0}, IntPair dilation = {1, 1}, bool ceil_mode = false);
// The values and int64 indices (flat h·W + w in the plane), as torch's F.max_pool2d(...,
// return_indices=True) and torch.nn.functional.max_pool2d_with_indices.
ValuesAndIndices max_pool2d_with_indices(const Tensor& x, IntPair kernel, IntPair stride = {0, 0},
                                         IntPair padding = {0, 0}, IntPair dilation = {1, 1},
                                         bool ceil_mode = false);
// Mean over windows (count_include_pad: the divisor counts the zero padding, as torch).
Tensor avg_pool2d(const Tensor& x, IntPair kernel, IntPair stride = {0, 0},
                  IntPair padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
// Output cell i averages input rows [floor(i·H/Ho), ceil((i + 1)·H/Ho)) (columns likewise).
Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size);

// ---- recurrent cells (ops_recurrent.cpp; torch's LSTM and GRU step equations) ----------------
// One step's gate math from the input and hidden projections gates_x = x·W_ihᵀ + b_ih and
// gates_h = h·W_hhᵀ + b_hh [N, G·H] (nn/recurrent.h runs the projections). The fused ops refuse
// create_graph (their backward is a kernel); the plain twins differentiate twice.
struct HiddenAndCell {
  Tensor h, c;  // [N, H] each
};
// LSTM (gates i, f, g, o of gates_x + gates_h), c [N, H] -> c' = σ(f)·c + σ(i)·tanh(g),
// h' = σ(o)·tanh(c'). Fuses: add, chunk, 3 sigmoid, 2 tanh, 3 mul, add (h', c' are views of one
// [2, N, H] output). Plain twin: plain_lstm_cell.
HiddenAndCell lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c);
// lstm_cell written with those primitive ops, each recorded: the reference.
HiddenAndCell plain_lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c);
// GRU (gates r, z, n), h [N, H] -> h' = (1 − z)·n + z·h with r = σ(x_r + h_r),
// z = σ(x_z + h_z), n = tanh(x_n + r·h_n) (torch's: r scales the hidden projection of n,
// bias b_hn included). Fuses: chunk, 2 add, 2 sigmoid, mul, add, tanh, and the blend.
// Plain twin: plain_gru_cell.
Tensor gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h);
// gru_cell written with primitive ops, each recorded: the reference.
Tensor plain_gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h);
// A whole layer's recurrence as one op (nn/recurrent.cpp's fast path): the T steps of h·W_hhᵀ
// and the fused gate math of each direction, forward and backward as kernels
// (tensor/kernels_recurrent.h), W_hh's gradient one GEMM after the recurrence. gates_x
// [T·N, G·H] time-major (LSTM: x·W_ihᵀ + b_ih + b_hh; GRU: x·W_ihᵀ + b_ih), weight_hh [G·H, H],
// bias_hh (GRU only, or undefined), h0 and c0 (LSTM only) [N, H]; reverse runs from the last step.
// Directions given together (a bidirectional layer's two) run one per thread when there are
// threads for both. Refuses create_graph, naming itself. Its reference is the per-step loop of
// lstm_cell / gru_cell (nn/recurrent.h, GateMath::per_step).
struct SequenceDirection {
  Tensor gates_x, weight_hh, bias_hh, h0, c0;
  bool reverse = false;
};
struct SequenceResult {
  Tensor output, h_n, c_n;  // [T, N, H], [N, H], [N, H] (LSTM only)
};
std::vector<SequenceResult> lstm_sequence(const std::vector<SequenceDirection>& directions);
std::vector<SequenceResult> gru_sequence(const std::vector<SequenceDirection>& directions);

// ---- activations (ops_activation.cpp); abs .. operators (ops_unary, ops_arithmetic, ops_compare)
// Activations. Derivatives at kinks as torch: relu'(0) = 0, leaky_relu'(0) = slope, abs'(0) = 0,
// clamp passes the gradient where min <= x <= max (bounds included).
Tensor relu(const Tensor& a);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
// log(1 + e^(βx)) / β, and x itself where βx > threshold (torch's formula and defaults).
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
Tensor abs(const Tensor& a);
// min(max(a, min), max); at least one bound; min > max gives max everywhere (as torch).
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max = std::nullopt);
Tensor pow(const Tensor& a, double exponent);  // d/da = exponent·a^(exponent−1); 0 if exponent = 0
// a^exponent, broadcasting; d/dexponent = a^exponent·ln a (0 where a = 0 and exponent >= 0).
Tensor pow(const Tensor& a, const Tensor& exponent);
// Broadcasting; NaN on either side gives NaN. On ties each input gets half the gradient (torch).
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
// Masks are bool tensors (DType::b8), as torch's; autograd/README.md has the polarity table of
// every op that takes one. An op that needs a bool mask refuses any other dtype (uint8 too, as
// torch 2 does; torch 1.13 took uint8 with a deprecation warning), naming the op, the argument
// and the fix: require_bool_mask throws that std::invalid_argument.
void require_bool_mask(const Tensor& mask, const char* op, const char* arg);
// cond ? a : b with cond (bool), a, b broadcast together; no gradient to cond. A scalar side
// takes the other side's dtype (torch.where(x > 0, x, 0.0)).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
// value where mask (bool, True = fill), else a; mask broadcasts to a's shape (the output keeps a's
// shape).
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);
// (triu / tril, which make the usual attention masks, are with pad in ops_pad.cpp.)
// Comparisons, broadcasting, never recorded (no gradient), returning bool as torch's. Mixed dtypes
// compare after torch's type promotion (int64 with int32 in int64, an integer with a float in the
// float's dtype; a 0-d tensor does not widen a tensor with axes of its own kind). The tensor-scalar
// forms compare as torch does with a Python number: a floating tensor with the scalar rounded to
// its dtype, an integer tensor exactly (a fractional scalar in float32). An accuracy is
// mean(to_dtype(eq(pred, y), DType::f32)), torch's (pred == y).float().mean().
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
// torch.logical_*: any dtypes (nonzero is true, NaN too), broadcasting, bool out; never recorded.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// torch.bitwise_* and the operators & | ^ ~: bool with bool gives the logical result (bool),
// integers the bitwise one (promoted as the comparisons: bool & int64 is int64); floating inputs
// are refused (torch too). Never recorded.
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& a);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
// C++ operators, each recorded as the named op it calls: + add / add_scalar, - sub / neg,
// * mul / scale, / div (t / s divides; s / t is s·pow(t, −1), torch's reciprocal-then-multiply).
// No compound assignment (+= on a tensor that autograd saved would be an in-place write) and no
// comparison operators (== on a handle reads as identity; use eq, lt, ... or Tensor::same).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(const Tensor& a, double s);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(const Tensor& a, double s);
Tensor operator/(double s, const Tensor& a);

}  // namespace dg
