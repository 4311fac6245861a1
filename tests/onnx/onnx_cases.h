// ONNX test cases for real clients: a model file, the inputs to run it on and the outputs
// depthgrad computed for them, written so that a program outside depthgrad (ONNX Runtime under
// node: tests/onnx/run_onnxruntime.js; the onnx checker: tests/onnx/check_onnx.py) can run the
// model and compare. Test code only (header-only: built into the test programs that include it);
// it neither runs a model nor writes one.
//
//   dg::onnx_cases::write_onnx_case(dir, "mlp", "mlp.onnx", {{"x", x}}, {{"y", y}}, 1e-5,
//                                   {{.inputs = {{"x", x5}}, .outputs = {{"y", y5}}}});
//
// A directory holds one manifest.json listing its cases (a case written again under the same
// name replaces the old entry):
//   {"format": "depthgrad-onnx-cases", "version": 1, "cases": [
//     {"name": "mlp", "model": "mlp.onnx", "tolerance": 1e-05, "runs": [
//       {"inputs":  [{"name": "x", "dtype": "float32", "shape": [2, 4], "file": "mlp.r0.in0.bin"}],
//        "outputs": [{"name": "y", "dtype": "float32", "shape": [2, 3], "file":
//        "mlp.r0.out0.bin"}]},
//       {... the optional second run, another batch size ...}]}]}
// Every file name is relative to the manifest's directory. A .bin file is the tensor's values in
// C (row-major) order as raw little-endian bytes: float32, float64, int32, int64, uint8 and bool
// (one byte, 0 or 1), as dtype_name names them. The tolerance is relative: a client accepts an
// output value a for the expected b when |a - b| <= tolerance * max(1, |b|); integer and bool
// outputs must be equal.
#pragma once
#include <bit>
#include <cctype>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/onnx/tensors.h"

namespace dg::onnx_cases {

static_assert(std::endian::native == std::endian::little,
              "the case files are little-endian: written by copying the tensor's bytes");

struct NamedTensor {
  std::string name;  // the graph input's or output's name in the model
  Tensor value;
};
using NamedTensors = std::vector<NamedTensor>;

// One run of a case's model: its inputs and the outputs expected for them.
struct OnnxCaseRun {
  NamedTensors inputs;
  NamedTensors outputs;
};

namespace detail {

// A case name becomes part of file names: letters, digits, '_', '-' and '.', not starting with '.'.
inline void check_case_name(const std::string& name) {
  bool ok = !name.empty() && name.front() != '.';
  for (char c : name)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  if (!ok)
    throw std::invalid_argument("write_onnx_case: case name '" + name +
                                "' must be letters, digits, '_', '-' or '.' (not first)");
}

// Checks one side of a run (names given, unique, tensors defined).
inline void check_tensors(const std::string& where, const NamedTensors& tensors, bool outputs) {
  if (tensors.empty() && outputs)
    throw std::invalid_argument("write_onnx_case: " + where + " has no outputs to compare");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    const std::string what = where + (outputs ? " output " : " input ") + std::to_string(i);
    if (t.name.empty()) throw std::invalid_argument("write_onnx_case: " + what + " has no name");
    if (!t.value.defined())
      throw std::invalid_argument("write_onnx_case: " + what + " ('" + t.name +
                                  "') is an undefined tensor");
    for (size_t j = 0; j < i; ++j)
      if (tensors[j].name == t.name)
        throw std::invalid_argument("write_onnx_case: " + where + " names '" + t.name + "' twice");
  }
}

// Writes each tensor to <case>.r<run>.<in|out><index>.bin; returns the manifest's list.
inline json::Value write_tensors(const std::string& dir, const std::string& prefix,
                                 const NamedTensors& tensors) {
  json::Array list;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string file = prefix + std::to_string(i) + ".bin";
    const onnx::TensorProto proto = onnx::to_tensor_proto(tensors[i].name, tensors[i].value);
    write_file_atomic(dir + "/" + file, proto.raw_data);
    json::Array shape;
    for (int64_t d : tensors[i].value.shape()) shape.emplace_back(d);
    json::Object entry;
    entry.emplace_back("name", tensors[i].name);
    entry.emplace_back("dtype", dtype_name(tensors[i].value.dtype()));
    entry.emplace_back("shape", std::move(shape));
    entry.emplace_back("file", file);
    list.emplace_back(std::move(entry));
  }
  return list;
}

// The manifest in dir, or an empty one; a file that is not a manifest is an error (never
// overwritten).
inline json::Value read_manifest(const std::string& path) {
  json::Object empty;
  empty.emplace_back("format", "depthgrad-onnx-cases");
  empty.emplace_back("version", 1);
  empty.emplace_back("cases", json::Array{});
  if (!file_exists(path)) return empty;
  json::Value manifest = json::parse(read_file(path), path);
  const json::Value* format = manifest.is_object() ? manifest.find("format") : nullptr;
  const json::Value* cases = manifest.is_object() ? manifest.find("cases") : nullptr;
  if (!format || !format->is_string() || format->as_string() != "depthgrad-onnx-cases" || !cases ||
      !cases->is_array())
    throw std::runtime_error(path + ": not a manifest of ONNX cases (format " +
                             "\"depthgrad-onnx-cases\" with a \"cases\" list)");
  return manifest;
}

}  // namespace detail

// Writes the case's inputs and expected outputs into dir (which must exist and hold model_file)
// and adds the case to dir/manifest.json, replacing a case of the same name. second_batch: the
// same model run at another batch size (a dynamic axis). Throws std::invalid_argument for a bad
// name, tolerance or tensor list, std::runtime_error for a missing model or an unwritable file.
inline void write_onnx_case(const std::string& dir, const std::string& case_name,
                            const std::string& model_file, const NamedTensors& inputs,
                            const NamedTensors& outputs, double tolerance,
                            const std::optional<OnnxCaseRun>& second_batch = std::nullopt) {
  detail::check_case_name(case_name);
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw std::invalid_argument("write_onnx_case: case '" + case_name +
                                "': the tolerance must be positive and finite, got " +
                                std::to_string(tolerance));
  if (!file_exists(dir + "/" + model_file))
    throw std::runtime_error("write_onnx_case: case '" + case_name + "': no model file " + dir +
                             "/" + model_file);
  std::vector<OnnxCaseRun> runs{{inputs, outputs}};
  if (second_batch) runs.push_back(*second_batch);
  for (size_t r = 0; r < runs.size(); ++r) {  // every run checked before any file is written
    const std::string where = "case '" + case_name + "' run " + std::to_string(r);
    detail::check_tensors(where, runs[r].inputs, false);
    detail::check_tensors(where, runs[r].outputs, true);
  }
  json::Array run_list;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string prefix = case_name + ".r" + std::to_string(r) + ".";
    json::Object run;
    run.emplace_back("inputs", detail::write_tensors(dir, prefix + "in", runs[r].inputs));
    run.emplace_back("outputs", detail::write_tensors(dir, prefix + "out", runs[r].outputs));
    run_list.emplace_back(std::move(run));
  }
  json::Object entry;
  entry.emplace_back("name", case_name);
  entry.emplace_back("model", model_file);
  entry.emplace_back("tolerance", tolerance);
  entry.emplace_back("runs", std::move(run_list));

  const std::string manifest_path = dir + "/manifest.json";
  json::Value manifest = detail::read_manifest(manifest_path);
  json::Array& cases = manifest["cases"].as_array();
  bool replaced = false;
  for (json::Value& c : cases)
    if (c.is_object() && c.find("name") && c.at("name") == json::Value(case_name)) {
      c = json::Value(entry);
      replaced = true;
    }
  if (!replaced) cases.emplace_back(std::move(entry));
  write_file_atomic(manifest_path, json::dump(manifest, 1) + "\n");
}

}  // namespace dg::onnx_cases
