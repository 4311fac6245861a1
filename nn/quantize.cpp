// Quantized storage of Linears' frozen weights (see quantize.h).
#include "nn/quantize.h"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

namespace dg {

void quantize_linear(Linear& layer, QuantFormat format) {
  if (layer.quantized_weight)
    throw std::logic_error(fmt::format("quantize_linear: Linear '{}' is already quantized ({})",
                                       layer.path(),
                                       quant_format_name(layer.quantized_weight->format)));
  if (!layer.weight.defined() || layer.weight.dtype() != DType::f32)
    throw std::invalid_argument(
        fmt::format("quantize_linear: Linear '{}' needs a float32 weight to quantize, got {}",
                    layer.path(), layer.weight.defined() ? layer.weight.describe() : "none"));
  auto q = std::make_shared<QuantizedMatrix>(quantize_matrix(layer.weight, format));
  layer.unregister_parameter("weight");  // refuses while flat buffers hold it: nothing changed yet
  layer.weight = Tensor();
  if (format == QuantFormat::int8) {
    layer.register_buffer("weight_int8", q->values);
    layer.register_buffer("weight_scale", q->scales);
  } else {
    layer.register_buffer("weight_bf16", q->values);
  }
  layer.quantized_weight = std::move(q);
}

int64_t quantize_frozen(Module& root, QuantFormat format, const LinearFilter& which) {
  int64_t count = 0;
  const std::function<void(Module&, const std::string&)> walk = [&](Module& m,
                                                                    const std::string& path) {
    if (auto* layer = dynamic_cast<Linear*>(&m);
        layer && !layer->quantized_weight && (!which || which(path, *layer))) {
      quantize_linear(*layer, format);
      ++count;
    }
    for (auto& [name, child] : m.named_children())
      walk(*child, path.empty() ? name : path + "." + name);
  };
  walk(root, "");
  return count;
}

int64_t stored_bytes(const Module& root) {
  int64_t bytes = 0;
  for (const auto& [name, t] : root.state_dict())
    bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  return bytes;
}

}  // namespace dg
