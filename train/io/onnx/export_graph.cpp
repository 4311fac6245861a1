// ExportGraph (see export_graph.h): the names, nodes, constants and dynamic dims of the graph the
// exporter builds.
#include "train/io/onnx/export_graph.h"

#include <fmt/format.h>

#include "train/io/onnx/tensors.h"

namespace dg::onnx {

AttributeProto attr(const std::string& name, int64_t value) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::i;
  a.i_value = value;
  return a;
}
AttributeProto attr(const std::string& name, double value) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::f;
  a.f_value = static_cast<float>(value);
  return a;
}
AttributeProto attr(const std::string& name, std::vector<int64_t> values) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::ints;
  a.ints_value = std::move(values);
  return a;
}
AttributeProto attr(const std::string& name, std::vector<float> values) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::floats;
  a.floats_value = std::move(values);
  return a;
}
AttributeProto attr(const std::string& name, const std::string& value) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::s;
  a.s_value = value;
  return a;
}
AttributeProto attr(const std::string& name, const TensorProto& value) {
  AttributeProto a;
  a.name = name;
  a.type = AttributeProto::t;
  a.t_value = {value};
  return a;
}

std::string ExportGraph::fresh(const std::string& hint) {
  int& n = used_[hint];
  return fmt::format("{}_{}", hint, n++);
}

std::string ExportGraph::value(const Tensor& t) {
  if (!t.defined()) throw std::logic_error("onnx export: an op read an undefined tensor");
  const auto it = names_.find(t.impl());
  if (it != names_.end()) return it->second;
  const auto weight = weights_.find(t.impl());
  if (weight != weights_.end()) {
    initializers_.push_back(to_tensor_proto(weight->second.first, t));
    return names_[t.impl()] = weight->second.first;
  }
  const auto recorded = recorded_by_.find(t.impl());
  if (recorded != recorded_by_.end() || recorded_op(t)) {
    const std::string op = recorded != recorded_by_.end() ? recorded->second->op : recorded_op(t);
    const std::string where = recorded != recorded_by_.end() ? recorded->second->module_path : "";
    throw OnnxError(fmt::format(
        "onnx export: op '{}'{} has no ONNX mapping (it made {} on the way to the outputs)", op,
        where.empty() ? std::string() : fmt::format(" in module '{}'", where), t.describe()));
  }
  const std::string positions = positions_of(t);
  if (!positions.empty()) return names_[t.impl()] = positions;
  return constant(t, "constant");
}

// A constant 0, 1, ..., n-1 (integer positions; any shape with one axis of n, [T] or [1, T])
// whose n is a dynamic dim of a graph input, as ONNX's Range over that dim: the positions a
// sequence model builds from a vector follow the sequence length of the input it runs on. "" when
// t is not such a constant.
std::string ExportGraph::positions_of(const Tensor& t) {
  if (is_floating(t.dtype()) || t.dtype() == DType::b8 || t.numel() < 2) return "";
  int64_t axis = -1;
  for (int64_t k = 0; k < t.dim(); ++k)
    if (t.size(k) != 1) axis = axis < 0 ? k : -2;
  if (axis < 0) return "";
  const std::vector<double> v = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<double>(i)) return "";
  for (const Tensor& input : inputs_) {
    const std::vector<std::string> d = dims(input);
    for (int64_t k = 0; k < input.dim(); ++k) {
      if (d[size_t(k)].empty() || input.size(k) != t.numel()) continue;
      const std::string shape = op("Shape", {names_.at(input.impl())});
      const std::string n =
          op("Gather", {shape, constant_ints({k}, true)}, {attr("axis", int64_t{0})});
      std::string range = op("Range", {constant_ints({0}, true), n, constant_ints({1}, true)});
      if (t.dtype() != DType::i64)
        range = op("Cast", {range}, {attr("to", int64_t{elem_type_of(t.dtype())})});
      std::vector<int64_t> target(static_cast<size_t>(t.dim()), 1);
      target[size_t(axis)] = -1;
      if (t.dim() != 1) range = op("Reshape", {range, constant_ints(target)});
      std::vector<std::string> t_dims(static_cast<size_t>(t.dim()));
      t_dims[size_t(axis)] = d[size_t(k)];
      set_dims(t, t_dims);
      return range;
    }
  }
  return "";
}

void ExportGraph::set_recorded(std::vector<TracedOp> recorded) {
  recorded_ = std::move(recorded);
  for (const TracedOp& op : recorded_)
    if (!op.outputs.empty() && op.outputs[0].defined()) recorded_by_[op.outputs[0].impl()] = &op;
}

std::string ExportGraph::output(const Tensor& t) {
  held_.push_back(t);
  const std::string name = fresh(current_ ? current_->op : std::string("value"));
  names_[t.impl()] = name;
  return name;
}

std::string ExportGraph::constant(const Tensor& t, const std::string& hint) {
  held_.push_back(t);
  const std::string name = fresh(hint);
  initializers_.push_back(to_tensor_proto(name, t));
  names_[t.impl()] = name;
  return name;
}

std::string ExportGraph::constant_ints(const std::vector<int64_t>& values, bool scalar) {
  const std::string name = fresh("ints");
  TensorProto p;
  p.name = name;
  if (!scalar) p.dims = {static_cast<int64_t>(values.size())};
  p.data_type = static_cast<int32_t>(ElemType::int64);
  p.raw_data.assign(reinterpret_cast<const char*>(values.data()), values.size() * 8);
  initializers_.push_back(std::move(p));
  return name;
}

std::string ExportGraph::constant_scalar(double value, DType dtype) {
  const std::string name = fresh("scalar");
  initializers_.push_back(to_tensor_proto(name, Tensor::full({}, value, dtype)));
  return name;
}

std::string ExportGraph::node(const std::string& op_type, std::vector<std::string> inputs,
                              std::vector<std::string> outputs,
                              std::vector<AttributeProto> attributes) {
  NodeProto n;
  const std::string where = current_ && !current_->module_path.empty()
                                ? "/" + current_->module_path + "/"
                                : std::string("/");
  n.name = fresh(where + op_type);
  n.op_type = op_type;
  n.input = std::move(inputs);
  n.output = std::move(outputs);
  n.attribute = std::move(attributes);
  nodes_.push_back(std::move(n));
  return nodes_.back().output.at(0);
}

std::string ExportGraph::op(const std::string& op_type, std::vector<std::string> inputs,
                            std::vector<AttributeProto> attributes) {
  return node(op_type, std::move(inputs), {fresh(op_type)}, std::move(attributes));
}

std::vector<std::string> ExportGraph::dims(const Tensor& t) const {
  const auto it = dims_.find(t.impl());
  if (it != dims_.end()) return it->second;
  return std::vector<std::string>(static_cast<size_t>(t.dim()));
}
void ExportGraph::set_dims(const Tensor& t, std::vector<std::string> dims) {
  if (static_cast<int64_t>(dims.size()) != t.dim())
    throw std::logic_error(
        fmt::format("onnx export: {} dims given for {}", dims.size(), t.describe()));
  held_.push_back(t);
  dims_[t.impl()] = std::move(dims);
}
bool ExportGraph::has_dims(const Tensor& t) const { return dims_.count(t.impl()) != 0; }
bool ExportGraph::any_dynamic(const Tensor& t) const {
  for (const std::string& d : dims(t))
    if (!d.empty()) return true;
  return false;
}

std::vector<int64_t> ExportGraph::reshape_target(const Tensor& input, const Tensor& output) {
  const std::vector<std::string> in = dims(input);
  const Shape& shape = output.shape();
  std::vector<int64_t> target(shape.begin(), shape.end());
  std::vector<std::string> out(shape.size());
  std::string merged;  // the dynamic dims of the input not kept in place
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].empty()) continue;
    if (k < shape.size() && shape[k] == input.size(static_cast<int64_t>(k))) {
      target[k] = 0;  // ONNX Reshape: copy the input's dim
      out[k] = in[k];
    } else {
      merged += (merged.empty() ? "" : "*") + in[k];
    }
  }
  if (!merged.empty()) {
    // The dynamic dims that moved go into the one output dim a multiple of their sizes: -1.
    int64_t free_at = -1;
    for (size_t k = 0; k < shape.size(); ++k)
      if (target[k] != 0 && free_at < 0) {
        int64_t product = 1;
        for (size_t j = 0; j < in.size(); ++j)
          if (!in[j].empty() && !(j < shape.size() && target[j] == 0))
            product *= input.size(static_cast<int64_t>(j));
        if (product != 0 && shape[k] % product == 0) free_at = static_cast<int64_t>(k);
      }
    if (free_at < 0)
      throw OnnxError(fmt::format(
          "onnx export: a reshape of {} to {} spreads its dynamic dims ({}) over several dims; "
          "ONNX's Reshape can infer one",
          input.describe(), shape_str(shape), merged));
    target[static_cast<size_t>(free_at)] = -1;
    out[static_cast<size_t>(free_at)] = merged;
  }
  set_dims(output, std::move(out));
  return target;
}

}  // namespace dg::onnx
