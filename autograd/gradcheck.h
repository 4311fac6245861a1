// gradcheck: the public gradient checker. Any user can run it on their own ops and modules.
//
//   auto result = dg::gradcheck("my_op", [](const std::vector<Tensor>& in) { return my_op(in[0],
//   in[1]); },
//                               {x, w});   // float64 tensors; those with requires_grad are checked
//   if (!result.passed) std::puts(result.message.c_str());
//
// What it checks, for every input that requires grad:
//  1. The gradient of a random-weighted scalar loss L = Σ W ⊙ f(inputs) (W fixed by the seed; a
//     plain sum would hide index and transpose bugs) against central differences
//     (L(x + ε e_i) − L(x − ε e_i)) / 2ε: every element for inputs up to full_max_numel elements,
//     otherwise `sampled_elements` random elements plus `directions` random directions.
//  2. When numel(output)·numel(input) ≤ jacobian_max_entries, the full Jacobian: one backward per
//     output element against one pair of perturbed forwards per input element.
// An element passes when |analytic − numeric| ≤ atol + rtol·max(|analytic|, |numeric|). With the
// defaults a 1% error in any one gradient element larger than about 1e-6 fails (tests prove it).
// It does not check float32 ops (use float64 inputs) and it does not pick inputs away from kinks:
// keep inputs of non-smooth ops away from them yourself.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-8;
  double rtol = 1e-4;
  int64_t full_max_numel = 4096;
  int64_t jacobian_max_entries = 1 << 14;
  int64_t sampled_elements = 256;
  int directions = 16;
  uint64_t seed = 20261202;
};

struct GradcheckResult {
  bool passed = true;
  std::string message;       // the first failure, naming op, input, index, expected and received
  double max_abs_error = 0;  // largest |analytic − numeric| seen
  int64_t checks = 0;        // number of comparisons made
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const std::string& name, const GradcheckFn& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// gradgradcheck: the second derivatives (PyTorch's gradgradcheck). With weights W (one per output
// element) and U (one per element of each checked input) drawn from the seed, it takes the first
// derivative G(x, W) = ∂/∂x Σ W ⊙ f(x) and the scalar H(x, W) = Σ U ⊙ G, and checks:
//  1. G as grad(..., create_graph) records it equals G from the plain backward (what gradcheck
//     trusts), element by element;
//  2. ∂H/∂x and ∂H/∂W, from a backward through the graph create_graph recorded, against central
//     differences of H, where H is computed with the plain backward: every element for tensors of
//     up to full_max_numel elements, otherwise sampled elements and random directions, as
//     gradcheck. ∂H/∂W checks that the recorded backward depends on the incoming gradient right.
// A 1% error in any element of a second derivative (or of the recorded first one) fails it (tests
// prove it). An op without a differentiable backward makes it throw, naming that op (see
// autograd/tape.h's create_graph). float64 inputs, as gradcheck.
GradcheckResult gradgradcheck(const std::string& name, const GradcheckFn& fn,
                              const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});

}  // namespace dg

namespace dg {

// A float64 tensor of `shape` with values uniform in [low, high), from `seed`.
Tensor random_tensor(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0,
                     bool requires_grad = true);
// random_tensor's values (requiring grad) with every |x| < gap moved out to ±(|x| + gap), so no
// element sits on a kink at 0 (relu, abs, sign, clamp's bounds at 0): what a gradient check of a
// non-smooth op reads.
Tensor random_tensor_away_from_zero(const Shape& shape, uint64_t seed, double low, double high,
                                    double gap);

// One row of the op gradient-check table. make_inputs builds float64 inputs (those that should
// be checked have requires_grad); fn applies the op. The runner (tests/test_gradcheck_ops.cpp and
// `depthgrad gradcheck`) gradchecks each row and also runs fn in float32 against float64:
//  - forward: max |f32 − f64| ≤ f32_tolerance · (1 + max |f64|);
//  - backward: the gradients of the same random-weighted loss, element by element,
//    |g32 − g64| ≤ f32_grad_rtol · |g64| + f32_grad_atol · (1 + max |g64| of that input),
//    so a float32-only backward path (SIMD kernels, float accumulators) is checked too.
struct OpCase {
  std::string name;
  std::function<std::vector<Tensor>()> make_inputs;
  GradcheckFn fn;
  GradcheckOptions options = {};
  double f32_tolerance = 1e-5;
  double f32_grad_rtol = 2e-3;
  double f32_grad_atol = 2e-5;
};

// Each op family lists its rows at the end of its autograd/ops_<family>.cpp: <family>_op_cases().
std::vector<OpCase> arithmetic_op_cases();
std::vector<OpCase> unary_op_cases();
std::vector<OpCase> activation_op_cases();
std::vector<OpCase> reduce_op_cases();
std::vector<OpCase> shape_op_cases();
std::vector<OpCase> index_op_cases();
std::vector<OpCase> matmul_op_cases();
std::vector<OpCase> embedding_op_cases();
std::vector<OpCase> softmax_op_cases();
std::vector<OpCase> loss_op_cases();
std::vector<OpCase> loss_regression_op_cases();
std::vector<OpCase> norm_op_cases();
std::vector<OpCase> batchnorm_op_cases();
std::vector<OpCase> attention_op_cases();
std::vector<OpCase> dropout_op_cases();
std::vector<OpCase> conv_op_cases();
std::vector<OpCase> sdpa_op_cases();
std::vector<OpCase> recurrent_op_cases();
std::vector<OpCase> sort_op_cases();
std::vector<OpCase> pad_op_cases();
std::vector<OpCase> resize_op_cases();
std::vector<OpCase> indexing_op_cases();
std::vector<OpCase> quantized_op_cases();
// The rows of ops_arithmetic.cpp then ops_unary.cpp (once one file, ops_elementwise.cpp).
std::vector<OpCase> elementwise_op_cases();

// The one table of op families: every family's name (its file is autograd/ops_<name>.cpp) and
// its rows. all_op_cases() and `depthgrad gradcheck` read it, and tests/test_gradcheck_ops.cpp
// fails when an autograd/ops_*.cpp file has no row here (unless it records no op), so a new
// family cannot be left out of the checks. A new family: its <name>_op_cases() above, one row in
// op_case_families() (gradcheck.cpp).
struct OpCaseFamily {
  const char* name;
  std::vector<OpCase> (*cases)();
};
const std::vector<OpCaseFamily>& op_case_families();
// Every family's rows, in op_case_families() order.
std::vector<OpCase> all_op_cases();

// Runs one row: gradcheck plus the float32-vs-float64 forward comparison.
struct OpCaseResult {
  GradcheckResult grad;
  double f32_max_error = 0;  // max |f32 − f64| of the forward
  bool f32_passed = true;
  std::string f32_message;
  double f32_grad_max_error = 0;  // max |g32 − g64| over the inputs' gradient elements
  bool f32_grad_passed = true;
  std::string f32_grad_message;  // the first element outside the tolerance: input, index, values
  double seconds = 0;
};
OpCaseResult run_op_case(const OpCase& c);

// gradgradcheck of one row. `supported` is false when an op the row runs has no differentiable
// backward; `message` then holds the refusal, which names that op.
struct OpCaseGradgradResult {
  bool supported = true;
  GradcheckResult grad;
  double seconds = 0;
};
OpCaseGradgradResult run_op_case_gradgrad(const OpCase& c);

}  // namespace dg
