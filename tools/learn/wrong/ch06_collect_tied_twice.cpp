// Wrong answer to Module::collect: no record of the tensors already listed, so a tied weight (the
// head reusing the embedding's) is listed twice. The optimiser then updates it twice per step and
// parameter_count() counts it twice (torch lists it once).
#include <string>
#include <vector>

#include "nn/module.h"

namespace dg {

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const Entry& e : entries_) {
    std::string full = prefix.empty() ? e.name : prefix + "." + e.name;
    if (e.child)
      e.child->collect(full, out, seen);
    else if (e.kind == EntryKind::parameter)
      out.emplace_back(full, e.parameter);
  }
}

}  // namespace dg
