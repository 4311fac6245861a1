// The gate math of one recurrent step, as fused ops beside their plain twins: lstm_cell (torch's
// LSTM gates i, f, g, o) and gru_cell (r, z, n, with r applied to the hidden projection of n, as
// torch), from the step's input and hidden projections and the previous state. The projections
// themselves are linear ops (nn/recurrent.cpp makes all time steps' input projections one GEMM).
// Kernels in tensor/kernels_recurrent.h. The fused ops refuse create_graph, naming themselves
// (their backward is a kernel); the plain twins, composed of recorded ops, differentiate twice.
// Refuses: inputs that are not [N, G·H] / [N, H] of one float dtype. Checks: the rows at the
// end, the twins in tests/test_plain_ops.cpp, kernels, torch goldens and errors in
// tests/test_recurrent.cpp.
#include <fmt/format.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
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
  return {reshape(slice(hc, 0, 0, 1), {N, H}), reshape(slice(hc, 0, 1, 2), {N, H})};
}

// lstm_cell written with primitive ops, each recorded: the reference.
HiddenAndCell plain_lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c) {
  check_cell_args(gates_x, gates_h, c, 4, "plain_lstm_cell", "c");
  const std::vector<Tensor> q = chunk(add(gates_x, gates_h), 4, 1);  // i, f, g, o
  const Tensor c_next = add(mul(sigmoid(q[1]), c), mul(sigmoid(q[0]), tanh(q[2])));
  return {mul(sigmoid(q[3]), tanh(c_next)), c_next};
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
  return out;
}

// gru_cell written with primitive ops, each recorded: the reference.
Tensor plain_gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h) {
  check_cell_args(gates_x, gates_h, h, 3, "plain_gru_cell", "h");
  const std::vector<Tensor> x = chunk(gates_x, 3, 1), y = chunk(gates_h, 3, 1);  // r, z, n
  const Tensor r = sigmoid(add(x[0], y[0])), z = sigmoid(add(x[1], y[1]));
  const Tensor n = tanh(add(x[2], mul(r, y[2])));
  return add(mul(1.0 - z, n), mul(z, h));
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
  };
}

}  // namespace dg
