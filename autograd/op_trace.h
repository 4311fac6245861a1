// The op trace: while an OpTrace lives on this thread, every op that an exporter can map (the
// ops of autograd/ops.h) appends what it did: its name, every tensor argument (the ones it has
// no gradient for too: embedding's indices, where's condition), its outputs and its settings
// (a convolution's stride, a reshape's shape). torch.jit.trace's role: the ONNX exporter
// (train/io/onnx/export.h) runs a forward under a trace and turns the list into a graph.
//
// An op that calls other ops (flatten calls reshape, an LSTM layer its sequence op) traces after
// them: the reader keeps, for each tensor, the last op that made it, so the outer op wins and the
// inner ones are left unread. With no trace, an op pays one thread-local load and a branch.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

// One setting of a traced op: an integer (a bool is 0/1), a real number, a list of integers, or
// a text.
struct TraceAttribute {
  enum class Kind { integer, real, integers, text };
  std::string name;
  Kind kind = Kind::integer;
  int64_t integer = 0;
  double real = 0;
  std::vector<int64_t> integers;
  std::string text;

  TraceAttribute(std::string n, std::integral auto v)
      : name(std::move(n)), kind(Kind::integer), integer(static_cast<int64_t>(v)) {}
  TraceAttribute(std::string n, double v) : name(std::move(n)), kind(Kind::real), real(v) {}
  TraceAttribute(std::string n, std::vector<int64_t> v)
      : name(std::move(n)), kind(Kind::integers), integers(std::move(v)) {}
  TraceAttribute(std::string n, std::string v)
      : name(std::move(n)), kind(Kind::text), text(std::move(v)) {}
  TraceAttribute(std::string n, const char* v) : TraceAttribute(std::move(n), std::string(v)) {}
};

struct TracedOp {
  std::string op;               // the op's name in depthgrad ("conv2d", "reshape")
  std::vector<Tensor> inputs;   // every tensor argument in the op's order; undefined: not given
  std::vector<Tensor> outputs;  // what it returned
  std::vector<TraceAttribute> attributes;
  std::string module_path;  // the innermost module forward it ran in ("" outside any)

  // The attribute named `name`; throws std::out_of_range naming the op and the attribute.
  const TraceAttribute& attribute(const std::string& name) const;
  bool has(const std::string& name) const;
};

// Traces the ops run on this thread for its lifetime (traces do not nest: a second one throws).
// The tensors listed are held, so their identity (impl()) names them while the trace lives.
class OpTrace {
 public:
  OpTrace();
  ~OpTrace();
  OpTrace(const OpTrace&) = delete;
  OpTrace& operator=(const OpTrace&) = delete;
  const std::vector<TracedOp>& ops() const { return ops_; }
  // Every op recorded on the tape while the trace lived (autograd/tape.h's record() notes them),
  // with its output and the module it ran in: an exporter names an op that was recorded but not
  // traced, and where it ran.
  const std::vector<TracedOp>& recorded() const { return recorded_; }

 private:
  friend void trace_op(const char*, std::vector<Tensor>, std::vector<Tensor>,
                       std::vector<TraceAttribute>);
  friend void trace_recorded(const char*, const Tensor&);
  std::vector<TracedOp> ops_;
  std::vector<TracedOp> recorded_;
};

namespace detail {
extern thread_local constinit OpTrace* active_trace;
}
inline bool tracing() { return detail::active_trace != nullptr; }

// Appends one op to this thread's trace (nothing without one). Ops call it as
//   if (tracing()) trace_op("conv2d", {x, weight, bias}, {y}, {{"stride", stride}});
void trace_op(const char* op, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
              std::vector<TraceAttribute> attributes = {});

// Notes an op recorded on the tape (record() calls it while a trace lives).
void trace_recorded(const char* op, const Tensor& output);

// The innermost module forward running now ("" outside any): what the trace and error messages
// name. Defined with CreationScope (autograd/tape_anomaly.cpp).
std::string current_module_path();

}  // namespace dg
