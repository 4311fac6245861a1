// The autograd tape (see tape.h for the contract).
#include "autograd/tape.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "tensor/kernels_elementwise.h"
#include "tensor/kernels_matmul.h"  // add_strided
#include "tensor/profile.h"

namespace dg {

namespace {
struct Node {
  const char* op;
  std::vector<Tensor> inputs;
  Tensor output;
  BackwardFn backward;
  OpFamily family;  // the op family its forward was timed under (tensor/profile.h)
};

thread_local bool g_grad_enabled = true;
thread_local std::vector<Node> g_tape;
// The storage of the running node's output gradient while backward() runs that node, when the
// tape drops that gradient afterwards (not retained); null otherwise. See adoptable().
thread_local const Storage* g_node_grad_storage = nullptr;

// True when `g` may become input's gradient buffer as it is: right shape and dtype, contiguous,
// and no other live tensor reads or writes its storage later. That holds when g is the only
// handle to its metadata and either the only holder of its storage (a temporary made by the
// backward, or the node's gradient itself) or a view sharing it only with the running node's
// gradient, which the tape drops when the node returns (reshape's backward).
bool adoptable(const Tensor& input, const Tensor& g) {
  if (g.shape() != input.shape() || g.dtype() != input.dtype() || !g.is_contiguous()) return false;
  if (g.handle_count() != 1) return false;
  const long holders = g.storage_holders();
  if (holders == 1) return true;
  return holders == 2 && g_node_grad_storage == g.storage().get();
}
// ---- planted errors: the gradient checks' teeth (tools/gradcheck_teeth.sh) -----------------
// DG_PLANT_ERROR=<op> makes every backward of the ops named <op> wrong by 1% in one element: the
// element of its contribution to its first floating input's gradient with the largest magnitude
// is scaled by 1.01. <op>:f32 plants only in float32 backwards (what the float32-vs-float64
// gradient comparison must catch); "list" prints each op name the first time its backward runs.
// Read once; unset (always, outside that script) it costs one predictable branch per backward().
struct Plant {
  std::string op;
  bool f32_only = false, list = false;
};

const Plant* plant_from_env() {
  static const Plant* plant = []() -> const Plant* {
    const char* value = std::getenv("DG_PLANT_ERROR");
    if (!value || !*value) return nullptr;
    auto* p = new Plant;  // lives as long as the program
    p->op = value;
    if (p->op == "list") p->list = true;
    if (p->op.size() > 4 && p->op.compare(p->op.size() - 4, 4, ":f32") == 0) {
      p->f32_only = true;
      p->op.resize(p->op.size() - 4);
    }
    return p;
  }();
  return plant;
}

// The input whose gradient the plant changes: the first floating one that requires grad.
int planted_input(const Node& node, const Plant& plant) {
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const Tensor& in = node.inputs[k];
    if (in.defined() && in.requires_grad() && is_floating(in.dtype()) &&
        (!plant.f32_only || in.dtype() == DType::f32))
      return static_cast<int>(k);
  }
  return -1;
}

// The values of a gradient (zeros when undefined), as doubles.
std::vector<double> gradient_values(const Tensor& in) {
  std::vector<double> out(static_cast<size_t>(in.numel()), 0.0);
  const Tensor& g = in.impl()->grad;
  if (!g.defined()) return out;
  NoGradGuard no_grad;  // nothing may be recorded while the tape is walked
  Tensor c = g.to(DType::f64).contiguous();
  const double* p = c.data<double>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  return out;
}

// Adds 1% of the largest element of this node's contribution (after - before) to the gradient.
void plant_error(const Tensor& in, const std::vector<double>& before) {
  const Tensor& g = in.impl()->grad;
  if (!g.defined() || !g.is_contiguous()) return;
  const std::vector<double> after = gradient_values(in);
  size_t at = 0;
  for (size_t i = 0; i < after.size(); ++i)
    if (std::fabs(after[i] - before[i]) > std::fabs(after[at] - before[at])) at = i;
  const double error = 0.01 * (after[at] - before[at]);
  if (g.dtype() == DType::f32)
    g.data<float>()[at] += static_cast<float>(error);
  else
    g.data<double>()[at] += error;
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(const char* op, std::vector<Tensor> inputs, Tensor& output, BackwardFn backward) {
  if (!backward)
    throw std::logic_error(
        fmt::format("autograd: op '{}' has no backward and cannot be recorded", op));
  output.impl()->requires_grad = true;
  output.impl()->is_leaf = false;
  g_tape.push_back(Node{op, std::move(inputs), output, std::move(backward), current_op_family()});
}

Tensor grad_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl->grad.defined()) impl->grad = Tensor::zeros(impl->shape, impl->dtype);
  return impl->grad;
}

void accumulate_grad(const Tensor& input, const Tensor& g) {
  TensorImpl* impl = input.impl();
  if (!impl->grad.defined() && adoptable(input, g)) {
    impl->grad = g;
    // The running node's gradient buffer is given away at most once: a later view of it (or the
    // gradient itself) must not become a second input's gradient over the same memory.
    if (g.storage().get() == g_node_grad_storage) g_node_grad_storage = nullptr;
    return;
  }
  Tensor target = grad_of(input);
  if (target.is_contiguous()) {
    add_reduced_into(target, g);
    return;
  }
  // rule 3: a strided gradient installed by set_grad: reduce g to input's shape, then add
  Tensor reduced = Tensor::zeros(input.shape(), input.dtype());
  add_reduced_into(reduced, g);
  add_strided(target, reduced);
}

GradSink::GradSink(const Tensor& t, const std::vector<Tensor>& others) : input(t) {
  bool aliased = false;
  for (const Tensor& o : others) aliased = aliased || (o.same(t) && o.requires_grad());
  TensorImpl* impl = t.impl();
  if (!aliased && !impl->grad.defined()) {  // rule 1: a new buffer, the input's own, written
    impl->grad = Tensor::empty(impl->shape, impl->dtype);
    buffer = impl->grad;
    fresh = true;
  } else if (!aliased && impl->grad.is_contiguous()) {  // an existing gradient: added into
    buffer = impl->grad;
  } else {  // rules 2 and 3: aliased, or a strided gradient installed by set_grad
    buffer = Tensor::empty(t.shape(), t.dtype());
    direct = false;
    fresh = true;
  }
}

void GradSink::zero_if_fresh() {
  if (fresh) buffer.fill(0.0);
  fresh = false;
}

void GradSink::finish() const {
  if (!direct) accumulate_grad(input, buffer);
}

void retain_grad(const Tensor& t) { t.impl()->retain_grad = true; }

void backward(const Tensor& root, const Tensor& grad_root, bool keep_graph) {
  if (!root.requires_grad())
    throw std::invalid_argument(fmt::format(
        "backward: tensor {} does not require grad (no recorded op produced it from a tensor "
        "that requires grad)",
        root.describe()));
  if (grad_root.defined()) {
    if (grad_root.shape() != root.shape())
      throw std::invalid_argument(fmt::format("backward: gradient {} does not match root {}",
                                              grad_root.describe(), root.describe()));
    // A copy: the caller keeps grad_root, so it must never become a buffer the walk adds into.
    accumulate_grad(root, grad_root.clone());
  } else {
    if (root.numel() != 1)
      throw std::invalid_argument(fmt::format(
          "backward: root {} has more than one element; pass its gradient", root.describe()));
    accumulate_grad(root, Tensor::ones(root.shape(), root.dtype()));
  }
  // Without keep_graph each node is released as soon as the walk has passed it, so the buffers
  // it saved for backward return to the storage cache while later nodes' gradients are made.
  auto release = [keep_graph](Node& node) {
    if (!keep_graph) node = Node{node.op, {}, Tensor(), nullptr, node.family};
  };
  const Plant* plant = plant_from_env();
  for (size_t i = g_tape.size(); i-- > 0;) {
    Node& node = g_tape[i];
    TensorImpl* out = node.output.impl();
    if (!out || !out->grad.defined()) {
      release(node);
      continue;
    }
    int plant_at = -1;
    std::vector<double> plant_before;
    if (plant) [[unlikely]] {
      static std::set<std::string> listed;
      if (plant->list && listed.insert(node.op).second) fmt::print(stderr, "op {}\n", node.op);
      if (plant->op == node.op) plant_at = planted_input(node, *plant);
      if (plant_at >= 0) plant_before = gradient_values(node.inputs[plant_at]);
    }
    Tensor grad_output = out->grad;
    if (!out->retain_grad) out->grad = Tensor();
    {
      ScopedOpTimer timer(node.family);
      g_node_grad_storage = out->retain_grad ? nullptr : grad_output.storage().get();
      try {
        node.backward(grad_output);
      } catch (...) {
        g_node_grad_storage = nullptr;
        throw;
      }
      g_node_grad_storage = nullptr;
    }
    if (plant_at >= 0) [[unlikely]]
      plant_error(node.inputs[plant_at], plant_before);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Tensor& in = node.inputs[k];
      if (!in.defined() || !in.impl()->grad.defined()) continue;
      const Tensor& g = in.impl()->grad;
      if (g.shape() != in.shape() || g.dtype() != in.dtype())
        throw std::logic_error(
            fmt::format("autograd: backward of '{}' produced gradient {} for input {} of {}",
                        node.op, g.describe(), k, in.describe()));
    }
    release(node);
  }
  if (!keep_graph) g_tape.clear();
}

void clear_tape() { g_tape.clear(); }
size_t tape_size() { return g_tape.size(); }

}  // namespace dg
