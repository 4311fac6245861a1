// Printing a tensor the way torch prints one: `tensor([[1.5000, 2.0000], ...])`, with torch's
// number formats (fixed, integer-valued "1.", scientific), widths, line wrapping and elision of
// big tensors (first and last 3 along each axis past 1000 elements). It differs from torch only
// in spelling dtypes without "torch." and in printing requires_grad=True instead of a grad_fn.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>

#include "tensor/tensor.h"

namespace dg {

// torch.set_printoptions' fields, with its defaults.
struct PrintOptions {
  int precision = 4;         // digits after the point
  int64_t threshold = 1000;  // more elements than this: print only the edges
  int64_t edgeitems = 3;     // elements kept at each end of an elided axis
  int64_t linewidth = 80;    // characters per line before a row wraps
};

std::string to_string(const Tensor& t, const PrintOptions& options = {});
std::ostream& operator<<(std::ostream& out, const Tensor& t);

}  // namespace dg
