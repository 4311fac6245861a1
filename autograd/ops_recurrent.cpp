// The gate math of one recurrent step, as fused ops beside their plain twins: lstm_cell (torch's
// LSTM gates i, f, g, o) and gru_cell (r, z, n, with r applied to the hidden projection of n, as
// torch), from the step's input and hidden projections and the previous state. The projections
// themselves are linear ops (nn/recurrent.cpp makes all time steps' input projections one GEMM).
// Kernels in tensor/kernels_recurrent.h. Then lstm_sequence and gru_sequence: a layer's whole
// recurrence (each direction's T steps) as one op, whose reference is the per-step loop of the
// cell ops. The fused ops refuse create_graph, naming themselves (their backward is a kernel);
// the plain twins, composed of recorded ops, differentiate twice.
// Refuses: inputs that are not [N, G·H] / [N, H] of one float dtype. Checks: the rows at the
// end, the twins in tests/test_plain_ops.cpp, kernels, torch goldens and errors in
// tests/test_recurrent.cpp.
#include <fmt/format.h>

#include "autograd/op_trace.h"
#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_matmul.h"
#include "tensor/kernels_recurrent.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// gates_x and gates_h [N, G·H] and the state [N, H] of one float dtype; returns H.
int64_t check_cell_args(const Tensor& gates_x, const Tensor& gates_h, const Tensor& state,
                        int64_t gates, const char* op, const char* state_name) {
  check_float(gates_x, op);
  check_float(gates_h, op);
  check_float(state, op);
  check_arg(state.dim() == 2, op, state, fmt::format("{} [N, H]", state_name));
  const int64_t N = state.size(0), H = state.size(1);
  const std::string gate_shape =
      fmt::format("[{}, {}] ({} gates of H = {})", N, gates * H, gates, H);
  check_arg(gates_x.shape() == Shape{N, gates * H}, op, gates_x, "gates_x " + gate_shape);
  check_arg(gates_h.shape() == Shape{N, gates * H}, op, gates_h, "gates_h " + gate_shape);
  check_same_dtype(gates_x, gates_h, op);
  check_same_dtype(gates_x, state, op);
  return H;
}
}  // namespace

// gates = gates_x + gates_h [N, 4H] -> h' = σ(o)·tanh(c'), c' = σ(f)·c + σ(i)·tanh(g).
// Forward writes h' and c' into one [2, N, H] buffer (one recorded node; h and c are its views)
// and keeps the activated gates and tanh(c') [N, 5H]. Backward (kernel): dgates [N, 4H] goes to
// gates_x and gates_h alike, dc to c. Reads c (and its own saved gates), not the projections.
HiddenAndCell lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "lstm_cell";
  const int64_t H = check_cell_args(gates_x, gates_h, c, 4, op, "c"), N = c.size(0);
  const Tensor GX = kernel_input(gates_x), GH = kernel_input(gates_h), C = kernel_input(c);
  Tensor hc = Tensor::empty({2, N, H}, c.dtype());
  const Tensor act = Tensor::empty({N, 5 * H}, c.dtype());
  dispatch_float(c.dtype(), op, [&]<class T>() {
    lstm_cell_forward<T>(hc.data<T>(), act.data<T>(), GX.data<T>(), GH.data<T>(), C.data<T>(), N,
                         H);
  });
  if (should_record({gates_x, gates_h, c}))
    record(op, {gates_x, gates_h, c}, hc, [gates_x, gates_h, c, C, act, N, H, op](const Tensor& g) {
      const Tensor G = g.contiguous();
      Tensor dgates = Tensor::empty({N, 4 * H}, G.dtype());
      Tensor dc = Tensor::empty({N, H}, G.dtype());
      dispatch_float(G.dtype(), op, [&]<class T>() {
        lstm_cell_backward<T>(dgates.data<T>(), dc.data<T>(), G.data<T>(), act.data<T>(),
                              C.data<T>(), N, H);
      });
      if (gates_x.requires_grad()) accumulate_grad(gates_x, dgates);
      if (gates_h.requires_grad()) accumulate_grad(gates_h, dgates);
      if (c.requires_grad()) accumulate_grad(c, dc);
    }).saves({c});
  const HiddenAndCell next{reshape(slice(hc, 0, 0, 1), {N, H}),
                           reshape(slice(hc, 0, 1, 2), {N, H})};
  if (tracing()) trace_op(op, {gates_x, gates_h, c}, {next.h, next.c});
  return next;
}

// lstm_cell written with primitive ops, each recorded: the reference.
HiddenAndCell plain_lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c) {
  check_cell_args(gates_x, gates_h, c, 4, "plain_lstm_cell", "c");
  const std::vector<Tensor> q = chunk(add(gates_x, gates_h), 4, 1);  // i, f, g, o
  const Tensor c_next = add(mul(sigmoid(q[1]), c), mul(sigmoid(q[0]), tanh(q[2])));
  const HiddenAndCell next{mul(sigmoid(q[3]), tanh(c_next)), c_next};
  if (tracing()) trace_op("lstm_cell", {gates_x, gates_h, c}, {next.h, next.c});  // one op
  return next;
}

// gates_x, gates_h [N, 3H] (r, z, n), h [N, H] -> h' = (1 − z)·n + z·h [N, H] with
// r = σ(x_r + h_r), z = σ(x_z + h_z), n = tanh(x_n + r·h_n). Keeps r, z, n [N, 3H]. Backward
// (kernel): dgates_x, dgates_h [N, 3H] (they differ in the n block: dgates_h_n = dgates_x_n·r)
// and dh. Reads gates_h and h.
Tensor gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "gru_cell";
  const int64_t H = check_cell_args(gates_x, gates_h, h, 3, op, "h"), N = h.size(0);
  const Tensor GX = kernel_input(gates_x), GH = kernel_input(gates_h), Hp = kernel_input(h);
  Tensor out = Tensor::empty({N, H}, h.dtype());
  const Tensor act = Tensor::empty({N, 3 * H}, h.dtype());
  dispatch_float(h.dtype(), op, [&]<class T>() {
    gru_cell_forward<T>(out.data<T>(), act.data<T>(), GX.data<T>(), GH.data<T>(), Hp.data<T>(), N,
                        H);
  });
  if (should_record({gates_x, gates_h, h}))
    record(op, {gates_x, gates_h, h}, out,
           [gates_x, gates_h, h, GH, Hp, act, N, H, op](const Tensor& g) {
             const Tensor G = g.contiguous();
             Tensor dgx = Tensor::empty({N, 3 * H}, G.dtype());
             Tensor dgh = Tensor::empty({N, 3 * H}, G.dtype());
             Tensor dh = Tensor::empty({N, H}, G.dtype());
             dispatch_float(G.dtype(), op, [&]<class T>() {
               gru_cell_backward<T>(dgx.data<T>(), dgh.data<T>(), dh.data<T>(), G.data<T>(),
                                    act.data<T>(), GH.data<T>(), Hp.data<T>(), N, H);
             });
             if (gates_x.requires_grad()) accumulate_grad(gates_x, dgx);
             if (gates_h.requires_grad()) accumulate_grad(gates_h, dgh);
             if (h.requires_grad()) accumulate_grad(h, dh);
           })
        .saves({gates_h, h});
  if (tracing()) trace_op(op, {gates_x, gates_h, h}, {out});
  return out;
}

// gru_cell written with primitive ops, each recorded: the reference.
Tensor plain_gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h) {
  check_cell_args(gates_x, gates_h, h, 3, "plain_gru_cell", "h");
  const std::vector<Tensor> x = chunk(gates_x, 3, 1), y = chunk(gates_h, 3, 1);  // r, z, n
  const Tensor r = sigmoid(add(x[0], y[0])), z = sigmoid(add(x[1], y[1]));
  const Tensor n = tanh(add(x[2], mul(r, y[2])));
  const Tensor out = add(mul(1.0 - z, n), mul(z, h));
  if (tracing()) trace_op("gru_cell", {gates_x, gates_h, h}, {out});  // one op
  return out;
}

// ---- whole sequences ---------------------------------------------------------------------------
namespace {
// Checks every direction against the first: gates_x [T·N, G·H], weight_hh [G·H, H], h0 (and c0)
// [N, H], bias_hh [G·H] or undefined, one float dtype. Returns {T, N, H}.
struct SequenceSizes {
  int64_t T, N, H;
};
SequenceSizes check_sequence_args(const std::vector<SequenceDirection>& dirs, int64_t gates,
                                  const char* op) {
  if (dirs.empty()) throw std::invalid_argument(fmt::format("{}: no directions given", op));
  check_float(dirs[0].h0, op);
  check_arg(dirs[0].h0.dim() == 2, op, dirs[0].h0, "h0 [N, H]");
  const int64_t N = dirs[0].h0.size(0), H = dirs[0].h0.size(1);
  check_float(dirs[0].gates_x, op);
  check_arg(dirs[0].gates_x.dim() == 2 && dirs[0].gates_x.size(1) == gates * H && N > 0 &&
                dirs[0].gates_x.size(0) % N == 0 && dirs[0].gates_x.size(0) > 0,
            op, dirs[0].gates_x, fmt::format("gates_x [T·{}, {}]", N, gates * H));
  const int64_t T = dirs[0].gates_x.size(0) / N;
  const DType dtype = dirs[0].h0.dtype();
  auto check = [&](const Tensor& t, const Shape& shape, const char* what) {
    check_arg(t.defined() && t.shape() == shape && t.dtype() == dtype, op, t,
              fmt::format("{} {} of {}", what, shape_str(shape), dtype_name(dtype)));
  };
  for (const SequenceDirection& d : dirs) {
    check(d.gates_x, {T * N, gates * H}, "gates_x");
    check(d.weight_hh, {gates * H, H}, "weight_hh");
    check(d.h0, {N, H}, "h0");
    if (gates == 4) check(d.c0, {N, H}, "c0");
    if (d.bias_hh.defined()) check(d.bias_hh, {gates * H}, "bias_hh");
  }
  return {T, N, H};
}

// The op trace of lstm_sequence / gru_sequence: per direction gates_x, weight_hh, bias_hh, h0, c0
// (undefined where not given) in, output, h_n, c_n out; "reverse" 0/1 per direction.
void trace_sequence(const char* op, const std::vector<SequenceDirection>& dirs,
                    const std::vector<SequenceResult>& out) {
  std::vector<Tensor> inputs, outputs;
  std::vector<int64_t> reverse;
  for (size_t d = 0; d < dirs.size(); ++d) {
    inputs.insert(inputs.end(),
                  {dirs[d].gates_x, dirs[d].weight_hh, dirs[d].bias_hh, dirs[d].h0, dirs[d].c0});
    outputs.insert(outputs.end(), {out[d].output, out[d].h_n, out[d].c_n});
    reverse.push_back(dirs[d].reverse);
  }
  trace_op(op, inputs, outputs, {{"reverse", reverse}});
}

// Row of hs (and cs) [T + 1, N, H] holding the initial state: 0, or T when reverse.
int64_t initial_row(bool reverse, int64_t T) { return reverse ? T : 0; }

// The views of direction d's states buffer s [T + 1, N, H]: the outputs [T, N, H] and the final
// state [N, H].
Tensor output_rows(const Tensor& s, bool reverse, int64_t T) {
  return reverse ? slice(s, 0, 0, T) : slice(s, 0, 1, T + 1);
}
Tensor final_row(const Tensor& s, bool reverse, int64_t T) { return select(s, 0, reverse ? 0 : T); }

// dW_hh = d_gates_hᵀ [G·H, T·N] · h before each step [T·N, H] (hs without its last state's row):
// one GEMM after the recurrence (it follows the matmul precision).
template <class T>
Tensor hidden_weight_grad(const T* d_gates_h, const T* hs, bool reverse, int64_t steps, int64_t N,
                          int64_t H, int64_t gates, DType dtype) {
  Tensor dw = Tensor::empty({gates * H, H}, dtype);
  gemm(true, false, gates * H, H, steps * N, T(1), d_gates_h, gates * H, hs + (reverse ? N * H : 0),
       H, T(0), dw.data<T>(), H);
  return dw;
}

void copy_rows(const Tensor& from, Tensor& to_buffer, int64_t offset) {
  const Tensor f = kernel_input(from);
  dispatch_float(f.dtype(), "copy_rows", [&]<class T>() {
    std::copy(f.data<T>(), f.data<T>() + f.numel(), to_buffer.data<T>() + offset);
  });
}
}  // namespace

// Forward: states [D, 2, T + 1, N, H] (hs and cs of each direction, one recorded node; the
// outputs and final states are its views), act [D, T, N, 5H] kept. Backward (kernel): d_gates
// [T·N, 4H] to gates_x, one GEMM to weight_hh, the carried dh and dc to h0 and c0.
std::vector<SequenceResult> lstm_sequence(const std::vector<SequenceDirection>& dirs) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "lstm_sequence";
  const SequenceSizes sizes = check_sequence_args(dirs, 4, op);
  const int64_t T = sizes.T, N = sizes.N, H = sizes.H;  // not a structured binding: lambdas capture
  const int64_t D = static_cast<int64_t>(dirs.size()), plane = (T + 1) * N * H;
  const DType dtype = dirs[0].h0.dtype();
  Tensor states = Tensor::empty({D, 2, T + 1, N, H}, dtype);
  const Tensor act = Tensor::empty({D, T, N, 5 * H}, dtype);
  std::vector<Tensor> inputs, gx, w;
  for (int64_t d = 0; d < D; ++d) {
    const SequenceDirection& dir = dirs[d];
    gx.push_back(kernel_input(dir.gates_x));
    w.push_back(kernel_input(dir.weight_hh));
    copy_rows(dir.h0, states, 2 * d * plane + initial_row(dir.reverse, T) * N * H);
    copy_rows(dir.c0, states, (2 * d + 1) * plane + initial_row(dir.reverse, T) * N * H);
    inputs.insert(inputs.end(), {dir.gates_x, dir.weight_hh, dir.h0, dir.c0});
  }
  auto sequences = [=]<class V>() {  // the kernels' view of the buffers (shared by the backward)
    std::vector<LstmSequence<V>> seqs(D);
    for (int64_t d = 0; d < D; ++d)
      seqs[d] = {T,
                 N,
                 H,
                 dirs[d].reverse,
                 gx[d].data<V>(),
                 w[d].data<V>(),
                 states.data<V>() + 2 * d * plane,
                 states.data<V>() + (2 * d + 1) * plane,
                 act.data<V>() + d * T * N * 5 * H};
    return seqs;
  };
  dispatch_float(dtype, op, [&]<class V>() {
    lstm_sequence_forward<V>(sequences.template operator()<V>().data(), D);
  });
  if (should_record(inputs)) {
    std::vector<bool> reverse;
    for (const SequenceDirection& dir : dirs) reverse.push_back(dir.reverse);
    const Tensor kept = detach(states);  // the backward reads hs and cs (not its own output)
    record(op, inputs, states,
           [inputs, w, act, kept, reverse, T, N, H, D, plane, op](const Tensor& g) {
             const Tensor G = g.contiguous();
             dispatch_float(G.dtype(), op, [&]<class V>() {
               std::vector<LstmSequence<V>> seqs(D);
               std::vector<LstmSequenceGrads<V>> grads(D);
               std::vector<Tensor> d_gates, d_h0, d_c0;
               for (int64_t d = 0; d < D; ++d) {
                 d_gates.push_back(Tensor::empty({T * N, 4 * H}, G.dtype()));
                 d_h0.push_back(Tensor::empty({N, H}, G.dtype()));
                 d_c0.push_back(Tensor::empty({N, H}, G.dtype()));
                 seqs[d] = {T,
                            N,
                            H,
                            reverse[d],
                            nullptr,
                            w[d].data<V>(),
                            kept.data<V>() + 2 * d * plane,
                            kept.data<V>() + (2 * d + 1) * plane,
                            act.data<V>() + d * T * N * 5 * H};
                 const int64_t last = (reverse[d] ? 0 : T) * N * H;
                 grads[d] = {G.data<V>() + 2 * d * plane, G.data<V>() + (2 * d + 1) * plane + last,
                             d_gates[d].data<V>(), d_h0[d].data<V>(), d_c0[d].data<V>()};
               }
               lstm_sequence_backward<V>(seqs.data(), grads.data(), D);
               for (int64_t d = 0; d < D; ++d) {
                 const Tensor* in = &inputs[4 * d];  // gates_x, weight_hh, h0, c0
                 if (in[1].requires_grad())
                   accumulate_grad(in[1], hidden_weight_grad<V>(d_gates[d].data<V>(), seqs[d].hs,
                                                                reverse[d], T, N, H, 4, G.dtype()));
                 if (in[0].requires_grad()) accumulate_grad(in[0], d_gates[d]);
                 if (in[2].requires_grad()) accumulate_grad(in[2], d_h0[d]);
                 if (in[3].requires_grad()) accumulate_grad(in[3], d_c0[d]);
               }
             });
           });
  }
  std::vector<SequenceResult> out;
  for (int64_t d = 0; d < D; ++d) {
    const Tensor hs = select(select(states, 0, d), 0, 0), cs = select(select(states, 0, d), 0, 1);
    out.push_back({output_rows(hs, dirs[d].reverse, T), final_row(hs, dirs[d].reverse, T),
                   final_row(cs, dirs[d].reverse, T)});
  }
  if (tracing()) trace_sequence(op, dirs, out);
  return out;
}

// Forward: states [D, T + 1, N, H] (hs of each direction), act [D, T, N, 3H] and gh_n [D, T, N, H]
// kept. Backward (kernel): d_gates_x to gates_x, d_gates_h's GEMM to weight_hh and its column sums
// to bias_hh, the carried dh to h0.
std::vector<SequenceResult> gru_sequence(const std::vector<SequenceDirection>& dirs) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "gru_sequence";
  const SequenceSizes sizes = check_sequence_args(dirs, 3, op);
  const int64_t T = sizes.T, N = sizes.N, H = sizes.H;  // not a structured binding: lambdas capture
  const int64_t D = static_cast<int64_t>(dirs.size()), plane = (T + 1) * N * H;
  const DType dtype = dirs[0].h0.dtype();
  Tensor states = Tensor::empty({D, T + 1, N, H}, dtype);
  const Tensor act = Tensor::empty({D, T, N, 3 * H}, dtype);
  const Tensor gh_n = Tensor::empty({D, T, N, H}, dtype);
  std::vector<Tensor> inputs, gx, w, b;
  const bool bias = dirs[0].bias_hh.defined();
  for (int64_t d = 0; d < D; ++d) {
    const SequenceDirection& dir = dirs[d];
    gx.push_back(kernel_input(dir.gates_x));
    w.push_back(kernel_input(dir.weight_hh));
    b.push_back(bias ? kernel_input(dir.bias_hh) : Tensor());
    copy_rows(dir.h0, states, d * plane + initial_row(dir.reverse, T) * N * H);
    inputs.insert(inputs.end(), {dir.gates_x, dir.weight_hh, dir.h0});
    if (bias) inputs.push_back(dir.bias_hh);
  }
  auto sequences = [=]<class V>() {
    std::vector<GruSequence<V>> seqs(D);
    for (int64_t d = 0; d < D; ++d)
      seqs[d] = {T,
                 N,
                 H,
                 dirs[d].reverse,
                 gx[d].data<V>(),
                 w[d].data<V>(),
                 bias ? b[d].data<V>() : nullptr,
                 states.data<V>() + d * plane,
                 act.data<V>() + d * T * N * 3 * H,
                 gh_n.data<V>() + d * T * N * H};
    return seqs;
  };
  dispatch_float(dtype, op, [&]<class V>() {
    gru_sequence_forward<V>(sequences.template operator()<V>().data(), D);
  });
  if (should_record(inputs)) {
    std::vector<bool> reverse;
    for (const SequenceDirection& dir : dirs) reverse.push_back(dir.reverse);
    const Tensor kept = detach(states);
    const int64_t per = bias ? 4 : 3;
    record(op, inputs, states,
           [inputs, w, act, gh_n, kept, reverse, T, N, H, D, plane, per, op](const Tensor& g) {
             const Tensor G = g.contiguous();
             dispatch_float(G.dtype(), op, [&]<class V>() {
               std::vector<GruSequence<V>> seqs(D);
               std::vector<GruSequenceGrads<V>> grads(D);
               std::vector<Tensor> dgx, dgh, d_h0;
               for (int64_t d = 0; d < D; ++d) {
                 dgx.push_back(Tensor::empty({T * N, 3 * H}, G.dtype()));
                 dgh.push_back(Tensor::empty({T * N, 3 * H}, G.dtype()));
                 d_h0.push_back(Tensor::empty({N, H}, G.dtype()));
                 seqs[d] = {T,
                            N,
                            H,
                            reverse[d],
                            nullptr,
                            w[d].data<V>(),
                            nullptr,
                            kept.data<V>() + d * plane,
                            act.data<V>() + d * T * N * 3 * H,
                            gh_n.data<V>() + d * T * N * H};
                 grads[d] = {G.data<V>() + d * plane, dgx[d].data<V>(), dgh[d].data<V>(),
                             d_h0[d].data<V>()};
               }
               gru_sequence_backward<V>(seqs.data(), grads.data(), D);
               for (int64_t d = 0; d < D; ++d) {
                 const Tensor* in = &inputs[per * d];  // gates_x, weight_hh, h0, bias_hh
                 if (in[1].requires_grad())
                   accumulate_grad(in[1], hidden_weight_grad<V>(dgh[d].data<V>(), seqs[d].hs,
                                                                reverse[d], T, N, H, 3, G.dtype()));
                 if (per == 4 && in[3].requires_grad()) {
                   Tensor db = Tensor::zeros({3 * H}, G.dtype());
                   add_column_sums(dgh[d].data<V>(), T * N, 3 * H, 3 * H, db.data<V>());
                   accumulate_grad(in[3], db);
                 }
                 if (in[0].requires_grad()) accumulate_grad(in[0], dgx[d]);
                 if (in[2].requires_grad()) accumulate_grad(in[2], d_h0[d]);
               }
             });
           });
  }
  std::vector<SequenceResult> out;
  for (int64_t d = 0; d < D; ++d) {
    const Tensor hs = select(states, 0, d);
    out.push_back(
        {output_rows(hs, dirs[d].reverse, T), final_row(hs, dirs[d].reverse, T), Tensor()});
  }
  if (tracing()) trace_sequence(op, dirs, out);
  return out;
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) -----------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the recurrent family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> recurrent_op_cases() {
  // gates_x, gates_h [N, G·H] and the state [N, H], seeds fixed per row
  auto cell_in = [](int64_t N, int64_t H, int64_t gates, const char* state) {
    return [=] {
      return std::vector<Tensor>{random_tensor({N, gates * H}, 51, -2.0, 2.0).set_name("gates_x"),
                                 random_tensor({N, gates * H}, 52, -2.0, 2.0).set_name("gates_h"),
                                 random_tensor({N, H}, 53).set_name(state)};
    };
  };
  using V = const std::vector<Tensor>&;
  auto both = [](const HiddenAndCell& r) { return cat({r.h, r.c}, 1); };
  // Per direction: gates_x [T·N, G·H], weight_hh [G·H, H], h0 [N, H], then c0 [N, H] (LSTM) or
  // bias_hh [G·H] (GRU); T 3, N 2, H 3.
  auto sequence_in = [](bool lstm) {
    return [=] {
      const int64_t G = lstm ? 4 : 3;
      std::vector<Tensor> in;
      for (uint64_t d = 0; d < 2; ++d) {
        const uint64_t seed = 60 + 10 * d;
        in.push_back(random_tensor({6, G * 3}, seed, -2.0, 2.0).set_name("gates_x"));
        in.push_back(random_tensor({G * 3, 3}, seed + 1).set_name("weight_hh"));
        in.push_back(random_tensor({2, 3}, seed + 2).set_name("h0"));
        in.push_back(lstm ? random_tensor({2, 3}, seed + 3).set_name("c0")
                          : random_tensor({G * 3}, seed + 3).set_name("bias_hh"));
      }
      return in;
    };
  };
  // Every output and final state of both directions, one vector.
  auto sequence = [](V in, bool lstm) {
    std::vector<SequenceDirection> dirs;
    for (size_t d = 0; d < 2; ++d) {
      const Tensor* t = &in[4 * d];
      dirs.push_back({t[0], t[1], lstm ? Tensor() : t[3], t[2], lstm ? t[3] : Tensor(), d == 1});
    }
    std::vector<Tensor> parts;
    for (const SequenceResult& r : lstm ? lstm_sequence(dirs) : gru_sequence(dirs)) {
      parts.push_back(reshape(r.output, {-1}));
      parts.push_back(reshape(r.h_n, {-1}));
      if (r.c_n.defined()) parts.push_back(reshape(r.c_n, {-1}));
    }
    return cat(parts, 0);
  };
  return {
      {"lstm_cell/N 3, H 4", cell_in(3, 4, 4, "c"),
       [both](V in) { return both(lstm_cell(in[0], in[1], in[2])); }},
      {"lstm_cell/transposed-view gates (copied)", cell_in(2, 2, 4, "c"),
       [both](V in) {
         return both(lstm_cell(transpose(reshape(in[0], {8, 2}), 0, 1), in[1], in[2]));
       }},
      {"plain_lstm_cell/N 3, H 4", cell_in(3, 4, 4, "c"),
       [both](V in) { return both(plain_lstm_cell(in[0], in[1], in[2])); }},
      {"gru_cell/N 3, H 4", cell_in(3, 4, 3, "h"),
       [](V in) { return gru_cell(in[0], in[1], in[2]); }},
      {"plain_gru_cell/N 3, H 4", cell_in(3, 4, 3, "h"),
       [](V in) { return plain_gru_cell(in[0], in[1], in[2]); }},
      {"lstm_sequence/T 3, N 2, H 3, both directions", sequence_in(true),
       [sequence](V in) { return sequence(in, true); }},
      {"gru_sequence/T 3, N 2, H 3, both directions, bias_hh", sequence_in(false),
       [sequence](V in) { return sequence(in, false); }},
  };
}

}  // namespace dg
