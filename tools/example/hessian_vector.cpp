// Hessian-vector products by double backward: for the loss L(θ) of a small tanh MLP on fixed
// data, H·v = ∇_θ (∇_θ L · v), with the first gradient taken with create_graph = true so that it
// can be differentiated again (what Newton-CG, curvature probes and influence functions use). It is
// checked against central differences of the gradient, (∇L(θ + εv) − ∇L(θ − εv)) / 2ε, and for
// symmetry (u·Hv = v·Hu). Exits non-zero unless both hold.
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

dg::Tensor loss_of(dg::Sequential& net, const dg::Tensor& x, const dg::Tensor& y) {
  return dg::mse_loss(net(x), y);
}

// ∇L · v summed over every parameter, as a tensor with a graph.
dg::Tensor gradient_dot(const std::vector<dg::Tensor>& g, const std::vector<dg::Tensor>& v) {
  dg::Tensor total;
  for (size_t i = 0; i < g.size(); ++i) {
    dg::Tensor term = dg::sum(dg::mul(g[i], v[i]));
    total = total.defined() ? dg::add(total, term) : term;
  }
  return total;
}

std::vector<dg::Tensor> hessian_vector(dg::Sequential& net, const dg::Tensor& x,
                                       const dg::Tensor& y, const std::vector<dg::Tensor>& v) {
  const std::vector<dg::Tensor> params = net.parameters();
  const std::vector<dg::Tensor> g =
      dg::grad({loss_of(net, x, y)}, params, {}, true, /*create_graph=*/true);
  return dg::grad({gradient_dot(g, v)}, params);
}

// Adds s·v into the parameters (an in-place write between steps, under no-grad).
void move(dg::Sequential& net, const std::vector<dg::Tensor>& v, double s) {
  dg::NoGradGuard no_grad;
  const std::vector<dg::Tensor> params = net.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    double* p = params[i].mutable_data<double>();
    const std::vector<double> d = v[i].to_vector();
    for (size_t e = 0; e < d.size(); ++e) p[e] += s * d[e];
  }
}

double dot(const std::vector<dg::Tensor>& a, const std::vector<dg::Tensor>& b) {
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> p = a[i].to_vector(), q = b[i].to_vector();
    for (size_t e = 0; e < p.size(); ++e) total += p[e] * q[e];
  }
  return total;
}

}  // namespace

int main() {
  dg::manual_seed(0);
  dg::Sequential net(dg::DType::f64);
  net.add(std::make_unique<dg::Linear>(3, 16, true, dg::DType::f64));
  net.add(dg::tanh);
  net.add(std::make_unique<dg::Linear>(16, 2, true, dg::DType::f64));
  dg::TorchGenerator gen(5);
  const dg::Tensor x = dg::randn({40, 3}, dg::DType::f64, &gen);
  const dg::Tensor y = dg::randn({40, 2}, dg::DType::f64, &gen);
  std::vector<dg::Tensor> v, u;
  for (const dg::Tensor& p : net.parameters()) {
    v.push_back(dg::randn(p.shape(), dg::DType::f64, &gen));
    u.push_back(dg::randn(p.shape(), dg::DType::f64, &gen));
  }

  const std::vector<dg::Tensor> hv = hessian_vector(net, x, y, v);
  const std::vector<dg::Tensor> hu = hessian_vector(net, x, y, u);

  // Central differences of the gradient along v.
  const double eps = 1e-5;
  const std::vector<dg::Tensor> params = net.parameters();
  move(net, v, eps);
  const std::vector<dg::Tensor> g_plus = dg::grad({loss_of(net, x, y)}, params);
  move(net, v, -2 * eps);
  const std::vector<dg::Tensor> g_minus = dg::grad({loss_of(net, x, y)}, params);
  move(net, v, eps);
  double max_error = 0, max_value = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> a = hv[i].to_vector(), p = g_plus[i].to_vector(),
                              m = g_minus[i].to_vector();
    for (size_t e = 0; e < a.size(); ++e) {
      max_error = std::max(max_error, std::fabs(a[e] - (p[e] - m[e]) / (2 * eps)));
      max_value = std::max(max_value, std::fabs(a[e]));
    }
  }
  const double uhv = dot(u, hv), vhu = dot(v, hu);
  const double asymmetry = std::fabs(uhv - vhu) / std::max(std::fabs(uhv), 1e-300);
  std::printf(
      "H·v over %zu parameter tensors: max |H·v| %.4e, max |H·v − finite differences| %.3e\n",
      params.size(), max_value, max_error);
  std::printf("symmetry: u·Hv %.12e, v·Hu %.12e (relative difference %.2e)\n", uhv, vhu, asymmetry);
  const bool ok = max_error <= 1e-6 * std::max(1.0, max_value) && asymmetry < 1e-10;
  std::printf("%s\n", ok ? "Hessian-vector product matches finite differences" : "MISMATCH");
  return ok ? 0 : 1;
}
