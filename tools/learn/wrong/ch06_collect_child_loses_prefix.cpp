// Wrong answer to Module::collect: a child is walked with its own name as the prefix, not the
// full path: blocks.0.norm.weight comes out as 0.norm.weight (and two blocks' parameters collide
// by name in a checkpoint).
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
      e.child->collect(e.name, out, seen);
    } else if (e.kind == EntryKind::parameter &&
               std::find(seen.begin(), seen.end(), e.parameter.impl()) == seen.end()) {
      seen.push_back(e.parameter.impl());
      out.emplace_back(full, e.parameter);
    }
  }
}

}  // namespace dg
