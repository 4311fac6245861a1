// The embedding op: a row gather whose backward scatter-adds rows (kernels in
// tensor/kernels_embedding.h), and its gradient-check row. Ids out of range throw naming the id,
// its position and the vocabulary size. Under create_graph (autograd/tape.h) the row scatter-add
// is a recorded op (embedding_backward) whose own backward is an embedding of the ids again.
// Does not do: padding ids, max-norm, sparse gradients.
// Checks: the row at the end (tests/test_gradcheck_ops.cpp runs it), the kernels in
// tests/test_kernels_embedding.cpp.
#include <fmt/format.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "tensor/kernels_embedding.h"
#include "tensor/profile.h"

namespace dg {

namespace {
// dW [V, D] = the rows of g [N, D] scatter-added at ids, as a recorded op: embedding's backward
// under create_graph. Linear in g; its own backward gathers the rows again (an embedding).
Tensor embedding_scatter(const Tensor& g, const Tensor& ids, int64_t V) {
  const int64_t D = g.size(-1), N = ids.numel();
  Tensor gc = kernel_input(g);
  Tensor dW = Tensor::zeros({V, D}, g.dtype());
  dispatch_index(ids, "embedding_backward", "ids", [&]<class I>() {
    dispatch_float(g.dtype(), "embedding_backward", [&]<class T>() {
      embedding_backward<T>(dW.data<T>(), gc.data<T>(), ids.data<I>(), N, V, D);
    });
  });
  if (should_record({g}))
    record("embedding_backward", {g}, dW,
           [g, ids](const Tensor& gg) { accumulate_grad(g, embedding(gg, ids)); })
        .saves({})
        .composed();
  return dW;
}
}  // namespace

// ---- embedding: out[n] = W[ids[n]]; dW[v] += Σ_{ids[n]=v} g[n] ----------------------------------
Tensor embedding(const Tensor& weight, const Tensor& ids_in) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "embedding";
  check_float(weight, op);
  check_arg(weight.dim() == 2, op, weight, "weight of shape [V, D]");
  const int64_t V = weight.size(0), D = weight.size(1), N = ids_in.numel();
  return dispatch_index(ids_in, op, "ids", [&]<class I>() {
    Tensor ids = kernel_input(ids_in);
    const I* id = ids.data<I>();
    for (int64_t n = 0; n < N; ++n)
      if (id[n] < 0 || id[n] >= V)
        throw std::out_of_range(fmt::format(
            "embedding: id {} at position {} is out of range for vocabulary size {} (weight {})",
            id[n], n, V, weight.describe()));
    Tensor w = kernel_input(weight);
    Shape out_shape = ids.shape();
    out_shape.push_back(D);
    Tensor out = Tensor::empty(out_shape, weight.dtype());
    dispatch_float(weight.dtype(), op,
                   [&]<class T>() { embedding_forward<T>(out.data<T>(), id, w.data<T>(), N, D); });
    if (should_record({weight}))
      record(op, {weight}, out,
             [weight, ids, N, V, D](const Tensor& g) {
               Tensor gc = g.contiguous();
               dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
                 embedding_backward<T>(grad_ptr<T>(weight, "embedding"), gc.data<T>(),
                                       ids.data<I>(), N, V, D);
               });
             })
          .saves({})
          .differentiable([weight, ids, V](const Tensor& g, const Tensor&) {
            accumulate_grad(weight, embedding_scatter(g, ids, V));
          });
    return out;
  });
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

std::vector<OpCase> embedding_op_cases() {
  using V = const std::vector<Tensor>&;
  return {
      {"embedding/repeated ids, int64",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 11).set_name("weight"),
                                    Tensor::from_ids({1, 3, 1, 0, 4, 1}, {2, 3})};
       },
       [](V in) { return embedding(in[0], in[1]); }},
      {"embedding/repeated ids, int32",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 12).set_name("weight"),
                                    Tensor::from_ids({4, 0, 0, 2}, {4}, DType::i32)};
       },
       [](V in) { return embedding(in[0], in[1]); }},
  };
}

}  // namespace dg
