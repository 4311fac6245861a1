// The ONNX mappings of the recurrent layers, attention and the norms (placeholder table).
#include "train/io/onnx/export_graph.h"

namespace dg::onnx {
std::vector<OpExporterEntry> sequence_op_exporters() { return {}; }
}  // namespace dg::onnx
