// Tensor printing (see print.h), following torch/_tensor_str.py step by step: one formatter
// chosen from the printed values, then nested brackets with torch's separators and wrapping.
#include "tensor/print.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

namespace dg {

namespace {

// torch's _Formatter: picks integer-valued, fixed or scientific notation and one width.
class Formatter {
 public:
  Formatter(const std::vector<double>& values, DType dtype, int precision)
      : floating_(is_floating(dtype)), boolean_(dtype == DType::b8), precision_(precision) {
    if (boolean_) {  // torch: True / False, right-aligned to the widest shown
      for (double v : values) width_ = std::max<size_t>(width_, v != 0 ? 4 : 5);
      return;
    }
    if (!floating_) {
      for (double v : values)
        width_ = std::max(width_, fmt::format("{}", static_cast<int64_t>(v)).size());
      return;
    }
    std::vector<double> finite;  // non-zero finite values decide the notation
    for (double v : values)
      if (std::isfinite(v) && v != 0) finite.push_back(v);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) lo = std::min(lo, std::abs(v)), hi = std::max(hi, std::abs(v));
    for (double v : finite) int_mode_ = int_mode_ && v == std::ceil(v);
    const bool wide = hi / lo > 1000.0 || hi > 1e8;
    sci_mode_ = int_mode_ ? wide : wide || lo < 1e-4;
    for (double v : finite) {
      std::string s = sci_mode_   ? fmt::format("{:.{}e}", v, precision_)
                      : int_mode_ ? fmt::format("{:.0f}", v) + "."
                                  : fmt::format("{:.{}f}", v, precision_);
      width_ = std::max(width_, s.size());
    }
  }

  size_t width() const { return width_; }

  std::string format(double v) const {
    std::string s;
    if (boolean_)
      s = v != 0 ? "True" : "False";
    else if (!floating_)
      s = fmt::format("{}", static_cast<int64_t>(v));
    else if (sci_mode_)
      s = fmt::format("{:{}.{}e}", v, width_, precision_);
    else if (int_mode_)
      s = fmt::format("{:.0f}", v) + (std::isfinite(v) ? "." : "");
    else
      s = fmt::format("{:.{}f}", v, precision_);
    return s.size() < width_ ? std::string(width_ - s.size(), ' ') + s : s;
  }

 private:
  bool floating_, boolean_;
  int precision_;
  bool int_mode_ = true, sci_mode_ = false;
  size_t width_ = 1;
};

// The elements printed: all, or along every axis longer than 2·edgeitems its first and last
// edgeitems (torch's get_summarized_data).
struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  const Shape strides;  // row-major strides of `values`
  bool summarize;
  const PrintOptions& options;

  bool elided(size_t axis) const { return summarize && shape[axis] > 2 * options.edgeitems; }

  // Indices along `axis` that are printed, with -1 standing for the "..." between the edges.
  std::vector<int64_t> kept(size_t axis) const {
    std::vector<int64_t> out;
    if (!elided(axis)) {
      for (int64_t i = 0; i < shape[axis]; ++i) out.push_back(i);
      return out;
    }
    for (int64_t i = 0; i < options.edgeitems; ++i) out.push_back(i);
    out.push_back(-1);
    for (int64_t i = shape[axis] - options.edgeitems; i < shape[axis]; ++i) out.push_back(i);
    return out;
  }

  void collect(size_t axis, int64_t base, std::vector<double>& out) const {
    for (int64_t i : kept(axis)) {
      if (i < 0) continue;
      if (axis + 1 == shape.size())
        out.push_back(values[base + i]);
      else
        collect(axis + 1, base + i * strides[axis], out);
    }
  }

  std::string print(size_t axis, int64_t base, size_t indent, const Formatter& f) const {
    const size_t dims_left = shape.size() - axis;
    std::vector<std::string> parts;
    if (dims_left == 1) {  // torch's _vector_str
      const size_t per_line = std::max<int64_t>(
          1, (options.linewidth - static_cast<int64_t>(indent)) / (f.width() + 2));
      for (int64_t i : kept(axis)) parts.push_back(i < 0 ? " ..." : f.format(values[base + i]));
      std::string out = "[";
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) out += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        out += parts[k];
      }
      return out + "]";
    }
    for (int64_t i : kept(axis))
      parts.push_back(i < 0 ? "..." : print(axis + 1, base + i * strides[axis], indent + 1, f));
    const std::string separator =
        "," + std::string(dims_left - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    for (size_t k = 0; k < parts.size(); ++k) out += (k > 0 ? separator : "") + parts[k];
    return out + "]";
  }
};

std::string python_tuple(const Shape& shape) {
  std::string out = "(";
  for (size_t k = 0; k < shape.size(); ++k) out += (k > 0 ? ", " : "") + std::to_string(shape[k]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

std::string to_string(const Tensor& t, const PrintOptions& options) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const size_t indent = prefix.size();
  const std::vector<double> values = t.to_vector();
  const Shape& shape = t.shape();
  std::vector<std::string> suffixes;
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + python_tuple(shape));
  } else {
    Printer printer{values, shape, contiguous_strides(shape), t.numel() > options.threshold,
                    options};
    std::vector<double> shown;
    if (shape.empty())
      shown = values;
    else
      printer.collect(0, 0, shown);
    Formatter f(shown, t.dtype(), options.precision);
    body = shape.empty() ? f.format(values[0]) : printer.print(0, 0, indent, f);
  }
  if (t.dtype() != DType::f32 && t.dtype() != DType::i64 && t.dtype() != DType::b8)
    suffixes.push_back(std::string("dtype=") + dtype_name(t.dtype()));
  if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  // torch's _add_suffixes: a suffix that would pass the line width goes on its own line.
  std::string out = prefix + body;
  const size_t newline = out.rfind('\n');  // torch counts from rfind's -1 when there is none
  size_t last_line = out.size() + 1 - (newline == std::string::npos ? size_t{0} - 1 : newline);
  for (const std::string& suffix : suffixes) {
    if (last_line + suffix.size() + 2 > static_cast<size_t>(options.linewidth)) {
      out += ",\n" + std::string(indent, ' ') + suffix;
      last_line = indent + suffix.size();
    } else {
      out += ", " + suffix;
      last_line += suffix.size() + 2;
    }
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << to_string(t); }

}  // namespace dg
