// Wrong answer to Module::collect: every tensor entry listed, buffers included. A buffer (running
// statistics, a step counter) is state, not a parameter: the optimiser would update it and
// parameter_count() would count it.
#include <algorithm>
#include <string>
#include <vector>

#include "nn/module.h"

namespace dg {

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const Entry& e : entries_) {
    std::string full = prefix.empty() ? e.name : prefix + "." + e.name;
    if (e.child) {
      e.child->collect(full, out, seen);
    } else if (std::find(seen.begin(), seen.end(), e.parameter.impl()) == seen.end()) {
      seen.push_back(e.parameter.impl());
      out.emplace_back(full, e.parameter);
    }
  }
}

}  // namespace dg
