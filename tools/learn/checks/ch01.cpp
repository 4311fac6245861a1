// Chapter 1 of the learner's path (tensor/learn-01-tensors.md): tensors, shapes, strides and
// views. Grades contiguous_strides, is_contiguous_layout and broadcast_shapes (tensor/shape.cpp)
// through the tensor API that calls them: the strides of new tensors, is_contiguous() of views, the
// shapes and values of broadcasting ops, a reshape of a transposed tensor. Every expected value is
// PyTorch 1.13's (tools/learn/goldens_ch01.py printed them).
// It does not grade the other view functions (transpose, permute, narrow, expand): they are read,
// not written, in this chapter.
#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/factory.h"
#include "tensor/shape.h"
#include "tools/learn/grade.h"

namespace dg::learn {
namespace {

// arange(n) as float64, reshaped: the exact values torch's arange gives.
Tensor arange_f64(const Shape& shape) {
  return reshape(arange(0.0, double(shape_numel(shape)), 1.0, DType::f64), shape);
}

// Every tensor is laid out with contiguous_strides, and kernels trust is_contiguous() and
// broadcast_shapes: wrong ones make a kernel read or write outside a tensor's storage (a crash, or
// a hang), not just a wrong value. So the checks that make tensors first test the three functions
// directly on a few shapes, and fail, naming the function, instead of running on wrong ones.
void require_sound_shape_functions_unwrapped();

// The pre-check with what a learner's function throws named as that function's failure, so a
// check of one exercise never reports another exercise's exception as its own.
void require_sound_shape_functions() {
  try {
    require_sound_shape_functions_unwrapped();
  } catch (const NotWritten&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(
        fmt::format("skipped: a shape function threw on a valid shape ({}); until "
                    "contiguous_strides, is_contiguous_layout and broadcast_shapes accept the "
                    "shapes torch accepts, nothing that makes tensors can be checked",
                    e.what()));
  }
}

void require_sound_shape_functions_unwrapped() {
  const std::vector<std::pair<Shape, Shape>> strides = {
      {{2, 3, 4}, {12, 4, 1}}, {{5}, {1}}, {{}, {}}};
  for (const auto& [shape, expected] : strides)
    if (contiguous_strides(shape) != expected)
      throw std::runtime_error(fmt::format(
          "skipped: contiguous_strides({}) is {}, not {}; every tensor is laid out with it, so "
          "nothing that makes tensors can be checked until it is right",
          shape_str(shape), shape_str(contiguous_strides(shape)), shape_str(expected)));
  if (!is_contiguous_layout({2, 3}, {3, 1}) || is_contiguous_layout({3, 2}, {1, 3}) ||
      is_contiguous_layout({3, 4}, {1, 0}) || is_contiguous_layout({2, 2}, {4, 1}) ||
      is_contiguous_layout({6}, {0}) || is_contiguous_layout({3}, {2}) ||
      !is_contiguous_layout({5}, {1}))
    throw std::runtime_error(
        "skipped: is_contiguous_layout calls a transposed, expanded or gapped layout contiguous "
        "(a 1-D one too: [6] with stride 0, [3] with stride 2), or a row-major one not; kernels "
        "read a contiguous tensor as one flat block, so nothing "
        "that makes tensors can be checked until it is right");
  const std::vector<std::array<Shape, 3>> pairs = {{Shape{3, 1}, Shape{4}, Shape{3, 4}},
                                                   {Shape{2, 3}, Shape{2, 3}, Shape{2, 3}},
                                                   {Shape{}, Shape{2}, Shape{2}}};
  for (const auto& [a, b, expected] : pairs)
    if (broadcast_shapes(a, b, "broadcast_shapes") != expected)
      throw std::runtime_error(fmt::format(
          "skipped: broadcast_shapes({}, {}) is {}, not {}; a binary op allocates its output "
          "with it, so no op can be checked until it is right",
          shape_str(a), shape_str(b), shape_str(broadcast_shapes(a, b, "broadcast_shapes")),
          shape_str(expected)));
}

// ---- contiguous_strides -----------------------------------------------------------------------

struct StridesCase {
  Shape shape, strides;
};
const std::vector<StridesCase> kTorchStrides = {
    // torch.empty(shape).stride()
    {{2, 3, 4}, {12, 4, 1}}, {{5}, {1}},       {{}, {}},
    {{3, 1, 2}, {2, 2, 1}},  {{1, 1}, {1, 1}}, {{4, 1, 6, 2}, {12, 12, 2, 1}},
};

Verdict new_tensor_strides() {
  for (const StridesCase& c : kTorchStrides) {
    const Shape strides = contiguous_strides(c.shape);
    if (strides != c.strides)
      return {false, fmt::format("contiguous_strides({}) is {}; torch's x.stride() is {}",
                                 shape_str(c.shape), shape_str(strides), shape_str(c.strides))};
    if (Tensor::empty(c.shape).strides() != c.strides)  // empty() writes nothing
      return {false, fmt::format("a new tensor of shape {} has strides {}; torch's is {}",
                                 shape_str(c.shape), shape_str(Tensor::empty(c.shape).strides()),
                                 shape_str(c.strides))};
  }
  return {true, fmt::format("{} shapes, strides as torch's x.stride()", kTorchStrides.size())};
}

Verdict permuted_copy_values() {
  require_sound_shape_functions();
  const Tensor copy = contiguous(permute(arange_f64({2, 3, 4}), {2, 0, 1}));
  return expect_values(copy, {0.0, 4.0, 8.0,  12.0, 16.0, 20.0, 1.0, 5.0, 9.0,  13.0, 17.0, 21.0,
                              2.0, 6.0, 10.0, 14.0, 18.0, 22.0, 3.0, 7.0, 11.0, 15.0, 19.0, 23.0},
                       {4, 2, 3}, 0, 0,
                       "arange(24).reshape(2, 3, 4).permute(2, 0, 1).contiguous()");
}

// A reshape views the storage row-major with contiguous_strides: column-major strides, or strides
// off by one axis, read the wrong elements.
Verdict reshape_values() {
  require_sound_shape_functions();
  const Tensor reshaped = reshape(arange_f64({2, 6}), {3, 4});
  return expect_values(transpose(reshaped, 0, 1), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, {4, 3}, 0,
                       0, "arange(12).reshape(2, 6).reshape(3, 4).transpose(0, 1)");
}

// ---- is_contiguous_layout ---------------------------------------------------------------------

struct ViewCase {
  const char* what;
  Tensor view;
  bool torch_is_contiguous;
};

std::vector<ViewCase> views() {
  const Tensor x = Tensor::zeros({2, 3, 4});
  return {
      {"new [2, 3, 4]", x, true},
      {"transpose(0, 1) of [2, 3, 4]", raw::view_transpose(x, 0, 1), false},
      {"permute(2, 0, 1) of [2, 3, 4]", raw::view_permute(x, {2, 0, 1}), false},
      {"narrow(2, 1, 2) of [2, 3, 4]", raw::view_narrow(x, 2, 1, 2), false},
      {"narrow(0, 1, 1) of [2, 3, 4]", raw::view_narrow(x, 0, 1, 1), true},
      {"transpose(0, 1) of [5, 1]", raw::view_transpose(Tensor::zeros({5, 1}), 0, 1), true},
      {"expand [3, 1] to [3, 4]", raw::view_expand(Tensor::zeros({3, 1}), {3, 4}), false},
      {"expand [1, 4] to [1, 4]", raw::view_expand(Tensor::zeros({1, 4}), {1, 4}), true},
      {"expand [1] to [6] (1-D, stride 0)", raw::view_expand(Tensor::zeros({1}), {6}), false},
      {"narrow(0, 2, 3) of [8] (1-D, stride 1)", raw::view_narrow(Tensor::zeros({8}), 0, 2, 3),
       true},
  };
}

Verdict views_contiguity() {
  require_sound_shape_functions();
  const std::vector<ViewCase> cases = views();
  for (const ViewCase& c : cases)
    if (c.view.is_contiguous() != c.torch_is_contiguous)
      return {false, fmt::format("{}: shape {}, strides {}: is_contiguous() says {}, torch says {}",
                                 c.what, shape_str(c.view.shape()), shape_str(c.view.strides()),
                                 c.view.is_contiguous(), c.torch_is_contiguous)};
  return {true, fmt::format("{} views, each as torch's is_contiguous()", cases.size())};
}

// reshape views a contiguous tensor and copies any other: a transposed tensor taken for contiguous
// is read in storage order, the wrong one.
Verdict reshape_of_transpose() {
  require_sound_shape_functions();
  const Tensor t = transpose(arange_f64({3, 4}), 0, 1);
  return expect_values(reshape(t, {2, 6}), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, {2, 6}, 0, 0,
                       "arange(12).reshape(3, 4).transpose(0, 1).reshape(2, 6)");
}

Verdict strides_as_given() {
  struct Case {
    Shape shape, strides;
    bool contiguous;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {3, 1}, true},
      {{3, 2}, {1, 3}, false},
      {{}, {}, true},
      {{1, 3}, {99, 1}, true},
      {{3, 2}, {2, 2}, false},
      {{4, 1}, {1, 1}, true},
      {{2, 1, 3}, {3, 3, 1}, true},
      // rank 1 is no exception: one element apart is contiguous, any other stride is not
      {{6}, {0}, false},
      {{3}, {2}, false},
      {{5}, {1}, true},
      {{1}, {7}, true}};
  for (const Case& c : cases)
    if (is_contiguous_layout(c.shape, c.strides) != c.contiguous)
      return {false,
              fmt::format("is_contiguous_layout({}, {}) is {}, expected {}", shape_str(c.shape),
                          shape_str(c.strides), !c.contiguous, c.contiguous)};
  return {true, fmt::format("{} layouts given directly, each as expected", cases.size())};
}

// ---- broadcast_shapes -------------------------------------------------------------------------

struct BroadcastCase {
  Shape a, b, result;
};
const std::vector<BroadcastCase> kTorchBroadcasts = {
    // torch.broadcast_shapes(a, b)
    {{3, 1}, {4}, {3, 4}},
    {{2, 1, 4}, {3, 1}, {2, 3, 4}},
    {{}, {2, 3}, {2, 3}},
    {{5, 1, 1}, {1, 6, 1}, {5, 6, 1}},
    {{1}, {7, 1}, {7, 1}},
    {{2, 3}, {2, 3}, {2, 3}},
    // a size-0 axis against a size 1: 0, not the larger of the two
    {{0}, {1}, {0}},
    {{2, 0}, {1}, {2, 0}},
    {{1, 3}, {0, 1}, {0, 3}},
};

Verdict broadcast_pairs() {
  for (const BroadcastCase& c : kTorchBroadcasts) {
    const Shape got = broadcast_shapes(c.a, c.b, "broadcast_shapes");
    const Shape swapped = broadcast_shapes(c.b, c.a, "broadcast_shapes");
    if (got != c.result || swapped != c.result)
      return {false, fmt::format("broadcast_shapes({}, {}) is {} (and the other way round {}); "
                                 "torch.broadcast_shapes gives {}",
                                 shape_str(c.a), shape_str(c.b), shape_str(got), shape_str(swapped),
                                 shape_str(c.result))};
  }
  return {true, fmt::format("{} pairs both ways round, as torch.broadcast_shapes",
                            kTorchBroadcasts.size())};
}

// An add of shapes that cannot broadcast must throw std::invalid_argument naming the op and both
// shapes (torch: "The size of tensor a (3) must match the size of tensor b (4)").
Verdict broadcast_refusals() {
  require_sound_shape_functions();
  const std::vector<std::pair<Shape, Shape>> bad = {
      {{3}, {4}}, {{2, 3}, {3, 2}}, {{2, 1}, {8, 4, 3}}};
  for (const auto& pair : bad) {
    const std::string a = shape_str(pair.first), b = shape_str(pair.second);
    // broadcast_shapes itself first: an add with a shape it wrongly accepts would read past the
    // end of the smaller tensor.
    try {
      const Shape accepted = broadcast_shapes(pair.first, pair.second, "add");
      return {false, fmt::format("broadcast_shapes({}, {}) returned {}; it must throw "
                                 "std::invalid_argument (torch: \"The size of tensor a must "
                                 "match the size of tensor b\")",
                                 a, b, shape_str(accepted))};
    } catch (const std::invalid_argument&) {
    }
    try {
      add(Tensor::zeros(pair.first), Tensor::zeros(pair.second));
      return {false, fmt::format("add of {} and {} returned a tensor; it must throw", a, b)};
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      if (message.find("add") == std::string::npos || message.find(a) == std::string::npos ||
          message.find(b) == std::string::npos)
        return {false, fmt::format("add of {} and {} threw \"{}\", which does not name the op "
                                   "(\"add\") and both shapes",
                                   a, b, message)};
    }
  }
  return {true,
          "add refuses [3] with [4], [2, 3] with [3, 2] and [2, 1] with [8, 4, 3], naming "
          "the op and both shapes"};
}

Verdict broadcast_add_values() {
  require_sound_shape_functions();
  const Tensor column = scale(arange_f64({3, 1}), 10.0), row = scale(arange_f64({4}), 0.5);
  return expect_values(add(column, row),
                       {0.0, 0.5, 1.0, 1.5, 10.0, 10.5, 11.0, 11.5, 20.0, 20.5, 21.0, 21.5}, {3, 4},
                       0, 0, "(arange(3) * 10).reshape(3, 1) + arange(4) * 0.5");
}

Verdict broadcast_mul_values() {
  require_sound_shape_functions();
  const Tensor a = add_scalar(arange_f64({2, 1, 4}), -3.0), b = add_scalar(arange_f64({3, 1}), 1.0);
  return expect_values(
      mul(a, b), {-3.0, -2.0, -1.0, 0.0, -6.0, -4.0, -2.0, 0.0, -9.0, -6.0, -3.0, 0.0,
                  1.0,  2.0,  3.0,  4.0, 2.0,  4.0,  6.0,  8.0, 3.0,  6.0,  9.0,  12.0},
      {2, 3, 4}, 0, 0, "(arange(8).reshape(2, 1, 4) - 3) * (arange(3).reshape(3, 1) + 1)");
}

}  // namespace

Chapter chapter() {
  return {
      1,
      "tensors, shapes, strides and views",
      "tensor/learn-01-tensors.md",
      {
          {"contiguous_strides",
           "tensor/shape.cpp",
           {{"strides of new tensors, as torch's x.stride()", new_tensor_strides},
            {"a permuted tensor copied contiguous, values as torch's", permuted_copy_values},
            {"a reshape reads the storage row-major, values as torch's", reshape_values}}},
          {"is_contiguous_layout",
           "tensor/shape.cpp",
           {{"is_contiguous() of ten views (two 1-D), as torch's", views_contiguity},
            {"is_contiguous_layout on shapes and strides given directly", strides_as_given, true},
            {"reshape of a transposed tensor copies, values as torch's", reshape_of_transpose}},
           {"contiguous_strides"}},
          {"broadcast_shapes",
           "tensor/shape.cpp",
           {{"broadcast shapes of nine pairs (three with a size-0 axis), as torch.broadcast_shapes",
             broadcast_pairs, true},
            {"shapes that cannot broadcast are refused, naming op and shapes", broadcast_refusals},
            {"a broadcast add, values as torch's", broadcast_add_values},
            {"a broadcast mul over three axes, values as torch's", broadcast_mul_values}},
           {"contiguous_strides", "is_contiguous_layout"}},
      }};
}

}  // namespace dg::learn
