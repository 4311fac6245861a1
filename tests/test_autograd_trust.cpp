// What makes autograd trustworthy, one behaviour per test: module forward hooks (feature
// extraction, replaced inputs and outputs, order, removal, paths), tensor gradient hooks, misuse
// refused with one line naming the tensor, the version check of every in-place path, and anomaly
// mode naming the op and the module, directly and through the Trainer.
// The ops' own gradients are checked elsewhere (tests/test_gradcheck_ops.cpp).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"  // random_tensor
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/lm/micro_lm.h"
#include "tensor/factory.h"
#include "train/dataset.h"
#include "train/optim.h"
#include "train/trainer.h"
#include "train/training_config.h"

using namespace dg;

namespace {

// A small MLP 3 → 4 → 2 (tanh between), float64, the same weights for the same seed.
std::unique_ptr<Sequential> small_mlp(uint64_t seed) {
  TorchGenerator saved = default_generator();
  manual_seed(seed);
  auto net = std::make_unique<Sequential>(DType::f64);
  net->add(std::make_unique<Linear>(3, 4, true, DType::f64));
  net->add(dg::tanh);
  net->add(std::make_unique<Linear>(4, 2, true, DType::f64));
  default_generator() = saved;
  return net;
}

Tensor input(uint64_t seed, const Shape& shape = {5, 3}) {
  TorchGenerator g(seed);
  return randn(shape, DType::f64, &g);
}

double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// The message of what `f` throws ("" when it does not throw).
template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---- module forward hooks -------------------------------------------------------------------

TEST_CASE("a forward hook captures an inner layer's activations (feature extraction)") {
  auto net = small_mlp(1);
  Linear& first = net->at<Linear>(0);
  Tensor captured;
  HookHandle h = first.register_forward_hook(
      [&](const Module& m, const std::vector<Tensor>& in, const Tensor& out) {
        CHECK(&m == &first);
        REQUIRE(in.size() == 1);
        captured = detach(out);
        return Tensor();  // keep the output
      });
  const Tensor x = input(2);
  const Tensor y = net->forward(x);
  REQUIRE(captured.defined());
  CHECK(captured.shape() == Shape{5, 4});
  CHECK(max_diff(captured, linear(x, first.weight, first.bias)) == 0);
  // The output is unchanged by a hook that returns nothing.
  h.remove();
  CHECK(max_diff(y, net->forward(x)) == 0);
}

TEST_CASE("a forward pre-hook replaces the input; the gradient reaches the original input") {
  auto net = small_mlp(3);
  Linear& first = net->at<Linear>(0);
  first.register_forward_pre_hook(
      [](const Module&, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{scale(in[0], 2.0)};
      });
  Tensor x = input(4);
  x.set_requires_grad(true);
  const Tensor y = net->forward(x);
  Tensor x2 = scale(detach(x), 2.0);
  auto plain = small_mlp(3);
  CHECK(max_diff(y, plain->forward(x2)) < 1e-15);
  backward(sum(y));
  x2.set_requires_grad(true);
  backward(sum(plain->forward(x2)));
  CHECK(max_diff(x.grad(), scale(x2.grad(), 2.0)) < 1e-14);  // d(2x)/dx = 2
}

TEST_CASE("a pre-hook returning the wrong number of inputs is refused naming the module") {
  auto net = small_mlp(3);
  net->at<Linear>(2).register_forward_pre_hook(
      [](const Module&, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        return std::vector<Tensor>{};
      });
  const std::string message = thrown([&] { net->forward(input(1)); });
  CHECK(message.find("module '2'") != std::string::npos);
  CHECK(message.find("returned 0 inputs, the forward takes 1") != std::string::npos);
}

TEST_CASE("a forward hook replaces the output (pruning) and the gradient follows it") {
  auto net = small_mlp(5);
  Linear& first = net->at<Linear>(0);
  // Prune hidden unit 1: its activation is zero, so its weights get no gradient.
  const Tensor mask = Tensor::from_vector(std::vector<double>{1, 0, 1, 1}, {4}, DType::f64);
  first.register_forward_hook(
      [&](const Module&, const std::vector<Tensor>&, const Tensor& out) { return mul(out, mask); });
  const Tensor x = input(6);
  backward(sum(net->forward(x)));
  const Tensor gw = first.weight.grad(), gb = first.bias.grad();
  for (int64_t j = 0; j < 3; ++j) CHECK(gw.at({1, j}) == 0.0);
  CHECK(gb.at({1}) == 0.0);
  // The same as writing the pruning into the forward by hand.
  auto plain = small_mlp(5);
  Linear& p0 = plain->at<Linear>(0);
  Linear& p2 = plain->at<Linear>(2);
  backward(sum(p2.forward(dg::tanh(mul(p0.forward(x), mask)))));
  CHECK(max_diff(gw, p0.weight.grad()) < 1e-14);
  CHECK(max_diff(net->at<Linear>(2).weight.grad(), p2.weight.grad()) < 1e-14);
}

TEST_CASE("several hooks run in registration order, each on the previous one's result") {
  auto net = small_mlp(7);
  Linear& layer = net->at<Linear>(2);
  std::vector<std::string> calls;
  auto pre = [&](const char* name, double factor) {
    return [&calls, name, factor](
               const Module&, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
      calls.push_back(name);
      return std::vector<Tensor>{scale(in[0], factor)};
    };
  };
  auto post = [&](const char* name, double shift) {
    return [&calls, name, shift](const Module&, const std::vector<Tensor>&, const Tensor& out) {
      calls.push_back(name);
      return add_scalar(out, shift);
    };
  };
  layer.register_forward_hook(post("post1", 1.0));
  layer.register_forward_pre_hook(pre("pre1", 2.0));
  layer.register_forward_hook(post("post2", 10.0));
  layer.register_forward_pre_hook(pre("pre2", 3.0));
  Tensor seen_input;
  layer.register_forward_hook([&](const Module&, const std::vector<Tensor>& in, const Tensor&) {
    seen_input = in[0];  // the post-hooks see the inputs the pre-hooks left
    return Tensor();
  });
  const Tensor h = input(8, {2, 4});
  const Tensor y = layer.forward(h);
  CHECK(calls == std::vector<std::string>{"pre1", "pre2", "post1", "post2"});
  CHECK(max_diff(seen_input, scale(h, 6.0)) < 1e-15);
  CHECK(max_diff(y, add_scalar(linear(scale(h, 6.0), layer.weight, layer.bias), 11.0)) < 1e-13);
}

TEST_CASE("removing a forward hook: it stops firing; twice, or after the module is gone, is safe") {
  auto net = small_mlp(9);
  int pre_calls = 0, post_calls = 0;
  HookHandle pre = net->at<Linear>(0).register_forward_pre_hook(
      [&](const Module&, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
        ++pre_calls;
        return std::nullopt;
      });
  HookHandle post =
      net->register_forward_hook([&](const Module&, const std::vector<Tensor>&, const Tensor&) {
        ++post_calls;
        return Tensor();
      });
  const Tensor x = input(1);
  net->forward(x);
  CHECK((pre_calls == 1 && post_calls == 1));
  CHECK(net->has_forward_hooks());
  post.remove();
  CHECK_FALSE(net->has_forward_hooks());
  net->forward(x);
  CHECK((pre_calls == 2 && post_calls == 1));
  post.remove();  // twice: nothing
  net.reset();    // the module is gone
  pre.remove();   // nothing either
  CHECK(pre_calls == 2);
}

TEST_CASE("a hook that removes itself while running fires once") {
  auto net = small_mlp(9);
  int calls = 0;
  auto handle = std::make_shared<HookHandle>();
  *handle = net->register_forward_hook(
      [&, handle](const Module&, const std::vector<Tensor>&, const Tensor&) {
        ++calls;
        handle->remove();
        return Tensor();
      });
  net->forward(input(1));
  net->forward(input(1));
  CHECK(calls == 1);
}

TEST_CASE("a module knows its dotted path; the root's is empty") {
  Sequential outer(DType::f64);
  auto& inner = outer.add(small_mlp(1));
  CHECK(outer.path() == "");
  CHECK(inner.path() == "0");
  CHECK(inner.at<Linear>(2).path() == "0.2");
  CHECK(inner.at<Linear>(2).parent() == &inner);

  MicroLMConfig c;
  c.vocab = 16, c.dim = 8, c.layers = 2, c.heads = 2, c.kv_heads = 2, c.seq_len = 4;
  MicroLM model(c);
  CHECK(model.blocks[1]->attention->path() == "blocks.1.attention");
  CHECK(model.blocks[0]->ffn->down->path() == "blocks.0.ffn.down");
}

TEST_CASE("hooks fire on the language model's modules, fused paths included, values unchanged") {
  MicroLMConfig c;
  c.vocab = 16, c.dim = 8, c.layers = 2, c.heads = 2, c.kv_heads = 2, c.seq_len = 4;
  c.tied_head = false;
  MicroLM model(c, DType::f64);
  model.init_identical(3);
  const Tensor ids = Tensor::from_ids(std::vector<int64_t>{1, 5, 7, 2}, {1, 4});
  const Tensor plain = model.forward(ids);
  std::vector<std::string> fired;
  auto record = [&](Module& m) {
    m.register_forward_hook(
        [&fired](const Module& self, const std::vector<Tensor>&, const Tensor&) {
          fired.push_back(self.path());
          return Tensor();
        });
  };
  // q runs inside linear_rope, output and down inside linear_add, the head inside the model.
  record(*model.blocks[0]->attention->q);
  record(*model.blocks[0]->attention->output);
  record(*model.blocks[1]->ffn->down);
  record(*model.blocks[1]);
  record(*model.head);
  const Tensor hooked = model.forward(ids);
  CHECK(fired == std::vector<std::string>{"blocks.0.attention.q", "blocks.0.attention.output",
                                          "blocks.1.ffn.down", "blocks.1", "head"});
  CHECK(max_diff(plain, hooked) < 1e-12);
  // loss() reads the head's logits when the head has hooks: the same value as forward's.
  fired.clear();
  const Tensor targets = Tensor::from_ids(std::vector<int64_t>{5, 7, 2, 3}, {1, 4});
  const double with_hooks = model.loss(ids, targets).item();
  CHECK(fired.back() == "head");
  CHECK(std::fabs(
            with_hooks -
            cross_entropy(reshape(plain, {4, 16}), dg::raw::view_reshape(targets, {4})).item()) <
        1e-12);
}

// ---- tensor gradient hooks (Tensor::register_hook) ----------------------------------------------

TEST_CASE("a hook on a non-leaf changes what reaches the leaf (double, clip)") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, -2, 3}, {3}, DType::f64);
  x.set_requires_grad(true);
  Tensor y = mul(x, x);  // dy/dx = 2x
  y.register_hook([](const Tensor& g) { return scale(g, 2.0); });
  backward(sum(y));
  CHECK(x.grad().to_vector() == std::vector<double>{4, -8, 12});

  Tensor z = dg::raw::clone(x).set_requires_grad(true);
  Tensor w = scale(z, 10.0);
  w.register_hook([](const Tensor& g) { return clamp(g, -0.5, 0.5); });
  backward(sum(mul(w, w)));  // d/dw = 2w = 20z, clipped to ±0.5, times 10
  CHECK(z.grad().to_vector() == std::vector<double>{5, -5, 5});
}

TEST_CASE("a hook on a leaf sees this backward's gradient only; its result is added to grad") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}, DType::f64);
  x.set_requires_grad(true);
  std::vector<std::vector<double>> seen;
  x.register_hook([&](const Tensor& g) {
    seen.push_back(g.to_vector());
    return scale(g, 10.0);
  });
  backward(sum(scale(x, 3.0)));
  backward(sum(scale(x, 3.0)));
  CHECK(seen == std::vector<std::vector<double>>{{3, 3}, {3, 3}});  // not the running sum
  CHECK(x.grad().to_vector() == std::vector<double>{60, 60});
}

TEST_CASE("a post-accumulate hook runs once per backward, when the leaf's gradient is final") {
  // x feeds the first node and the last (x·w, then the sum adds x again): its gradient is final
  // only after the oldest node; w's after the mul. The hooks see the full gradient then, and
  // fire in the order the gradients became final, while the walk still has nodes to run.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}, DType::f64);
  Tensor w = Tensor::from_vector(std::vector<double>{3, -1}, {2}, DType::f64);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  std::vector<std::string> order;
  std::vector<std::vector<double>> seen_x, seen_w;
  HookHandle hx = x.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    order.push_back("x");
    seen_x.push_back(leaf.grad().to_vector());
    CHECK_FALSE(grad_enabled());
  });
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    order.push_back("w");
    seen_w.push_back(leaf.grad().to_vector());
  });
  Tensor y = mul(x, w);                // oldest node: the last to run in backward
  Tensor loss = sum(add(tanh(y), x));  // d/dx = w·(1 − tanh²y) + 1
  const std::vector<double> t = tanh(y).to_vector();
  backward(loss);
  REQUIRE(order == std::vector<std::string>{"x", "w"});  // both are inputs of the same node
  CHECK(seen_x[0][0] == doctest::Approx(3 * (1 - t[0] * t[0]) + 1));
  CHECK(seen_w[0][1] == doctest::Approx(2 * (1 - t[1] * t[1])));
  // A leaf used only by a newer node is final before an older node runs: w2's hook runs first.
  Tensor w2 = Tensor::from_vector(std::vector<double>{0.5}, {1}, DType::f64);
  w2.set_requires_grad(true);
  std::vector<std::string> order2;
  hx.remove();
  x.register_post_accumulate_grad_hook([&](const Tensor&) { order2.push_back("x"); });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order2.push_back("w2"); });
  backward(sum(mul(tanh(scale(x, 2.0)), w2)));
  CHECK(order2 == std::vector<std::string>{"w2", "x"});
  CHECK(order.size() == 2);  // removed: x's first hook did not fire again; w's is not reached
  // grad() does not accumulate, so it runs none; a non-leaf is refused.
  grad({sum(mul(x, x))}, {x});
  CHECK(order2.size() == 2);
  Tensor nonleaf = mul(x, x);
  CHECK_THROWS_WITH_AS(nonleaf.register_post_accumulate_grad_hook([](const Tensor&) {}),
                       doctest::Contains("is not a leaf that requires grad"),
                       std::invalid_argument);
}

TEST_CASE("a hook returning an undefined tensor keeps the gradient; removal stops a hook") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}, DType::f64);
  x.set_requires_grad(true);
  int calls = 0;
  HookHandle keep = x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  HookHandle triple = x.register_hook([](const Tensor& g) { return scale(g, 3.0); });
  backward(sum(mul(x, x)));
  CHECK(calls == 1);
  CHECK(x.grad().to_vector() == std::vector<double>{6, 12});
  triple.remove();
  triple.remove();  // twice: nothing
  x.zero_grad();
  backward(sum(mul(x, x)));
  CHECK(calls == 2);
  CHECK(x.grad().to_vector() == std::vector<double>{2, 4});
}

TEST_CASE("hooks run under grad(): the result is hooked and no .grad changes") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2}, {2}, DType::f64);
  x.set_requires_grad(true);
  Tensor y = mul(x, x);
  y.register_hook([](const Tensor& g) { return scale(g, 2.0); });       // non-leaf
  x.register_hook([](const Tensor& g) { return add_scalar(g, 1.0); });  // leaf, after
  const std::vector<Tensor> g = grad({sum(y)}, {x});
  CHECK(g[0].to_vector() == std::vector<double>{5, 9});  // 2·2x + 1
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(y.grad().defined());
}

// ---- misuse refused with one line naming the tensor ------------------------------------------

TEST_CASE("optimisers refuse a non-leaf tensor and one that does not require grad, naming it") {
  Tensor w = Tensor::zeros({2, 3}, DType::f64).set_requires_grad(true).set_name("w");
  Tensor made = scale(w, 2.0).set_name("scaled");
  Tensor frozen = Tensor::zeros({4}).set_name("frozen");
  std::string m = thrown([&] { SGD({w, made}, SGDConfig{.lr = 0.1}); });
  CHECK(m.find("parameter 1 of group 0, 'scaled' [2, 3] float64, is not a leaf") !=
        std::string::npos);
  m = thrown([&] { Adam({frozen}, AdamConfig{}); });
  CHECK(m.find("Adam: parameter 0 of group 0, 'frozen' [4] float32, does not require grad") !=
        std::string::npos);
  m = thrown([&] { AdamW({w, frozen}, AdamWConfig{}); });
  CHECK(m.find("'frozen'") != std::string::npos);
  CHECK(m.find("does not require grad") != std::string::npos);
  m = thrown([&] { AdamW({made}, AdamWConfig{}); });
  CHECK(m.find("'scaled'") != std::string::npos);
  CHECK(m.find("not a leaf") != std::string::npos);
  CHECK(thrown([&] { SGD({w}, SGDConfig{.lr = 0.1}); }).empty());
}

TEST_CASE("register_parameter refuses a non-leaf (a parameter is a leaf, as nn.Parameter)") {
  Module m(DType::f64);
  Tensor w = Tensor::ones({2}, DType::f64).set_requires_grad(true);
  const std::string message = thrown([&] { m.register_parameter("gain", scale(w, 2.0)); });
  CHECK(message.find("register_parameter: 'gain'") != std::string::npos);
  CHECK(message.find("is not a leaf") != std::string::npos);
  CHECK(thrown([&] { m.register_parameter("gain", dg::raw::clone(scale(w, 2.0))); }).empty());
}

TEST_CASE("reading an undefined tensor says what is undefined and what usually causes it") {
  const Tensor undefined;
  const std::string causes =
      "the tensor is undefined: a default-constructed dg::Tensor, or a gradient read with grad() "
      "before any backward reached its tensor";
  CHECK(thrown([&] { undefined.item(); }) == "item(): " + causes);
  CHECK(thrown([&] { undefined.item<float>(); }) == "item(): " + causes);
  CHECK(thrown([&] { undefined.data<float>(); }) == "data(): " + causes);
  CHECK(thrown([&] { undefined.shape(); }) == "shape(): " + causes);
  CHECK(thrown([&] { undefined.to_vector(); }) == "to_vector(): " + causes);
  CHECK(thrown([&] { undefined.at({0}); }) == "at(): " + causes);
  Tensor x = Tensor::ones({2}).set_requires_grad(true);
  CHECK(thrown([&] { x.grad().item(); }) == "item(): " + causes);
}

TEST_CASE("backward of a tensor made under no-grad says so") {
  Tensor x = Tensor::ones({3}, DType::f64).set_requires_grad(true);
  Tensor loss;
  {
    NoGradGuard no_grad;
    loss = sum(mul(x, x));
  }
  const std::string message = thrown([&] { backward(loss); });
  CHECK(message.find("does not require grad") != std::string::npos);
  CHECK(message.find("it was made while grad mode was off") != std::string::npos);
}

// ---- version counters: every in-place path makes a later backward refuse ------------------------

namespace {
// x [3] float64 requiring grad, and y = x·x, which saves x.
struct Saved {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3}, DType::f64)
                 .set_requires_grad(true)
                 .set_name("x");
  Tensor loss = sum(mul(x, x));
};
// backward(loss) throws the version error naming mul and x, and writes no gradient.
void check_refused(Saved& s, uint64_t saved_version) {
  const std::string message = thrown([&] { backward(s.loss); });
  CHECK(message.find("modified by an in-place write") != std::string::npos);
  CHECK(message.find("op 'mul'") != std::string::npos);
  CHECK(message.find("'x' [3] float64") != std::string::npos);
  CHECK(message.find(fmt::format("at version {}, and it is now at version {}", saved_version,
                                 s.x.version())) != std::string::npos);
  CHECK_FALSE(s.x.grad().defined());
}
}  // namespace

TEST_CASE("version check: fill between forward and backward") {
  Saved s;
  const uint64_t v = s.x.version();
  s.x.fill(5);  // PyTorch: "one of the variables needed for gradient computation has been modified"
  CHECK(s.x.version() == v + 1);
  check_refused(s, v);
}

TEST_CASE("version check: copy_from") {
  Saved s;
  const uint64_t v = s.x.version();
  s.x.copy_from(Tensor::zeros({3}, DType::f64));
  check_refused(s, v);
}

TEST_CASE("version check: mutable_data (data() is raw and not seen)") {
  Saved s;
  const uint64_t v = s.x.version();
  s.x.data<double>()[0] = 1.0;  // raw access: not counted (as libtorch's data_ptr)
  CHECK(s.x.version() == v);
  s.x.mutable_data<double>()[0] = 7.0;
  check_refused(s, v);
}

TEST_CASE("version check: a write through a view of the saved tensor") {
  Saved s;
  const uint64_t v = s.x.version();
  Tensor view = dg::raw::view_narrow(s.x, 0, 1, 2);
  view.fill(0);
  CHECK(s.x.version() == v + 1);  // one counter per storage
  check_refused(s, v);
}

TEST_CASE("version check: an optimiser step between forward and backward") {
  for (int which = 0; which < 3; ++which) {
    CAPTURE(which);
    auto net = small_mlp(11);
    std::unique_ptr<FlatOptimizer> opt;
    if (which == 0) opt = std::make_unique<SGD>(*net, SGDConfig{.lr = 0.1});
    if (which == 1) opt = std::make_unique<Adam>(*net, AdamConfig{});
    if (which == 2) opt = std::make_unique<AdamW>(*net, AdamWConfig{});
    const Tensor loss = sum(net->forward(input(12)));
    opt->step();  // writes every parameter (the flat gradients are zeros)
    const std::string message = thrown([&] { backward(loss); });
    CHECK(message.find("modified by an in-place write") != std::string::npos);
  }
  // The optimisers over tensors bump their parameters too.
  Tensor w = Tensor::ones({2}, DType::f64).set_requires_grad(true).set_name("w");
  SGD sgd({w}, SGDConfig{.lr = 0.1});
  backward(sum(mul(w, w)));
  const Tensor loss = sum(mul(w, w));
  sgd.step();
  CHECK(thrown([&] { backward(loss); }).find("'w' [2] float64") != std::string::npos);
}

TEST_CASE("version check: writes after backward (a training loop) stay legal") {
  auto net = small_mlp(13);
  AdamW opt(*net, AdamWConfig{.lr = 1e-2});
  const Tensor x = input(14);
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    net->zero_grad();
    const Tensor loss = mean(mul(net->forward(x), net->forward(x)));
    CHECK_NOTHROW(backward(loss));
    opt.step();
    {
      NoGradGuard no_grad;  // e.g. a manual weight clamp between steps
      net->at<Linear>(0).bias.fill(0.0);
    }
    (step == 0 ? first : last) = loss.item();
  }
  CHECK(last < first);
}

// ---- anomaly mode ---------------------------------------------------------------------------

namespace {
// log of relu(linear(x)), kept only where positive: where() hides log(0) = −inf from the forward,
// but log's backward divides the zero gradient by zero (PyTorch's classic NaN-gradient trap).
class LogHead : public Module {
 public:
  LogHead() : Module(DType::f64) {
    linear = &register_module("linear", std::make_unique<Linear>(3, 4, true, DType::f64));
  }
  Tensor forward(const Tensor& x) const {
    return hooked(
        [&](const Tensor& x) {
          const Tensor h = relu(linear->forward(x));
          return where(gt(h, 0.0), log(h), Tensor::zeros(h.shape(), DType::f64));
        },
        x);
  }
  Linear* linear;
};
class AnomalyNet : public Module {
 public:
  AnomalyNet() : Module(DType::f64) {
    TorchGenerator saved = default_generator();
    manual_seed(21);
    head = &register_module("head", std::make_unique<LogHead>());
    default_generator() = saved;
  }
  Tensor forward(const Tensor& x) const {
    return hooked([&](const Tensor& x) { return mean(head->forward(x)); }, x);
  }
  LogHead* head;
};
}  // namespace

TEST_CASE("anomaly mode names the op 'log' and the module 'head'; off, nothing is named") {
  AnomalyNet net;
  const Tensor x = input(22, {16, 3});
  {
    DetectAnomalyGuard anomaly;
    const std::string message = thrown([&] { backward(net.forward(x)); });
    CHECK(message.find("backward of op 'log'") != std::string::npos);
    CHECK(message.find("in module 'head'") != std::string::npos);
  }
  CHECK(std::isfinite(net.forward(x).item()));
  // Off, the walk runs through: relu's backward drops the NaN where it passed zeros, so nothing
  // downstream shows it. Anomaly mode is what finds it.
  CHECK(thrown([&] { backward(net.forward(x)); }).empty());
  CHECK(net.head->linear->weight.grad().defined());
}

TEST_CASE("training.detect_anomaly runs the Trainer's steps in anomaly mode") {
  TorchGenerator g(23);
  const TensorDataset data({randn({16, 3}, DType::f64, &g)});
  auto run = [&](bool anomaly) {
    AnomalyNet net;
    SGD sgd(net, SGDConfig{.lr = 0.1});
    TrainingConfig c;
    c.steps = 1;
    c.batch = 16;
    c.detect_anomaly = anomaly;
    Trainer t(
        net, data, Sampler::sequential(data.size()),
        [](AnomalyNet& m, const Batch& b) { return m.forward(b[0]); }, c, sgd);
    return thrown([&] { t.run(1); });
  };
  const std::string on = run(true), off = run(false);
  CHECK(on.find("backward of op 'log'") != std::string::npos);
  CHECK(on.find("in module 'head'") != std::string::npos);
  CHECK(off.find("'log'") == std::string::npos);
  CHECK_FALSE(anomaly_enabled());  // the guard ends with the step
}

TEST_CASE("training.detect_anomaly: JSON only when true, round trip, off by default") {
  TrainingConfig c;
  CHECK_FALSE(c.detect_anomaly);
  CHECK(training_config_json(c).find("detect_anomaly") == nullptr);
  c.detect_anomaly = true;
  const json::Value v = training_config_json(c);
  REQUIRE(v.find("detect_anomaly") != nullptr);
  CHECK(v.find("detect_anomaly")->as_bool());
  CHECK(training_config_from_json(v).detect_anomaly);
  CHECK_FALSE(training_config_from_json(training_config_json(TrainingConfig{})).detect_anomaly);
}

TEST_CASE("the fused attention ops save their output: writing it in place is refused") {
  Tensor q = random_tensor({1, 2, 3, 4}, 41), k = random_tensor({1, 2, 3, 4}, 42),
         v = random_tensor({1, 2, 3, 4}, 43);
  Tensor out = causal_attention(q, k, v);
  Tensor loss = sum(out);  // sum saves nothing: only the attention op can refuse
  out.fill(0.5);
  CHECK_THROWS_WITH(backward(loss), doctest::Contains("'causal_attention'"));
  Tensor qh = random_tensor({1, 3, 8}, 44), kh = random_tensor({1, 3, 4}, 45);
  Tensor merged = attention_heads(qh, kh, kh, 2, 1, 100.0);
  Tensor loss2 = sum(merged);
  merged.fill(0.5);
  CHECK_THROWS_WITH(backward(loss2), doctest::Contains("'attention_heads'"));
  CHECK_FALSE(qh.grad().defined());
}
