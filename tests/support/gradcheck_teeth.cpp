// gradcheck_teeth: every row of the op gradient-check table (what `depthgrad gradcheck` runs)
// with the error DG_PLANT_ERROR names planted in one op's backward (tests/support/plant_error.h).
// With DG_TEETH_ORDER=2 it runs the second-derivative table instead (gradgradcheck of the rows
// whose ops support create_graph). Built only for tools/gradcheck_teeth.sh; it is not a test
// itself. Exit 1 when any row fails.
#include <fmt/core.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "autograd/gradcheck.h"
#include "tensor/threads.h"
#include "tests/support/plant_error.h"

int main() {
  try {
    dg::init_threads_from_env();
    dg::test::install_planted_error_from_env();
    int failed = 0, ran = 0;
    const char* order = std::getenv("DG_TEETH_ORDER");
    if (order && std::string(order) == "2") {
      for (const dg::OpCase& c : dg::all_op_cases()) {
        const dg::OpCaseGradgradResult r = dg::run_op_case_gradgrad(c);
        if (!r.supported) continue;
        ++ran;
        if (r.grad.passed) continue;
        ++failed;
        fmt::print("FAIL {}\n    {}\n", c.name, r.grad.message);
      }
      fmt::print("{} passed, {} failed\n", ran - failed, failed);
      return failed ? 1 : 0;
    }
    for (const dg::OpCase& c : dg::all_op_cases()) {
      const dg::OpCaseResult r = dg::run_op_case(c);
      const bool ok = r.grad.passed && r.f32_passed && r.f32_grad_passed;
      ++ran;
      if (ok) continue;
      ++failed;
      fmt::print("FAIL {}\n", c.name);
      for (const std::string* m : {&r.grad.message, &r.f32_message, &r.f32_grad_message})
        if (!m->empty()) fmt::print("    {}\n", *m);
    }
    fmt::print("{} passed, {} failed\n", ran - failed, failed);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gradcheck_teeth: {}\n", e.what());
    return 1;
  }
}
