// `depthgrad gradcheck`: runs every row of the op gradient-check table and prints the results.
#include <fmt/core.h>

#include "autograd/gradcheck.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/shared_flags.h"

namespace dg::cli {

int cmd_gradcheck(int argc, char** argv, int start) {
  Flags f("gradcheck",
          "Run the op gradient-check suite (float64 central differences, random-weighted loss)\n"
          "and float32 against float64 (forward, and the gradients of the same loss); one row per "
          "case.");
  add_threads_flag(f.add("filter", "", "only cases whose name contains this text"));
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
  int failed = 0, ran = 0;
  fmt::print("{:<36} {:>6} {:>12} {:>12} {:>12} {:>8}  {}\n", "case", "checks", "max|Δgrad|",
             "max|Δf32|", "max|Δf32 g|", "seconds", "result");
  for (const OpCase& c : cases) {
    OpCaseResult r = run_op_case(c);
    bool ok = r.grad.passed && r.f32_passed && r.f32_grad_passed;
    failed += ok ? 0 : 1;
    ++ran;
    fmt::print("{:<36} {:>6} {:>12.3e} {:>12.3e} {:>12.3e} {:>8.3f}  {}\n", c.name, r.grad.checks,
               r.grad.max_abs_error, r.f32_max_error, r.f32_grad_max_error, r.seconds,
               ok ? "ok" : "FAIL");
    if (!r.grad.passed) fmt::print("    {}\n", r.grad.message);
    if (!r.f32_passed) fmt::print("    {}\n", r.f32_message);
    if (!r.f32_grad_passed) fmt::print("    {}\n", r.f32_grad_message);
  }
  fmt::print("{} passed, {} failed\n", ran - failed, failed);
  return failed ? 1 : 0;
}

}  // namespace dg::cli
