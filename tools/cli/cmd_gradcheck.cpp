// `depthgrad gradcheck`: runs every row of the op gradient-check table and prints the results:
// first derivatives (gradcheck, float32 against float64), then second derivatives
// (gradgradcheck) for the rows whose ops all support create_graph.
#include <fmt/core.h>

#include "autograd/gradcheck.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/shared_flags.h"

namespace dg::cli {

namespace {

// The first-derivative table; returns the number of failed rows.
int first_order_table(const std::vector<OpCase>& cases) {
  int failed = 0;
  fmt::print("{:<36} {:>6} {:>12} {:>12} {:>12} {:>8}  {}\n", "case", "checks", "max|Δgrad|",
             "max|Δf32|", "max|Δf32 g|", "seconds", "result");
  for (const OpCase& c : cases) {
    OpCaseResult r = run_op_case(c);
    bool ok = r.grad.passed && r.f32_passed && r.f32_grad_passed;
    failed += ok ? 0 : 1;
    fmt::print("{:<36} {:>6} {:>12.3e} {:>12.3e} {:>12.3e} {:>8.3f}  {}\n", c.name, r.grad.checks,
               r.grad.max_abs_error, r.f32_max_error, r.f32_grad_max_error, r.seconds,
               ok ? "ok" : "FAIL");
    if (!r.grad.passed) fmt::print("    {}\n", r.grad.message);
    if (!r.f32_passed) fmt::print("    {}\n", r.f32_message);
    if (!r.f32_grad_passed) fmt::print("    {}\n", r.f32_grad_message);
  }
  fmt::print("first derivatives: {} passed, {} failed\n", cases.size() - failed, failed);
  return failed;
}

// The op create_graph refused, from its message ("... op 'name' ..."), for the table.
std::string refused_op(const std::string& message) {
  const size_t at = message.find("op '");
  if (at == std::string::npos) return "?";
  const size_t end = message.find('\'', at + 4);
  return message.substr(at + 4, end - at - 4);
}

// The second-derivative table; returns the number of failed rows (unsupported rows do not fail).
int second_order_table(const std::vector<OpCase>& cases) {
  int failed = 0, supported = 0;
  fmt::print("\n{:<36} {:>6} {:>12} {:>8}  {}\n", "case (second derivatives)", "checks",
             "max|Δgrad²|", "seconds", "result");
  for (const OpCase& c : cases) {
    OpCaseGradgradResult r = run_op_case_gradgrad(c);
    if (!r.supported) {
      fmt::print("{:<36} {:>6} {:>12} {:>8.3f}  no create_graph (op '{}')\n", c.name, "-", "-",
                 r.seconds, refused_op(r.grad.message));
      continue;
    }
    ++supported;
    failed += r.grad.passed ? 0 : 1;
    fmt::print("{:<36} {:>6} {:>12.3e} {:>8.3f}  {}\n", c.name, r.grad.checks, r.grad.max_abs_error,
               r.seconds, r.grad.passed ? "ok" : "FAIL");
    if (!r.grad.passed) fmt::print("    {}\n", r.grad.message);
  }
  fmt::print("second derivatives: {} passed, {} failed, {} rows without create_graph\n",
             supported - failed, failed, cases.size() - supported);
  return failed;
}

}  // namespace

int cmd_gradcheck(int argc, char** argv, int start) {
  Flags f("gradcheck",
          "Run the op gradient-check suite (float64 central differences, random-weighted loss)\n"
          "and float32 against float64 (forward, and the gradients of the same loss); one row per "
          "case; then the second derivatives (gradgradcheck: the gradient of a gradient recorded\n"
          "with create_graph against central differences) of the rows whose ops support it.");
  add_threads_flag(
      f.add("filter", "", "only cases whose name contains this text")
          .add("order", "both", "which table: 1 (gradcheck), 2 (gradgradcheck) or both"));
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  apply_threads_flag(f);
  std::vector<OpCase> cases;
  for (const OpCase& c : all_op_cases())
    if (f.get("filter").empty() || c.name.find(f.get("filter")) != std::string::npos)
      cases.push_back(c);
  if (cases.empty())
    throw UsageError(fmt::format(
        "--filter: no gradcheck case name contains '{}' (see `depthgrad gradcheck` for the list)",
        f.get("filter")));
  const std::string order = f.get("order");
  if (order != "1" && order != "2" && order != "both")
    throw UsageError(fmt::format("--order: expected 1, 2 or both, got '{}'", order));
  int failed = 0;
  if (order != "2") failed += first_order_table(cases);
  if (order != "1") failed += second_order_table(cases);
  return failed ? 1 : 0;
}

}  // namespace dg::cli
