// The op trace (see op_trace.h): one list per thread, filled by the ops while an OpTrace lives.
#include "autograd/op_trace.h"

#include <stdexcept>

namespace dg {

namespace detail {
thread_local constinit OpTrace* active_trace = nullptr;
}

OpTrace::OpTrace() {
  if (detail::active_trace)
    throw std::logic_error("OpTrace: this thread is already tracing (traces do not nest)");
  detail::active_trace = this;
}
OpTrace::~OpTrace() { detail::active_trace = nullptr; }

void trace_op(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
              std::vector<TraceAttribute> attributes) {
  OpTrace* trace = detail::active_trace;
  if (!trace) return;
  trace->ops_.push_back(TracedOp{op, std::move(inputs), std::move(outputs), std::move(attributes),
                                 current_module_path()});
}

void trace_recorded(const char* op, const Tensor& output) {
  OpTrace* trace = detail::active_trace;
  if (trace) trace->recorded_.push_back(TracedOp{op, {}, {output}, {}, current_module_path()});
}

const TraceAttribute& TracedOp::attribute(const std::string& name) const {
  for (const TraceAttribute& a : attributes)
    if (a.name == name) return a;
  throw std::out_of_range("traced op '" + op + "' has no attribute '" + name + "'");
}
bool TracedOp::has(const std::string& name) const {
  for (const TraceAttribute& a : attributes)
    if (a.name == name) return true;
  return false;
}

}  // namespace dg
