// Planted errors, the gradient checks' teeth: a backward observer (autograd/tape.h) that makes one
// op's backward wrong by 1% in one element, for tools/gradcheck_teeth.sh. Test support only: it is
// never linked into the library, the depthgrad program or dg_tests.
#pragma once

namespace dg::test {

// Reads DG_PLANT_ERROR and, when it is set, installs the observer for the rest of the program:
//   <op>      every backward of the ops named <op> scales the largest element of its contribution
//             to its first floating input's gradient by 1.01;
//   <op>:f32  the same in float32 backwards only (what the float32-vs-float64 comparison must
//             catch);
//   <op>:grad2  the same in every node that <op>'s backward recorded under create_graph, when a
//             later backward runs it: an error in <op>'s second derivative only (what
//             gradgradcheck must catch);
//   list      prints "op <name>" on stderr the first time each op's backward runs, and
//             "op2 <name>" the first time a node recorded by <op>'s backward runs.
// Returns false (and installs nothing) when DG_PLANT_ERROR is unset or empty.
bool install_planted_error_from_env();

}  // namespace dg::test
