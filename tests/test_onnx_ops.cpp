// The importer's ops (train/io/onnx/import_ops.h) against ONNX Runtime, one graph output per case:
// tests/data/onnx/op_cases.onnx (opset 17) and op_cases18.onnx (opset 18), with ONNX Runtime's
// outputs in tests/onnx_op_cases.h (all made by tools/onnx_op_cases.py): settings
// torch.onnx.export does not write (asymmetric pads, auto_pad, a reverse LSTM, a GRU without bias,
// exclusive reverse CumSum, negative Slice steps, integer shape arithmetic, Pad modes, opset 18's
// axes inputs...). Floating outputs within 1e-5 of each output's largest value, integer and bool
// outputs exactly; every case's output has ONNX Runtime's shape.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "tests/onnx_op_cases.h"
#include "train/io/onnx/import.h"
#include "train/io/onnx/import_ops.h"

using namespace dg;

namespace {

// Runs `file` on the cases' inputs and compares every output with ONNX Runtime's.
void check_cases(const std::string& file, const std::vector<OnnxOpCase>& expected) {
  auto model = onnx::load(std::string(DG_SOURCE_DIR) + "/tests/data/onnx/" + file);
  std::vector<Tensor> inputs;
  for (const OnnxOpCase& in : onnx_op_case_inputs()) {
    CHECK(in.name == model->input_names()[inputs.size()]);
    inputs.push_back(Tensor::from_vector(in.values, in.shape, DType::f32));
  }
  const std::vector<Tensor> outputs = model->run(inputs);
  std::map<std::string, Tensor> by_name;
  for (size_t k = 0; k < outputs.size(); ++k) by_name[model->output_names()[k]] = outputs[k];
  CHECK(by_name.size() == expected.size());
  for (const OnnxOpCase& want : expected) {
    CAPTURE(want.name);
    REQUIRE(by_name.count(want.name) == 1);
    const Tensor& got = by_name[want.name];
    CHECK(got.shape() == Shape(want.shape));
    const std::vector<double> values = got.contiguous().to_vector();
    REQUIRE(values.size() == want.values.size());
    if (!is_floating(got.dtype())) {
      CHECK(values == want.values);
      continue;
    }
    double worst = 0, scale = 1e-30;
    for (size_t k = 0; k < values.size(); ++k) {
      worst = std::max(worst, std::abs(values[k] - want.values[k]));
      scale = std::max(scale, std::abs(want.values[k]));
    }
    CHECK(worst / scale <= 1e-5);
  }
}

}  // namespace

TEST_CASE("every op case gives ONNX Runtime's output (opset 17)") {
  check_cases("op_cases.onnx", onnx_op_case_outputs());
}

TEST_CASE(
    "opset 18's forms give ONNX Runtime's output (Reduce* axes inputs, num_outputs, Pad axes)") {
  auto model = onnx::load(std::string(DG_SOURCE_DIR) + "/tests/data/onnx/op_cases18.onnx");
  CHECK(model->opset() == 18);
  check_cases("op_cases18.onnx", onnx_op_case18_outputs());
}

TEST_CASE("the op table: every row's attributes have known types and every op one row") {
  std::set<std::string> ops;
  for (const auto* family : {&onnx::elementwise_ops(), &onnx::shape_ops(), &onnx::nn_ops()})
    for (const onnx::OpSpec& spec : *family) {
      CAPTURE(spec.op_type);
      CHECK_NOTHROW(onnx::spec_attributes(spec));
      CHECK(ops.insert(spec.op_type).second);
      CHECK(onnx::find_op(spec.op_type) == &spec);
      CHECK(spec.min_inputs <= spec.max_inputs);
      CHECK(spec.max_outputs >= 1);
    }
  CHECK(ops.size() >= 88);  // the table as written (train/README.md lists them)
  CHECK(onnx::find_op("Mish") == nullptr);
  const onnx::OpSpec misspelt{"Fake", 1, 1, 1, "axis:int", nullptr};
  CHECK_THROWS_WITH_AS(onnx::spec_attributes(misspelt),
                       "the importer's row of Fake lists attribute 'axis:int' without a known type",
                       std::logic_error);
}
