// The ONNX exporter's mappings of the sequence-model ops (the table sequence_op_exporters(), read
// by export.cpp; see export_graph.h for what a mapping is). torch's semantics in, ONNX's out:
//   recurrent_layer (one RNN, GRU or LSTM layer, traced by nn/recurrent.cpp) -> ONNX's RNN, GRU or
//     LSTM node: gates reordered (torch's LSTM i, f, g, o -> ONNX's i, o, f, c; GRU r, z, n -> z,
//     r, h with linear_before_reset = 1), W [D, G·H, in], R [D, G·H, H], B [D, 2·G·H] as new
//     initializers (named "recurrent_W_0" ..., not the module's names), Y [T, D, N, H] back to
//     [T, N, D·H]; batch_first's transposes are the layer's own transpose ops
//   lstm_cell, gru_cell, rope -> their formulas (Split, Sigmoid, Tanh, Mul, Add; Slice, Concat)
//   scaled_dot_product_attention, attention_weights, causal_attention, attention_heads ->
//     MatMul, Mul by the scale, the mask (Add of a float one; a bool one as Where(mask, 0, −inf);
//     causal from Range and Greater on the runtime lengths, so another length runs), Softmax,
//     MatMul. A row whose every key is masked gives zeros, as depthgrad's ops (not NaN)
//   layer_norm -> LayerNormalization (opset >= 17), else ReduceMean, Sub, Mul, Add, Sqrt, Div;
//     rms_norm -> Mul (x·x), ReduceMean, Add, Sqrt, Div, Mul; group_norm -> the same statistics
//     over [N, G, C/G·spatial], then weight and bias per channel
// ReduceMean and ReduceMax take their axes as an input from opset 18, as an attribute before.
// Nothing to call here: export_model (export.h) runs these, e.g.
//   dg::LSTM lstm({.input_size = 8, .hidden_size = 16, .batch_first = true});
//   dg::onnx::export_model(lstm, [&](auto& in) { return std::vector{lstm(in[0]).output}; },
//                          {x}, "lstm.onnx", {.dynamic_axes = {{"input", {{0, "batch"}}}}});
// lstm_sequence and gru_sequence called by hand (a layer's own ones are covered by its
// recurrent_layer op) -> one LSTM or GRU node per direction over the projections (W a
// permutation). A layer over a PackedSequence is not one op: its steps export one by one (the
// cells, where, stack), the traced lengths fixed.
// float64 recurrent layers export as valid ONNX that ONNX Runtime 1.30 refuses ("LSTM operator
// does not support double yet"; its GRU and RNN likewise): float32 runs.
// rope and attention_heads' RoPE keep cos/sin tables of the traced length: a longer sequence fails
// in the runtime (a shape error), a shorter one is sliced.
#include <fmt/format.h>

#include <limits>
#include <numeric>

#include "autograd/ops.h"
#include "train/io/onnx/export_graph.h"

namespace dg::onnx {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kOne = 1;

std::string unsqueeze(ExportGraph& g, const std::string& v, std::vector<int64_t> axes) {
  return g.op("Unsqueeze", {v, g.constant_ints(axes)});
}
// ReduceMean / ReduceMax keeping the reduced axes: opset 18 takes them as an input, 13 to 17 as
// an attribute.
std::string reduce(ExportGraph& g, const char* op_type, const std::string& v,
                   std::vector<int64_t> axes) {
  if (g.opset() >= 18) return g.op(op_type, {v, g.constant_ints(axes)}, {attr("keepdims", kOne)});
  return g.op(op_type, {v}, {attr("axes", std::move(axes)), attr("keepdims", kOne)});
}
// Dim `axis` of v as an int64 scalar (what Range takes), from the runtime shape.
std::string dim_scalar(ExportGraph& g, const std::string& v, int64_t axis) {
  return g.op("Gather", {g.op("Shape", {v}), g.constant_ints({axis}, true)},
              {attr("axis", int64_t{0})});
}
std::vector<int64_t> swap_last_two(int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(rank - 1)], perm[size_t(rank - 2)]);
  return perm;
}

// ---- norms ------------------------------------------------------------------------------------
// (x − mean) / sqrt(var + eps) over the last axis (biased variance), as depthgrad's plain norms.
std::string normalize_last_axis(ExportGraph& g, const std::string& x, double eps, DType dtype) {
  const std::string centered = g.op("Sub", {x, reduce(g, "ReduceMean", x, {-1})});
  const std::string variance = reduce(g, "ReduceMean", g.op("Mul", {centered, centered}), {-1});
  const std::string root = g.op("Sqrt", {g.op("Add", {variance, g.constant_scalar(eps, dtype)})});
  return g.op("Div", {centered, root});
}

// inputs x [.., D], weight [D], bias [D] or undefined; eps.
void export_layer_norm(ExportGraph& g, const TracedOp& op) {
  const Tensor &x = op.inputs.at(0), &w = op.inputs.at(1), &b = op.inputs.at(2);
  const double eps = op.attribute("eps").real;
  const std::string xv = g.value(x), wv = g.value(w), bv = b.defined() ? g.value(b) : "";
  const std::string out = g.output(op.outputs[0]);
  if (g.opset() >= 17) {
    std::vector<std::string> in{xv, wv};
    if (b.defined()) in.push_back(bv);
    g.node("LayerNormalization", in, {out}, {attr("axis", int64_t{-1}), attr("epsilon", eps)});
  } else {
    const std::string normed = normalize_last_axis(g, xv, eps, x.dtype());
    if (b.defined())
      g.node("Add", {g.op("Mul", {normed, wv}), bv}, {out});
    else
      g.node("Mul", {normed, wv}, {out});
  }
  g.set_dims(op.outputs[0], g.dims(x));
}

// inputs x [.., D], weight [D]; eps. x / sqrt(mean(x²) + eps) · weight.
void export_rms_norm(ExportGraph& g, const TracedOp& op) {
  const Tensor &x = op.inputs.at(0), &w = op.inputs.at(1);
  const DType dtype = x.dtype();
  const std::string xv = g.value(x), wv = g.value(w);
  // x·x, as depthgrad computes it (ONNX Runtime 1.30's Pow(x, 2) on float64 is off by ~1e-5)
  const std::string square = g.op("Mul", {xv, xv});
  const std::string mean_square = reduce(g, "ReduceMean", square, {-1});
  const std::string root = g.op(
      "Sqrt", {g.op("Add", {mean_square, g.constant_scalar(op.attribute("eps").real, dtype)})});
  g.node("Mul", {g.op("Div", {xv, root}), wv}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(x));
}

// inputs x [N, C, *], weight [C] or undefined, bias [C] or undefined; num_groups, eps. The
// statistics of each (sample, group) over x seen as [N, G, C/G·spatial], then weight and bias
// per channel (seen as [C, 1, ..]).
void export_group_norm(ExportGraph& g, const TracedOp& op) {
  const Tensor &x = op.inputs.at(0), &w = op.inputs.at(1), &b = op.inputs.at(2);
  const int64_t G = op.attribute("num_groups").integer;
  const std::string xv = g.value(x);
  const std::string grouped = g.op("Reshape", {xv, g.constant_ints({0, G, -1})});
  const std::string normed = normalize_last_axis(g, grouped, op.attribute("eps").real, x.dtype());
  std::string y = g.op("Reshape", {normed, g.op("Shape", {xv})});
  std::vector<int64_t> per_channel{x.size(1)};  // [C, 1, ..]: broadcasts over the spatial axes
  per_channel.resize(size_t(x.dim() - 1), 1);
  const std::string out = g.output(op.outputs[0]);
  if (w.defined()) {
    const std::string wv = g.op("Reshape", {g.value(w), g.constant_ints(per_channel)});
    y = b.defined() ? g.op("Mul", {y, wv}) : g.node("Mul", {y, wv}, {out});
  }
  if (b.defined())
    g.node("Add", {y, g.op("Reshape", {g.value(b), g.constant_ints(per_channel)})}, {out});
  if (!w.defined() && !b.defined()) g.node("Identity", {y}, {out});
  g.set_dims(op.outputs[0], g.dims(x));
}

// ---- attention --------------------------------------------------------------------------------
// The additive causal mask [L, S] of q [.., L, E] and k [.., S, E] from their runtime lengths:
// −inf where key j > query i (torch's top-left tril), 0 elsewhere.
std::string causal_bias(ExportGraph& g, const std::string& q, const std::string& k, DType dtype) {
  const std::string zero = g.constant_ints({0}, true), one = g.constant_ints({1}, true);
  const std::string rows = g.op("Range", {zero, dim_scalar(g, q, -2), one});
  const std::string cols = g.op("Range", {zero, dim_scalar(g, k, -2), one});
  const std::string hidden = g.op("Greater", {cols, unsqueeze(g, rows, {1})});
  return g.op("Where", {hidden, g.constant_scalar(kNegInf, dtype), g.constant_scalar(0.0, dtype)});
}

struct AttentionMask {
  std::string value;  // "" = none
  bool boolean = false;
  bool causal = false;
};
AttentionMask mask_of(ExportGraph& g, const Tensor& mask, bool causal) {
  if (!mask.defined()) return {"", false, causal};
  return {g.value(mask), mask.dtype() == DType::b8, false};
}

// softmax(q·kᵀ·scale + mask) over the keys, written to `out`. q [.., L, E] and k [.., S, E]
// (k of rank k_rank). A bool mask keeps the keys where it is true (−inf elsewhere); a row whose
// every key is masked gets 0 in the mask before the softmax and a zero row after it.
void attention_probabilities(ExportGraph& g, const std::string& q, const std::string& k,
                             int64_t k_rank, DType dtype, const AttentionMask& mask, double scale,
                             const std::string& out) {
  const std::string kt = g.op("Transpose", {k}, {attr("perm", swap_last_two(k_rank))});
  std::string scores = g.op("Mul", {g.op("MatMul", {q, kt}), g.constant_scalar(scale, dtype)});
  const AttributeProto last_axis = attr("axis", int64_t{-1});
  if (mask.causal) scores = g.op("Add", {scores, causal_bias(g, q, k, dtype)});
  if (mask.value.empty()) {
    g.node("Softmax", {scores}, {out}, {last_axis});
    return;
  }
  const std::string zero = g.constant_scalar(0.0, dtype),
                    neg_inf = g.constant_scalar(kNegInf, dtype);
  std::string bias = mask.boolean ? g.op("Where", {mask.value, zero, neg_inf}) : mask.value;
  const std::string dead = g.op("Equal", {reduce(g, "ReduceMax", bias, {-1}), neg_inf});
  bias = g.op("Where", {dead, zero, bias});
  const std::string p = g.op("Softmax", {g.op("Add", {scores, bias})}, {last_axis});
  g.node("Where", {dead, zero, p}, {out});
}

// The dims of an attention's output [.., rows, cols]: rows from `rows_of` dim −2, cols from
// `cols_of` at `cols_axis`, the batch axes from the first input that has them (right-aligned).
void set_attention_dims(ExportGraph& g, const Tensor& out, const std::vector<Tensor>& inputs,
                        const Tensor& rows_of, const Tensor& cols_of, int64_t cols_axis) {
  std::vector<std::string> dims(size_t(out.dim()));
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    const std::vector<std::string> d = g.dims(t);
    for (int64_t i = 3; i <= std::min(out.dim(), t.dim()); ++i)
      if (dims[size_t(out.dim() - i)].empty()) dims[size_t(out.dim() - i)] = d[size_t(t.dim() - i)];
  }
  dims[size_t(out.dim() - 2)] = g.dims(rows_of)[size_t(rows_of.dim() - 2)];
  dims[size_t(out.dim() - 1)] = g.dims(cols_of)[size_t(cols_of.dim() + cols_axis)];
  g.set_dims(out, std::move(dims));
}

// inputs q [.., L, E], k [.., S, E], v [.., S, Ev], mask or undefined; is_causal, scale.
void export_sdpa(ExportGraph& g, const TracedOp& op) {
  const Tensor &q = op.inputs.at(0), &k = op.inputs.at(1), &v = op.inputs.at(2);
  const AttentionMask mask = mask_of(g, op.inputs.at(3), op.attribute("is_causal").integer != 0);
  const std::string p = g.fresh("probabilities");
  attention_probabilities(g, g.value(q), g.value(k), k.dim(), q.dtype(), mask,
                          op.attribute("scale").real, p);
  g.node("MatMul", {p, g.value(v)}, {g.output(op.outputs[0])});
  set_attention_dims(g, op.outputs[0], op.inputs, q, v, -1);
}

// inputs q [.., L, E], k [.., S, E], mask or undefined; is_causal, scale -> [.., L, S].
void export_attention_weights(ExportGraph& g, const TracedOp& op) {
  const Tensor &q = op.inputs.at(0), &k = op.inputs.at(1);
  const AttentionMask mask = mask_of(g, op.inputs.at(2), op.attribute("is_causal").integer != 0);
  attention_probabilities(g, g.value(q), g.value(k), k.dim(), q.dtype(), mask,
                          op.attribute("scale").real, g.output(op.outputs[0]));
  set_attention_dims(g, op.outputs[0], op.inputs, q, k, -2);
}

// kv heads x [B, Hkv, T, hd] repeated for the H / Hkv query heads each serves: [B, H, T, hd].
std::string repeat_kv_heads(ExportGraph& g, const std::string& x, int64_t heads, int64_t kv_heads,
                            int64_t hd) {
  if (heads == kv_heads) return x;
  const std::string grouped =
      g.op("Expand", {unsqueeze(g, x, {2}), g.constant_ints({1, 1, heads / kv_heads, 1, 1})});
  return g.op("Reshape", {grouped, g.constant_ints({0, heads, -1, hd})});
}

// inputs q [B, H, T, hd], k, v [B, Hkv, T, hd]; scale.
void export_causal_attention(ExportGraph& g, const TracedOp& op) {
  const Tensor &q = op.inputs.at(0), &k = op.inputs.at(1), &v = op.inputs.at(2);
  const int64_t H = q.size(1), Hkv = k.size(1), hd = q.size(3);
  const std::string kv = repeat_kv_heads(g, g.value(k), H, Hkv, hd);
  const std::string vv = repeat_kv_heads(g, g.value(v), H, Hkv, hd);
  const std::string p = g.fresh("probabilities");
  attention_probabilities(g, g.value(q), kv, 4, q.dtype(), {"", false, true},
                          op.attribute("scale").real, p);
  g.node("MatMul", {p, vv}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(q));
}

}  // namespace

// Rotate-half RoPE (see export_graph.h): pairs (i, i + hd/2) turned by (position + offset)·θ_i,
// the cos and sin tables [T, (1, ..,) hd/2] constants of the traced length (sliced to the
// runtime T when T is dynamic).
std::string rope_nodes(ExportGraph& g, const std::string& xv, int64_t T, int64_t hd, DType dtype,
                       bool dynamic_length, double base, int64_t offset, int64_t position_axis) {
  const RopeTables tables = rope_tables_for(T, hd, base, offset, dtype);  // kept per thread
  Shape table_shape(static_cast<size_t>(-position_axis), 1);              // [T, 1, .., hd/2]
  table_shape.front() = T;
  table_shape.back() = hd / 2;
  auto table = [&](const Tensor& t, const char* hint) {  // one initializer for q's and k's
    if (position_axis == -2) return g.bound(t) ? g.value(t) : g.constant(t, hint);
    return g.constant(t.reshape(table_shape), hint);
  };
  std::string cos = table(tables.cos, "rope_cos"), sin = table(tables.sin, "rope_sin");
  if (dynamic_length) {
    const std::string length = unsqueeze(g, dim_scalar(g, xv, position_axis), {0});
    cos = g.op("Slice", {cos, g.constant_ints({0}), length, g.constant_ints({0})});
    sin = g.op("Slice", {sin, g.constant_ints({0}), length, g.constant_ints({0})});
  }
  const std::string last = g.constant_ints({-1});
  const std::string x1 = g.op("Slice", {xv, g.constant_ints({0}), g.constant_ints({hd / 2}), last});
  const std::string x2 =
      g.op("Slice", {xv, g.constant_ints({hd / 2}), g.constant_ints({hd}), last});
  const std::string first =
      g.op("Sub", {g.op("Mul", {x1, cos}), g.op("Mul", {x2, sin})});  // x1·cos − x2·sin
  const std::string second =
      g.op("Add", {g.op("Mul", {x1, sin}), g.op("Mul", {x2, cos})});  // x1·sin + x2·cos
  return g.op("Concat", {first, second}, {attr("axis", int64_t{-1})});
}

namespace {

// input x [.., T, hd]; base, position_offset.
void export_rope(ExportGraph& g, const TracedOp& op) {
  const Tensor& x = op.inputs.at(0);
  const bool dynamic_length = !g.dims(x)[size_t(x.dim() - 2)].empty();
  const std::string y =
      rope_nodes(g, g.value(x), x.size(-2), x.size(-1), x.dtype(), dynamic_length,
                 op.attribute("base").real, op.attribute("position_offset").integer);
  g.node("Identity", {y}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(x));
}

// inputs q [B, T, H·hd], k, v [B, T, Hkv·hd]; heads, kv_heads, rope_base, scale -> [B, T, H·hd]:
// heads split (Reshape, Transpose), RoPE when rope_base > 0, causal attention, heads merged.
void export_attention_heads(ExportGraph& g, const TracedOp& op) {
  const Tensor &q = op.inputs.at(0), &k = op.inputs.at(1), &v = op.inputs.at(2);
  const int64_t H = op.attribute("heads").integer, Hkv = op.attribute("kv_heads").integer;
  const int64_t T = q.size(1), hd = q.size(2) / H;
  const double rope_base = op.attribute("rope_base").real;
  const AttributeProto swap_axes_1_2 = attr("perm", std::vector<int64_t>{0, 2, 1, 3});
  // [B, T, n·hd] -> [B, n, T, hd], rotated when `rotate` and rope_base > 0
  auto split = [&](const Tensor& x, int64_t n, bool rotate) {
    const std::string heads = g.op("Reshape", {g.value(x), g.constant_ints({0, 0, n, hd})});
    const std::string split_heads = g.op("Transpose", {heads}, {swap_axes_1_2});
    if (!rotate || rope_base <= 0) return split_heads;
    return rope_nodes(g, split_heads, T, hd, x.dtype(), !g.dims(x)[1].empty(), rope_base, 0);
  };
  const std::string qh = split(q, H, true);
  const std::string kh = repeat_kv_heads(g, split(k, Hkv, true), H, Hkv, hd);
  const std::string vh = repeat_kv_heads(g, split(v, Hkv, false), H, Hkv, hd);
  const std::string p = g.fresh("probabilities");
  attention_probabilities(g, qh, kh, 4, q.dtype(), {"", false, true}, op.attribute("scale").real,
                          p);
  const std::string o = g.op("Transpose", {g.op("MatMul", {p, vh})}, {swap_axes_1_2});
  g.node("Reshape", {o, g.constant_ints({0, 0, H * hd})}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(q));
}

// ---- recurrent cells ----------------------------------------------------------------------------
// Split of v [N, n·H] into its n gate blocks along axis 1.
std::vector<std::string> split_gates(ExportGraph& g, const std::string& v, int64_t n, int64_t H) {
  std::vector<std::string> parts;
  for (int64_t i = 0; i < n; ++i) parts.push_back(g.fresh("gate"));
  g.node("Split", {v, g.constant_ints(std::vector<int64_t>(size_t(n), H))}, parts,
         {attr("axis", kOne)});
  return parts;
}

// inputs gates_x, gates_h [N, 4H] (i, f, g, o), c [N, H] -> h', c'.
void export_lstm_cell(ExportGraph& g, const TracedOp& op) {
  const Tensor& c = op.inputs.at(2);
  const std::vector<std::string> q = split_gates(
      g, g.op("Add", {g.value(op.inputs.at(0)), g.value(op.inputs.at(1))}), 4, c.size(1));
  const std::string forget = g.op("Mul", {g.op("Sigmoid", {q[1]}), g.value(c)});
  const std::string write = g.op("Mul", {g.op("Sigmoid", {q[0]}), g.op("Tanh", {q[2]})});
  const std::string c_next = g.node("Add", {forget, write}, {g.output(op.outputs[1])});
  g.node("Mul", {g.op("Sigmoid", {q[3]}), g.op("Tanh", {c_next})}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(c));
  g.set_dims(op.outputs[1], g.dims(c));
}

// inputs gates_x, gates_h [N, 3H] (r, z, n), h [N, H] -> h' = (1 − z)·n + z·h.
void export_gru_cell(ExportGraph& g, const TracedOp& op) {
  const Tensor& h = op.inputs.at(2);
  const int64_t H = h.size(1);
  const std::vector<std::string> x = split_gates(g, g.value(op.inputs.at(0)), 3, H);
  const std::vector<std::string> y = split_gates(g, g.value(op.inputs.at(1)), 3, H);
  const std::string r = g.op("Sigmoid", {g.op("Add", {x[0], y[0]})});
  const std::string z = g.op("Sigmoid", {g.op("Add", {x[1], y[1]})});
  const std::string n = g.op("Tanh", {g.op("Add", {x[2], g.op("Mul", {r, y[2]})})});
  const std::string keep = g.op("Sub", {g.constant_scalar(1.0, h.dtype()), z});
  g.node("Add", {g.op("Mul", {keep, n}), g.op("Mul", {z, g.value(h)})}, {g.output(op.outputs[0])});
  g.set_dims(op.outputs[0], g.dims(h));
}

// ---- recurrent layers ---------------------------------------------------------------------------
// The rows of w [G·H, ..] (or [G·H]) with its G gate blocks in ONNX's order: block j of the result
// is block order[j] of w. Read through to_vector: no op may run (and be traced) while the exporter
// walks the trace.
void append_reordered(std::vector<double>& to, const Tensor& w, const std::vector<int>& order) {
  const std::vector<double> values = w.to_vector();
  const size_t block = values.size() / order.size();
  for (int from : order)
    to.insert(to.end(), values.begin() + from * block, values.begin() + (from + 1) * block);
}

struct LayerKind {
  const char* op_type;
  std::vector<int> order;  // ONNX's gate j is torch's gate order[j]
};
LayerKind layer_kind(const std::string& kind) {
  if (kind == "lstm") return {"LSTM", {0, 3, 1, 2}};  // i, f, g, o -> i, o, f, c
  if (kind == "gru") return {"GRU", {1, 0, 2}};       // r, z, n -> z, r, h
  if (kind == "rnn_tanh" || kind == "rnn_relu") return {"RNN", {0}};
  throw std::invalid_argument(
      fmt::format("onnx export: recurrent_layer of unknown kind '{}'", kind));
}

// W, R and B of every direction stacked, and the initial states (Unsqueeze/Concat of the given
// [N, H] ones; "" when not given): the node's inputs.
std::vector<std::string> recurrent_inputs(ExportGraph& g, const TracedOp& op, const LayerKind& kind,
                                          int64_t D) {
  const Tensor& w0 = op.inputs.at(1);
  const int64_t GH = w0.size(0), in = w0.size(1), H = op.inputs.at(2).size(1);
  const bool bias = op.inputs.at(3).defined();
  std::vector<double> W, R, B;
  std::vector<std::string> h0, c0;
  for (int64_t d = 0; d < D; ++d) {
    const Tensor* t = &op.inputs.at(size_t(1 + 6 * d));  // weight_ih, weight_hh, b_ih, b_hh, h0, c0
    append_reordered(W, t[0], kind.order);
    append_reordered(R, t[1], kind.order);
    if (bias) {  // B = [Wb, Rb]
      append_reordered(B, t[2], kind.order);
      append_reordered(B, t[3], kind.order);
    }
    if (t[4].defined()) h0.push_back(unsqueeze(g, g.value(t[4]), {0}));
    if (t[5].defined()) c0.push_back(unsqueeze(g, g.value(t[5]), {0}));
  }
  const DType dtype = w0.dtype();
  auto states = [&](const std::vector<std::string>& s) -> std::string {
    if (s.empty()) return "";
    return s.size() == 1 ? s[0] : g.op("Concat", s, {attr("axis", int64_t{0})});
  };
  std::vector<std::string> inputs{
      g.value(op.inputs[0]),
      g.constant(Tensor::from_vector(W, {D, GH, in}, dtype), "recurrent_W"),
      g.constant(Tensor::from_vector(R, {D, GH, H}, dtype), "recurrent_R"),
      bias ? g.constant(Tensor::from_vector(B, {D, 2 * GH}, dtype), "recurrent_B") : "",
      "",  // sequence_lens: every sequence is T long
      states(h0),
      states(c0)};
  while (inputs.back().empty()) inputs.pop_back();
  return inputs;
}

// inputs x [T, N, in], then per direction weight_ih, weight_hh, bias_ih, bias_hh, h0, c0; outputs
// y [T, N, D·H], then per direction h_n, c_n (LSTM); kind.
void export_recurrent_layer(ExportGraph& g, const TracedOp& op) {
  const std::string kind_name = op.attribute("kind").text;
  const LayerKind kind = layer_kind(kind_name);
  const int64_t D = int64_t(op.inputs.size() - 1) / 6, H = op.inputs.at(2).size(1);
  const bool lstm = kind_name == "lstm";
  std::vector<AttributeProto> attributes{attr("hidden_size", H)};
  if (D == 2) attributes.push_back(attr("direction", std::string("bidirectional")));
  if (kind_name == "gru") attributes.push_back(attr("linear_before_reset", kOne));
  if (kind_name == "rnn_relu") {
    AttributeProto activations;
    activations.name = "activations";
    activations.type = AttributeProto::strings;
    activations.strings_value.assign(size_t(D), "Relu");
    attributes.push_back(activations);
  }
  const std::string Y = g.fresh("Y"), Y_h = g.fresh("Y_h"), Y_c = lstm ? g.fresh("Y_c") : "";
  std::vector<std::string> outputs{Y, Y_h};
  if (lstm) outputs.push_back(Y_c);
  g.node(kind.op_type, recurrent_inputs(g, op, kind, D), outputs, attributes);
  // Y [T, D, N, H] -> [T, N, D·H]; Y_h, Y_c [D, N, H] -> direction d's [N, H]
  const std::string y = g.output(op.outputs[0]);
  if (D == 1) {
    g.node("Squeeze", {Y, g.constant_ints({1})}, {y});
  } else {
    const std::string t = g.op("Transpose", {Y}, {attr("perm", std::vector<int64_t>{0, 2, 1, 3})});
    g.node("Reshape", {t, g.constant_ints({0, 0, -1})}, {y});
  }
  const std::vector<std::string> x_dims = g.dims(op.inputs[0]);
  g.set_dims(op.outputs[0], {x_dims[0], x_dims[1], ""});
  for (int64_t d = 0; d < D; ++d)
    for (int s = 0; s < 2; ++s) {
      const Tensor& state = op.outputs.at(size_t(1 + 2 * d + s));
      if (!state.defined()) continue;
      g.node("Gather", {s == 0 ? Y_h : Y_c, g.constant_ints({d}, true)}, {g.output(state)},
             {attr("axis", int64_t{0})});
      g.set_dims(state, {x_dims[1], ""});
    }
}

// The name of the time axis of a sequence op's gates_x [T·N, ..] whose rows are named `rows` and
// whose batch `batch`: T's own ("T" of "T*N"), "rows/batch" otherwise, "" when rows are fixed.
std::string time_dim(const std::string& rows, const std::string& batch) {
  if (rows.empty() || batch.empty()) return rows;
  const std::string suffix = "*" + batch;
  if (rows.size() > suffix.size() && rows.ends_with(suffix))
    return rows.substr(0, rows.size() - suffix.size());
  return rows + "/" + batch;
}

// lstm_sequence / gru_sequence called by hand: per direction gates_x [T·N, G·H] (the input
// projections, biases folded in), weight_hh, bias_hh (GRU) or undefined, h0, c0 (LSTM); outputs
// per direction output [T, N, H], h_n, c_n; "reverse" per direction. One ONNX LSTM or GRU node per
// direction whose X is gates_x seen as [T, N, G·H] and whose W is the permutation taking torch's
// gates to ONNX's order (X·Wᵀ reorders the columns), R = weight_hh reordered, B = [0, b_hh].
void export_sequence_op(ExportGraph& g, const TracedOp& op, const LayerKind& kind) {
  const std::vector<int64_t> reverse = op.attribute("reverse").integers;
  const bool lstm = kind.order.size() == 4;
  for (size_t d = 0; d < reverse.size(); ++d) {
    const Tensor* t = &op.inputs.at(5 * d);  // gates_x, weight_hh, bias_hh, h0, c0
    const int64_t GH = t[1].size(0), H = t[1].size(1);
    std::vector<double> W(size_t(GH * GH), 0.0), R, B;
    for (size_t j = 0; j < kind.order.size(); ++j)
      for (int64_t r = 0; r < H; ++r)
        W[size_t((int64_t(j) * H + r) * GH + kind.order[j] * H + r)] = 1.0;
    append_reordered(R, t[1], kind.order);
    if (t[2].defined()) {
      B.assign(size_t(GH), 0.0);
      append_reordered(B, t[2], kind.order);
    }
    const DType dtype = t[1].dtype();
    const std::string h0 = g.value(t[3]);
    const std::string shape = g.op(
        "Concat",
        {g.constant_ints({-1}),
         g.op("Gather", {g.op("Shape", {h0}), g.constant_ints({0})}, {attr("axis", int64_t{0})}),
         g.constant_ints({GH})},
        {attr("axis", int64_t{0})});
    std::vector<std::string> inputs{
        g.op("Reshape", {g.value(t[0]), shape}),
        g.constant(Tensor::from_vector(W, {1, GH, GH}, dtype), "sequence_W"),
        g.constant(Tensor::from_vector(R, {1, GH, H}, dtype), "sequence_R"),
        B.empty() ? "" : g.constant(Tensor::from_vector(B, {1, 2 * GH}, dtype), "sequence_B"),
        "",
        unsqueeze(g, h0, {0})};
    if (lstm) inputs.push_back(unsqueeze(g, g.value(t[4]), {0}));
    std::vector<AttributeProto> attributes{attr("hidden_size", H)};
    if (reverse[d]) attributes.push_back(attr("direction", std::string("reverse")));
    if (!lstm) attributes.push_back(attr("linear_before_reset", kOne));
    std::vector<std::string> outputs{g.fresh("Y"), g.fresh("Y_h")};
    if (lstm) outputs.push_back(g.fresh("Y_c"));
    g.node(kind.op_type, inputs, outputs, attributes);
    const std::string batch = g.dims(t[3])[0];
    for (size_t k = 0; k < outputs.size(); ++k) {  // Y [T, 1, N, H]; Y_h, Y_c [1, N, H]
      const Tensor& out = op.outputs.at(3 * d + k);
      g.node("Squeeze", {outputs[k], g.constant_ints({k == 0 ? 1 : 0})}, {g.output(out)});
      if (k == 0)
        g.set_dims(out, {time_dim(g.dims(t[0])[0], batch), batch, ""});
      else
        g.set_dims(out, {batch, ""});
    }
  }
}
void export_lstm_sequence(ExportGraph& g, const TracedOp& op) {
  export_sequence_op(g, op, layer_kind("lstm"));
}
void export_gru_sequence(ExportGraph& g, const TracedOp& op) {
  export_sequence_op(g, op, layer_kind("gru"));
}

}  // namespace

std::vector<OpExporterEntry> sequence_op_exporters() {
  return {
      {"layer_norm", export_layer_norm},
      {"rms_norm", export_rms_norm},
      {"group_norm", export_group_norm},
      {"scaled_dot_product_attention", export_sdpa},
      {"attention_weights", export_attention_weights},
      {"causal_attention", export_causal_attention},
      {"attention_heads", export_attention_heads},
      {"rope", export_rope},
      {"lstm_cell", export_lstm_cell},
      {"gru_cell", export_gru_cell},
      {"recurrent_layer", export_recurrent_layer},
      {"lstm_sequence", export_lstm_sequence},
      {"gru_sequence", export_gru_sequence},
  };
}

}  // namespace dg::onnx
