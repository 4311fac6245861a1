// The embedding op: a row gather whose backward scatter-adds rows (kernels in
// tensor/kernels_embedding.h), and its gradient-check row. Ids out of range throw naming the id,
// its position and the vocabulary size. Under create_graph (autograd/tape.h) the row scatter-add
// is a recorded op (embedding_backward) whose own backward is an embedding of the ids again.
// padding_idx zeroes the gradient rows of its id (torch's padding_idx). Does not do: max-norm,
// sparse gradients. one_hot (torch.nn.functional.one_hot, no gradient) is embedding's identity
// table: one_hot(ids, C) = embedding(eye(C), ids) in int64; its checks are in
// tests/test_torch_ops_a.cpp.
// Checks: the row at the end (tests/test_gradcheck_ops.cpp runs it), the kernels in
// tests/test_kernels_embedding.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

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

// ---- embedding: out[n] = W[ids[n]]; dW[v] += Σ_{ids[n]=v} g[n] (v ≠ padding_idx) ----------------
Tensor embedding(const Tensor& weight, const Tensor& ids_in, std::optional<int64_t> padding_idx) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "embedding";
  check_float(weight, op);
  check_arg(weight.dim() == 2, op, weight, "weight of shape [V, D]");
  const int64_t V = weight.size(0), D = weight.size(1), N = ids_in.numel();
  if (padding_idx && (*padding_idx < -V || *padding_idx >= V))
    throw std::out_of_range(fmt::format("embedding: padding_idx {} is out of range [{}, {}) for {}",
                                        *padding_idx, -V, V, weight.describe()));
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
    if (tracing()) trace_op(op, {weight, ids_in}, {out});
    if (!should_record({weight})) return out;
    // padding_idx: g's rows at the padding ids are zeroed first (a constant mask [.., 1])
    Shape mask_shape = ids.shape();
    mask_shape.push_back(1);
    const Tensor pad =
        padding_idx
            ? raw::view_reshape(
                  eq(ids, static_cast<double>(*padding_idx < 0 ? *padding_idx + V : *padding_idx)),
                  mask_shape)
            : Tensor();
    record(op, {weight}, out,
           [weight, ids, pad, N, V, D](const Tensor& g) {
             Tensor gc = pad.defined() ? masked_fill(g, pad, 0.0) : g.contiguous();
             dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
               embedding_backward<T>(grad_ptr<T>(weight, "embedding"), gc.data<T>(), ids.data<I>(),
                                     N, V, D);
             });
           })
        .saves({})
        .differentiable([weight, ids, pad, V](const Tensor& g, const Tensor&) {
          accumulate_grad(weight,
                          embedding_scatter(pad.defined() ? masked_fill(g, pad, 0.0) : g, ids, V));
        });
    return out;
  });
}

// ---- one_hot: ids [..] -> int64 [.., C], 1 at each id's class (torch.nn.functional.one_hot) ---
// num_classes −1: one more than the largest id. torch takes int64 ids only; int32 ones are read
// too, as every depthgrad index. Records nothing (integer output, as torch's).
Tensor one_hot(const Tensor& ids, int64_t num_classes) {
  ScopedOpTimer op_timer(OpFamily::other);
  const char* op = "one_hot";
  return dispatch_index(
      ids, op, "ids (one_hot is only applicable to index tensors)", [&]<class I>() {
        const Tensor in = kernel_input(ids);
        const I* v = in.data<I>();
        const int64_t n = in.numel();
        if (n == 0 && num_classes <= 0)
          throw std::invalid_argument(fmt::format(
              "one_hot: can not infer the total number of classes from an empty tensor {}; pass "
              "num_classes",
              ids.describe()));
        int64_t largest = -1;
        for (int64_t k = 0; k < n; ++k) {
          if (v[k] < 0)
            throw std::invalid_argument(fmt::format(
                "one_hot: class values must be non-negative, got {} at position {}", v[k], k));
          largest = std::max<int64_t>(largest, v[k]);
        }
        const int64_t C = num_classes == -1 ? largest + 1 : num_classes;
        if (n > 0 && largest >= C)
          throw std::invalid_argument(fmt::format(
              "one_hot: class values must be smaller than num_classes = {}, got {}", C, largest));
        Shape shape = ids.shape();
        shape.push_back(C);
        Tensor out = Tensor::zeros(shape, DType::i64);
        int64_t* o = out.data<int64_t>();
        for (int64_t k = 0; k < n; ++k) o[k * C + v[k]] = 1;
        return out;
      });
}

}  // namespace dg

// ---- gradient-check rows (see autograd/gradcheck.h) ---------------------------------------------
#include "autograd/gradcheck.h"

namespace dg {

// data table: the embedding family's gradient-check rows (see autograd/gradcheck.h)
std::vector<OpCase> embedding_op_cases() {
  using V = const std::vector<Tensor>&;
  // padding_idx: the rows read at the padding id are multiplied by 0, so the true derivative of
  // the padding row is the 0 padding_idx gives (the other rows are checked as usual)
  auto kept = [](const Tensor& out, const Tensor& ids, int64_t pad) {
    Shape shape = ids.shape();
    shape.push_back(1);
    return mul(out, raw::view_reshape(ne(ids, static_cast<double>(pad)).to(out.dtype()), shape));
  };
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
      {"embedding/padding_idx 1, repeated",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 13).set_name("weight"),
                                    Tensor::from_ids({1, 3, 1, 0, 4, 1}, {2, 3})};
       },
       [=](V in) { return kept(embedding(in[0], in[1], 1), in[1], 1); }},
      {"embedding/padding_idx -1, int32",
       [] {
         return std::vector<Tensor>{random_tensor({5, 4}, 14).set_name("weight"),
                                    Tensor::from_ids({4, 0, 0, 2}, {4}, DType::i32)};
       },
       [=](V in) { return kept(embedding(in[0], in[1], -1), in[1], 4); }},
  };
}

}  // namespace dg
