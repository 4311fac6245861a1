// The grader of the learner's path (tools/learn/README.md). A chapter is a list of exercises; an
// exercise is one library function the learner writes again, with the checks that grade it: a
// gradient check (gradcheck's random-weighted loss against central differences), values against
// PyTorch's, a tiny training run that must learn. grade.cpp's main runs one chapter's checks and
// prints each as PASS or FAIL with the checker's own words: which element, what it expected,
// what it got; or SKIP when an earlier exercise the check runs is wrong (Exercise::uses), or
// when the check refused to run, throwing a message that starts with "skipped:".
//
// It does not choose which definition of an exercise is linked: the build does
// (tools/learn/learn.cmake). A chapter's program links the learner's file, the untouched stubs, or
// neither (then the library's own definitions run). A check that crashes the process or never
// returns is not caught: the learner sees the crash.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/tensor.h"

namespace dg::learn {

// What one check found: passed or not, and in words what it compared (for a failure: where and by
// how much).
struct Verdict {
  bool passed = false;
  std::string detail;
};

struct NamedCheck {
  std::string name;              // "gradcheck mul: float64 [3, 4] times [4] (broadcast)"
  std::function<Verdict()> run;  // a throw counts as a failure, its message as the detail
  // True for a check that runs none of its exercise's `uses` (it calls the function directly):
  // its failure is this exercise's own, never shown as skipped.
  bool direct = false;
};

struct Exercise {
  std::string function;  // as the chapter names it: "mul_backward"
  std::string where;     // the file holding the library's definition: "autograd/ops_arithmetic.cpp"
  std::vector<NamedCheck> checks;
  // The chapter's earlier exercises these checks run (div's checks differentiate a loss made
  // with mul: {"mul_backward"}). When one of them fails its own checks, a failure here is shown
  // as "skipped: mul_backward is wrong", not blamed on this exercise.
  std::vector<std::string> uses = {};
};

// A chapter's exercises run in the order listed: an exercise comes after those it uses.
struct Chapter {
  int number = 0;
  std::string title;  // "an op end to end"
  std::string text;   // the chapter's text, from the source root: "autograd/learn-03-an-op.md"
  std::vector<Exercise> exercises;
};

// Defined once for each chapter, in tools/learn/checks/chNN.cpp.
Chapter chapter();

// What a stub throws: "not written yet: <function>". Stubs call not_written("<function>").
struct NotWritten : std::logic_error {
  using std::logic_error::logic_error;
};
[[noreturn]] void not_written(const char* function);

// ---- the checks' building blocks ----------------------------------------------------------

// gradcheck's verdict (its message names the input, the element, analytic and numerical values).
Verdict from_gradcheck(const GradcheckResult& result);
// gradcheck(name, fn, inputs) at float64 with the default tolerances, as a Verdict.
Verdict gradient_check(const std::string& name, const GradcheckFn& fn,
                       const std::vector<Tensor>& inputs);
// got against expected element by element (row-major): passes when every
// |got − expected| ≤ atol + rtol·|expected| and the shapes agree; otherwise names the first
// element outside, both values and the difference.
Verdict expect_values(const Tensor& got, const std::vector<double>& expected,
                      const Shape& expected_shape, double atol, double rtol,
                      const std::string& what);
// got against a second tensor, as expect_values.
Verdict expect_close(const Tensor& got, const Tensor& expected, double atol, double rtol,
                     const std::string& what);
// A condition with its explanation (the explanation is shown either way).
Verdict expect_true(bool condition, const std::string& detail);

}  // namespace dg::learn
