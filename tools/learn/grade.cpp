// The grader's program: runs every check of one chapter (the one tools/learn/checks/chNN.cpp
// defines), exercise by exercise in the chapter's order, and prints each as PASS, FAIL or SKIP
// (it failed, but an earlier exercise it runs is wrong: "skipped: X is wrong") with its detail.
//
//   learn_chNN                 exit 0 when every check of every exercise passes, else 1
//   learn_chNN --expect-fail   exit 0 when every exercise fails at least one check (the test suite
//                              runs the untouched stubs this way: no exercise passes by doing
//                              nothing), else 1, naming the exercise that passed
//   learn_chNN --expect-wrong F  runs exercise F's checks only; exit 0 when at least one fails
//                              (the test suite runs each wrong answer of tools/learn/wrong/ this
//                              way: the checks have teeth), else 1
//
// It refuses any other argument (exit 2). It does not catch a crash or a check that never returns.
#include "tools/learn/grade.h"

#include <cxxabi.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>

namespace dg::learn {

void not_written(const char* function) {
  throw NotWritten(fmt::format("not written yet: {} is still the stub", function));
}

Verdict from_gradcheck(const GradcheckResult& result) {
  if (result.passed)
    return {true, fmt::format("{} comparisons, largest |analytic − numerical| {:.2e}",
                              result.checks, result.max_abs_error)};
  return {false, result.message};
}

Verdict gradient_check(const std::string& name, const GradcheckFn& fn,
                       const std::vector<Tensor>& inputs) {
  return from_gradcheck(gradcheck(name, fn, inputs));
}

Verdict expect_values(const Tensor& got, const std::vector<double>& expected,
                      const Shape& expected_shape, double atol, double rtol,
                      const std::string& what) {
  if (!got.defined()) return {false, fmt::format("{}: the result is an undefined tensor", what)};
  if (got.shape() != expected_shape)
    return {false, fmt::format("{}: expected shape {}, got {}", what, shape_str(expected_shape),
                               got.describe())};
  const std::vector<double> values = got.to_vector();
  for (size_t i = 0; i < values.size(); ++i) {
    const double difference = std::abs(values[i] - expected[i]);
    if (!(difference <= atol + rtol * std::abs(expected[i])))
      return {false, fmt::format("{}: element {} is {:.9g}, expected {:.9g} (off by {:.3g}; "
                                 "allowed {:.3g})",
                                 what, i, values[i], expected[i], difference,
                                 atol + rtol * std::abs(expected[i]))};
  }
  if (atol == 0 && rtol == 0)
    return {true, fmt::format("{}: {} elements exactly equal", what, values.size())};
  return {true, fmt::format("{}: {} elements within {:.0e} + {:.0e}·|expected|", what,
                            values.size(), atol, rtol)};
}

Verdict expect_close(const Tensor& got, const Tensor& expected, double atol, double rtol,
                     const std::string& what) {
  return expect_values(got, expected.to_vector(), expected.shape(), atol, rtol, what);
}

Verdict expect_true(bool condition, const std::string& detail) { return {condition, detail}; }

namespace {

// The dynamic type of an exception, as written in C++ ("std::runtime_error"): a refusal the
// library makes is a std::invalid_argument (or std::out_of_range), and a learner's throwing another
// type sees which one it threw.
std::string type_name(const std::exception& e) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : typeid(e).name();
  std::free(demangled);
  return name;
}

Verdict run_check(const NamedCheck& check) {
  try {
    return check.run();
  } catch (const NotWritten& e) {
    return {false, e.what()};
  } catch (const std::exception& e) {
    const std::string message = e.what();
    if (message.rfind("skipped:", 0) == 0) return {false, message};  // a check that would not run
    return {false, fmt::format("threw {}: {}", type_name(e), message)};
  }
}

// The exercises `exercise` uses that failed earlier in this run, joined: "mul_backward" or
// "contiguous_strides and is_contiguous_layout"; empty when none did.
std::string wrong_dependencies(const Exercise& exercise, const std::vector<std::string>& failed) {
  std::string names;
  for (const std::string& used : exercise.uses)
    if (std::find(failed.begin(), failed.end(), used) != failed.end())
      names += (names.empty() ? "" : " and ") + used;
  return names;
}

// Runs the chapter; returns how many exercises passed every check. A check that fails while an
// exercise it uses is wrong is shown as SKIP, "skipped: X is wrong", as is one whose own detail
// says "skipped:" (chapter 1's checks of the shape functions every tensor needs); either still
// counts as not passed.
int grade(const Chapter& chapter, std::vector<std::string>& passed) {
  fmt::print("Chapter {}: {} ({})\n", chapter.number, chapter.title, chapter.text);
  std::vector<std::string> failed;
  for (const Exercise& exercise : chapter.exercises) {
    fmt::print("\n{} (the library's is in {})\n", exercise.function, exercise.where);
    const std::string wrong = wrong_dependencies(exercise, failed);
    bool all = !exercise.checks.empty();
    for (const NamedCheck& check : exercise.checks) {
      Verdict verdict = run_check(check);
      all = all && verdict.passed;
      // A direct check's failure, and this exercise's own stub, are this exercise's own.
      const std::string own_stub = fmt::format("not written yet: {} ", exercise.function);
      if (!verdict.passed && !wrong.empty() && !check.direct &&
          verdict.detail.rfind("skipped:", 0) != 0 && verdict.detail.rfind(own_stub, 0) != 0)
        verdict.detail = fmt::format(
            "skipped: {} {} wrong (see the checks above) and this check runs {}; fix that "
            "first. (What this check saw: {})",
            wrong, wrong.find(" and ") == std::string::npos ? "is" : "are",
            wrong.find(" and ") == std::string::npos ? "it" : "them", verdict.detail);
      const bool skipped = !verdict.passed && verdict.detail.rfind("skipped:", 0) == 0;
      fmt::print("  {}  {}\n        {}\n",
                 verdict.passed ? "PASS"
                 : skipped      ? "SKIP"
                                : "FAIL",
                 check.name, verdict.detail);
      std::fflush(stdout);
    }
    if (all)
      passed.push_back(exercise.function);
    else
      failed.push_back(exercise.function);
  }
  return static_cast<int>(passed.size());
}

}  // namespace
}  // namespace dg::learn

int main(int argc, char** argv) {
  bool expect_fail = false;
  std::string expect_wrong;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--expect-fail") == 0) {
      expect_fail = true;
    } else if (std::strcmp(argv[i], "--expect-wrong") == 0 && i + 1 < argc) {
      expect_wrong = argv[++i];
    } else {
      fmt::print(stderr,
                 "{}: unknown argument '{}' (they are --expect-fail and --expect-wrong FUNCTION)\n",
                 argv[0], argv[i]);
      return 2;
    }
  }
  dg::learn::Chapter chapter = dg::learn::chapter();
  if (!expect_wrong.empty()) {
    std::erase_if(chapter.exercises, [&](const dg::learn::Exercise& exercise) {
      return exercise.function != expect_wrong;
    });
    if (chapter.exercises.empty()) {
      fmt::print(stderr, "{}: --expect-wrong: chapter {} has no exercise '{}'\n", argv[0],
                 chapter.number, expect_wrong);
      return 2;
    }
  }
  std::vector<std::string> passed;
  const int n = dg::learn::grade(chapter, passed);
  const int total = static_cast<int>(chapter.exercises.size());
  fmt::print("\n{} of {} exercises pass every check.\n", n, total);
  if (!expect_wrong.empty()) {
    if (n == 0) {
      fmt::print("as expected, this wrong answer to {} fails its checks\n", expect_wrong);
      return 0;
    }
    fmt::print("this wrong answer to {} passed every check: the checks miss it\n", expect_wrong);
    return 1;
  }
  if (!expect_fail) return n == total && total > 0 ? 0 : 1;
  for (const std::string& name : passed)
    fmt::print("expected every exercise to fail with the stubs, but {} passed\n", name);
  return passed.empty() && total > 0 ? 0 : 1;
}
