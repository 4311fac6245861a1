// The language model as an ONNX file (see export_onnx.h).
#include "train/lm/export_onnx.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "train/io/onnx/export.h"

namespace dg {

void export_lm_onnx(MicroLM& model, const std::string& path, const LmOnnxOptions& options) {
  const MicroLMConfig& config = model.config();
  const int64_t T = options.sequence == 0 ? config.seq_len : options.sequence;
  if (T < 1 || T > config.seq_len)
    throw std::invalid_argument(fmt::format(
        "onnx export: sequence {} is outside 1..{} (the model's seq_len)", T, config.seq_len));
  // A batch of 2 (3 when the sequence is 2: the exporter tells dims apart by size).
  const int64_t B = T == 2 ? 3 : 2;
  std::vector<int64_t> ids(static_cast<size_t>(B * T));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 + 1) % config.vocab;
  onnx::ExportOptions o;
  o.opset = options.opset;
  o.input_names = {"input_ids"};
  o.output_names = {"logits"};
  std::map<int64_t, std::string> axes = {{0, "batch"}};
  if (options.dynamic_sequence) axes[1] = "sequence";
  o.dynamic_axes = {{"input_ids", axes}, {"logits", axes}};
  onnx::export_model(
      model,
      [&model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.forward(in[0])}; },
      {Tensor::from_ids(ids, {B, T})}, path, o);
}

}  // namespace dg
