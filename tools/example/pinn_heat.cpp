// A physics-informed network: an MLP u(x, t) learns the 1-D heat equation u_t = α·u_xx on
// x ∈ [0, 1], t ∈ [0, 1] with u(x, 0) = sin(πx) and u(0, t) = u(1, t) = 0, from the equation alone
// (no solution values are given). Its loss uses du/dx, du/dt and d²u/dx², taken with
// dg::grad(..., create_graph = true) so that they are themselves differentiable, and training
// differentiates that loss once more with respect to the weights (third derivatives of tanh).
// The exact solution, exp(-απ²t)·sin(πx), is used only to report the error at the end.
// Exits non-zero unless the derivatives equal finite differences of the network, the equation's
// residual falls below its threshold and the network is close to the exact solution.
#include <depthgrad/depthgrad.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <numbers>
#include <vector>

namespace {

constexpr double kAlpha = 0.1;  // the diffusivity
constexpr double kPi = std::numbers::pi;

std::unique_ptr<dg::Sequential> make_network() {
  auto net = std::make_unique<dg::Sequential>(dg::DType::f64);
  net->add(std::make_unique<dg::Linear>(2, 32, true, dg::DType::f64));
  net->add(dg::tanh);
  net->add(std::make_unique<dg::Linear>(32, 32, true, dg::DType::f64));
  net->add(dg::tanh);
  net->add(std::make_unique<dg::Linear>(32, 1, true, dg::DType::f64));
  return net;
}

// Points (x, t) as a [n, 2] float64 tensor.
dg::Tensor points(const std::vector<double>& xs, const std::vector<double>& ts) {
  std::vector<double> v;
  for (size_t i = 0; i < xs.size(); ++i) v.push_back(xs[i]), v.push_back(ts[i]);
  return dg::Tensor::from_vector(v, {static_cast<int64_t>(xs.size()), 2}, dg::DType::f64);
}

// u, u_x, u_t and u_xx at the points xt (which must require grad), all with their graphs.
struct Derivatives {
  dg::Tensor u, u_x, u_t, u_xx;
};
Derivatives derivatives(dg::Sequential& net, const dg::Tensor& xt) {
  Derivatives d;
  d.u = net(xt);  // [n, 1]
  const dg::Tensor ones = dg::Tensor::ones(d.u.shape(), dg::DType::f64);
  // Each row's u depends only on its own point, so the gradient of Σu is each row's derivative.
  const dg::Tensor du = dg::grad({d.u}, {xt}, {ones}, true, /*create_graph=*/true)[0];  // [n, 2]
  d.u_x = dg::slice(du, 1, 0, 1);
  d.u_t = dg::slice(du, 1, 1, 2);
  const dg::Tensor du_x = dg::grad({d.u_x}, {xt}, {ones}, true, /*create_graph=*/true)[0];
  d.u_xx = dg::slice(du_x, 1, 0, 1);
  return d;
}

// The loss: the equation's residual at interior points, plus the initial and boundary values.
struct Loss {
  dg::Tensor total, residual;
};
Loss pinn_loss(dg::Sequential& net, const dg::Tensor& interior, const dg::Tensor& initial,
               const dg::Tensor& initial_u, const dg::Tensor& boundary) {
  const Derivatives d = derivatives(net, interior);
  const dg::Tensor r = dg::sub(d.u_t, dg::scale(d.u_xx, kAlpha));
  Loss loss;
  loss.residual = dg::mean(dg::mul(r, r));
  const dg::Tensor ic = dg::mse_loss(net(initial), initial_u);
  const dg::Tensor bc = dg::mean(dg::mul(net(boundary), net(boundary)));
  loss.total = dg::add(dg::add(loss.residual, ic), bc);
  return loss;
}

// u at one point (no graph), for finite differences.
double u_at(dg::Sequential& net, double x, double t) {
  dg::NoGradGuard no_grad;
  return net(points({x}, {t})).item();
}

// The autograd derivatives at a few points against central finite differences of the network.
bool derivatives_match_finite_differences(dg::Sequential& net) {
  bool ok = true;
  for (auto [x, t] : {std::pair{0.3, 0.2}, std::pair{0.71, 0.9}, std::pair{0.05, 0.5}}) {
    dg::Tensor xt = points({x}, {t});
    xt.set_requires_grad(true);
    const Derivatives d = derivatives(net, xt);
    const double h = 1e-4;
    const double fd_x = (u_at(net, x + h, t) - u_at(net, x - h, t)) / (2 * h);
    const double fd_t = (u_at(net, x, t + h) - u_at(net, x, t - h)) / (2 * h);
    const double fd_xx =
        (u_at(net, x + h, t) - 2 * u_at(net, x, t) + u_at(net, x - h, t)) / (h * h);
    const double e_x = std::fabs(d.u_x.item() - fd_x), e_t = std::fabs(d.u_t.item() - fd_t);
    const double e_xx = std::fabs(d.u_xx.item() - fd_xx);
    std::printf(
        "at (%.2f, %.2f): u_x %+.6f (fd %+.6f)  u_t %+.6f (fd %+.6f)  u_xx %+.6f (fd %+.6f)\n", x,
        t, d.u_x.item(), fd_x, d.u_t.item(), fd_t, d.u_xx.item(), fd_xx);
    ok = ok && e_x < 1e-7 && e_t < 1e-7 && e_xx < 1e-5;
  }
  return ok;
}

}  // namespace

int main() {
  dg::manual_seed(0);
  std::unique_ptr<dg::Sequential> net = make_network();

  // Collocation points: 256 interior (x, t) drawn once, 64 on t = 0, 32 on each side x = 0, 1.
  dg::TorchGenerator gen(3);
  dg::Tensor interior = dg::rand({256, 2}, dg::DType::f64, &gen);
  interior.set_requires_grad(true);  // the derivatives are taken with respect to the points
  std::vector<double> x0, t0, u0, xb, tb;
  for (int i = 0; i < 64; ++i)
    x0.push_back(i / 63.0), t0.push_back(0.0), u0.push_back(std::sin(kPi * x0.back()));
  for (int i = 0; i < 32; ++i)
    for (double side : {0.0, 1.0}) xb.push_back(side), tb.push_back(i / 31.0);
  const dg::Tensor initial = points(x0, t0), boundary = points(xb, tb);
  const dg::Tensor initial_u = dg::Tensor::from_vector(u0, {64, 1}, dg::DType::f64);

  if (!derivatives_match_finite_differences(*net)) {
    std::printf("pinn_heat: autograd derivatives differ from finite differences\n");
    return 1;
  }
  dg::Adam optimizer(*net, {.lr = 5e-3});
  const int steps = 2000;
  double residual = 0, total = 0;
  for (int step = 0; step <= steps; ++step) {
    optimizer.zero_grad();
    Loss loss = pinn_loss(*net, interior, initial, initial_u, boundary);
    dg::backward(loss.total);
    if (step < steps) optimizer.step();
    residual = loss.residual.item();
    total = loss.total.item();
    if (step % 250 == 0) std::printf("step %4d  loss %.3e  residual %.3e\n", step, total, residual);
  }
  if (!derivatives_match_finite_differences(*net)) {
    std::printf("pinn_heat: autograd derivatives differ from finite differences after training\n");
    return 1;
  }
  // The trained network against the exact solution on a grid.
  double max_error = 0;
  for (int i = 0; i <= 20; ++i)
    for (int j = 0; j <= 20; ++j) {
      const double x = i / 20.0, t = j / 20.0;
      const double exact = std::exp(-kAlpha * kPi * kPi * t) * std::sin(kPi * x);
      max_error = std::max(max_error, std::fabs(u_at(*net, x, t) - exact));
    }
  const double residual_threshold = 1e-4, error_threshold = 2e-2;
  std::printf(
      "residual (mean square) %.3e (threshold %.0e), max |u - exact| %.3e (threshold %.0e)\n",
      residual, residual_threshold, max_error, error_threshold);
  return residual < residual_threshold && max_error < error_threshold ? 0 : 1;
}
