// Refusing to replace an earlier run's files, and --overwrite (see output_guard.h).
#include "tools/cli/output_guard.h"

#include <fmt/core.h>

#include <filesystem>
#include <stdexcept>

namespace dg::cli {

Flags& add_overwrite_flag(Flags& f, const std::string& what) {
  return f.add_switch("overwrite", "replace " + what + " (without it, an existing one is refused)");
}

std::vector<std::string> files_present(const std::string& dir,
                                       const std::vector<std::string>& files) {
  std::vector<std::string> present;
  for (const std::string& name : files) {
    std::error_code ec;
    const auto status = std::filesystem::symlink_status(std::filesystem::path(dir) / name, ec);
    if (!ec && std::filesystem::exists(status)) present.push_back(name);
  }
  return present;
}

std::string replace_refusal(const std::string& dir, const std::vector<std::string>& files,
                            const std::string& what, const std::string& ways) {
  const std::vector<std::string> present = files_present(dir, files);
  if (present.empty()) return "";
  std::string list;
  for (const std::string& name : present) list += (list.empty() ? "" : ", ") + name;
  return fmt::format("{} holds {} ({}): {}", dir, what, list, ways);
}

void remove_files(const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& name : files_present(dir, files)) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code ec;
    std::filesystem::remove(path, ec);  // a folder in the way is refused, not emptied
    if (ec)
      throw std::runtime_error(
          fmt::format("--overwrite: cannot remove {}: {}", path.string(), ec.message()));
  }
}

}  // namespace dg::cli
