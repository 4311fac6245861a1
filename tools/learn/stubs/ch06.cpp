// Chapter 6's exercises (nn/learn-06-modules.md): write each function below, then run
// `make learn CHAPTER=6`. Each has the library's signature; each body is yours to write (the
// stub only says it is not written). Read the chapter's "Exercises" section first.
#include <string>
#include <vector>

#include "nn/init.h"
#include "nn/module.h"
#include "tools/learn/grade.h"

namespace dg {

// fan_in and fan_out of a weight [out, in, k...], as torch's _calculate_fan_in_and_fan_out.
init::Fans init::calculate_fans(const Tensor& t) { dg::learn::not_written("calculate_fans"); }

// The kaiming initialisers' standard deviation: gain / √fan.
double init::kaiming_std(const Tensor& t, double a, init::FanMode mode,
                         init::Nonlinearity nonlinearity) {
  dg::learn::not_written("kaiming_std");
}

// named_parameters' walk over this module's entries (entries_), children under "prefix.name".
void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out,
                     std::vector<const TensorImpl*>& seen) const {
  dg::learn::not_written("Module::collect");
}

}  // namespace dg
