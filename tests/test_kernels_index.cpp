// Tests of gather and index_select (tensor/kernels_index.h, autograd/ops_index.cpp), and of the
// split/chunk/cat views (autograd/ops_shape.cpp): the fast kernels against the references bit for
// bit, float32 bit identity at 1 and 2 threads, values and scatter-added gradients as torch, and
// errors naming the op and the index. Finite differences: the index and shape rows of the table.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/ops.h"
#include "tensor/kernels_index.h"
#include "tensor/threads.h"
#include "tests/test_helpers.h"

using namespace dg;
using namespace dg::test;

TEST_CASE_TEMPLATE("gather kernels: fast matches reference bit for bit", T, float, double) {
  const int64_t O = 5, C = 7, J = 9, I = 130;  // I spans several tiles
  auto x = rand_vec<T>(O * C * I, 91);
  auto dout = rand_vec<T>(O * J * I, 92);
  auto full = rand_ints<int64_t>(O * J * I, C, 93), rows = rand_ints<int64_t>(J, C, 94);
  for (GatherIndex gi :
       {GatherIndex{full.data(), J * I, I, 1}, GatherIndex{rows.data(), 0, 1, 0}}) {
    std::vector<T> out(O * J * I), out_ref(O * J * I);
    gather_forward<T>(out.data(), x.data(), gi, O, C, J, I);
    ref_gather_forward<T>(out_ref.data(), x.data(), gi, O, C, J, I);
    CHECK(same_bits(out, out_ref));
    auto dx = rand_vec<T>(O * C * I, 95), dx_ref = dx;
    gather_backward<T>(dx.data(), dout.data(), gi, O, C, J, I);
    ref_gather_backward<T>(dx_ref.data(), dout.data(), gi, O, C, J, I);
    CHECK(same_bits(dx, dx_ref));
  }
}

TEST_CASE("gather kernels: float32 results are bit-identical at 1 and 2 threads") {
  ThreadsGuard guard;
  const int64_t O = 80, C = 50, J = 60, I = 33;  // above kParallelGrain, repeated indices
  auto x = rand_vec<float>(O * C * I, 96);
  auto dout = rand_vec<float>(O * J * I, 97);
  auto full = rand_ints<int64_t>(O * J * I, C, 98), rows = rand_ints<int64_t>(J, C, 99);
  auto run = [&](int n) {
    set_threads(n);
    std::vector<std::vector<float>> r;
    for (GatherIndex gi :
         {GatherIndex{full.data(), J * I, I, 1}, GatherIndex{rows.data(), 0, 1, 0}}) {
      std::vector<float> out(O * J * I), dx(O * C * I, 0.5f);
      gather_forward<float>(out.data(), x.data(), gi, O, C, J, I);
      gather_backward<float>(dx.data(), dout.data(), gi, O, C, J, I);
      r.push_back(out);
      r.push_back(dx);
    }
    return r;
  };
  check_same_bits_at_1_and_2_threads(run);
}

// torch: x = arange(12.).view(3, 4); x.gather(1, [[3, 3], [0, 1], [2, 0]]) = [[3, 3], [4, 5],
// [10, 8]]; summed, x.grad = [[0, 0, 0, 2], [1, 1, 0, 0], [1, 0, 1, 0]].
// x.index_select(0, [2, 0, 2]) = rows 2, 0, 2; summed, x.grad rows = [1, 0, 2] (times ones).
TEST_CASE("gather and index_select: values and scatter-added gradients as torch") {
  std::vector<double> v(12);
  for (int k = 0; k < 12; ++k) v[k] = k;
  Tensor x = Tensor::from_vector(v, {3, 4}, DType::f64).set_requires_grad(true);
  for (DType it : {DType::i32, DType::i64}) {
    x.zero_grad();
    Tensor g = gather(x, 1, Tensor::from_vector({3, 3, 0, 1, 2, 0}, {3, 2}, it));
    CHECK(g.to_vector() == std::vector<double>{3, 3, 4, 5, 10, 8});
    backward(sum(g));
    CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 0, 2, 1, 1, 0, 0, 1, 0, 1, 0});
    x.zero_grad();
    Tensor s = index_select(x, 0, Tensor::from_vector({2, 0, 2}, {3}, it));
    CHECK(s.shape() == Shape{3, 4});
    CHECK(s.to_vector() == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
    backward(sum(s));
    CHECK(x.grad().to_vector() == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2});
  }
  // index shorter than input on the other axis (torch allows it): x.gather(0, [[2, 0]])
  x.zero_grad();
  Tensor g = gather(x, 0, Tensor::from_ids({2, 0}, {1, 2}));
  CHECK(g.to_vector() == std::vector<double>{8, 1});
  backward(sum(g));
  CHECK(x.grad().to_vector() == std::vector<double>{0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
}

TEST_CASE("gather and index_select: an index out of range throws naming the op and the index") {
  Tensor x = Tensor::zeros({3, 4});
  CHECK_THROWS_WITH(gather(x, 1, Tensor::from_ids({0, 4}, {1, 2})),
                    doctest::Contains("gather: index 4 at position 1 is out of range for axis 1"));
  CHECK_THROWS_WITH(gather(x, 0, Tensor::from_ids({-1}, {1, 1})),
                    doctest::Contains("gather: index -1 at position 0"));
  CHECK_THROWS_WITH(index_select(x, -1, Tensor::from_vector({1, 9}, {2}, DType::i64)),
                    doctest::Contains("index_select: index 9 at position 1 is out of range"));
  CHECK_THROWS_WITH(gather(x, 1, Tensor::from_ids({0}, {1})),
                    doctest::Contains("gather: expected an index with the rank of input"));
  CHECK_THROWS_WITH(gather(x, 1, Tensor::from_ids({0, 0, 0, 0}, {4, 1})),
                    doctest::Contains("no longer than input"));
  CHECK_THROWS_WITH(index_select(x, 0, Tensor::zeros({2})),
                    doctest::Contains("index_select: expected an int64 or int32 index"));
}

// ---- split / chunk / cat

TEST_CASE("split and chunk: views with torch's piece sizes; gradients of several pieces add up") {
  Tensor a =
      Tensor::from_vector(std::vector<double>(20, 1.0), {4, 5}, DType::f64).set_requires_grad(true);
  auto sizes = [](const std::vector<Tensor>& ps, int64_t axis) {
    std::vector<int64_t> s;
    for (const Tensor& p : ps) s.push_back(p.shape()[axis]);
    return s;
  };
  CHECK(sizes(split(a, 2, 1), 1) == std::vector<int64_t>{2, 2, 1});  // torch.split(a, 2, 1)
  CHECK(sizes(split(a, std::vector<int64_t>{1, 3}, 0), 0) == std::vector<int64_t>{1, 3});
  CHECK(sizes(chunk(a, 3, -1), 1) == std::vector<int64_t>{2, 2, 1});  // torch.chunk(a, 3, -1)
  CHECK(sizes(chunk(a, 3, 0), 0) == std::vector<int64_t>{2, 2});      // fewer pieces, as torch
  CHECK(sizes(chunk(a, 6, 1), 1) == std::vector<int64_t>{1, 1, 1, 1, 1});
  std::vector<Tensor> p = split(a, 2, 1);
  CHECK(p[1].storage() == a.storage());  // a view
  backward(add(sum(p[0]), scale(sum(p[2]), 3.0)));
  CHECK(a.grad().to_vector() ==
        std::vector<double>{1, 1, 0, 0, 3, 1, 1, 0, 0, 3, 1, 1, 0, 0, 3, 1, 1, 0, 0, 3});
  CHECK(cat(p, -1).to_vector() == a.to_vector());
  CHECK_THROWS_WITH(split(a, std::vector<int64_t>{1, 2}, 0),
                    doctest::Contains("split: sizes sum to 3, but axis 0"));
  CHECK_THROWS_WITH(split(a, 0, 0), doctest::Contains("split: split_size must be >= 1"));
  CHECK_THROWS_WITH(chunk(a, 0, 0), doctest::Contains("chunk: chunks must be >= 1"));
  CHECK_THROWS_WITH(cat({a, Tensor::zeros({3, 5}, DType::f64)}, 1),
                    doctest::Contains("cat: part 1"));
}

TEST_CASE("index_select and gather take integer inputs (labels, ids) and record nothing") {
  const Tensor labels = Tensor::from_ids({7, 8, 9, 10}, {4}, DType::i32);
  const Tensor picked =
      index_select(labels, 0, Tensor::from_vector(std::vector<double>{3, 0, 0}, {3}, DType::i64));
  REQUIRE(picked.dtype() == DType::i32);
  CHECK(picked.to_floats() == std::vector<float>{10, 7, 7});
  const Tensor ids = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::i64);
  const Tensor g =
      gather(ids, 1, Tensor::from_vector(std::vector<double>{2, 0}, {2, 1}, DType::i64));
  REQUIRE(g.dtype() == DType::i64);
  CHECK(g.to_floats() == std::vector<float>{3, 4});
  CHECK_FALSE(picked.requires_grad());
}
