// The run-time files' folder (see runtime_files.h). CMakeLists.txt defines, for this file only,
// DG_BUILD_DIR (the folder the program is built into), DG_SOURCE_RUNTIME_DIR (the source tree's
// tools/) and DG_INSTALLED_RUNTIME_DIR (share/depthgrad relative to the installed bin/). It does
// not search: one location per place the program runs from.
#include "tools/cli/runtime_files.h"

#include <fmt/core.h>

#include <filesystem>
#include <stdexcept>

namespace dg::cli {

std::string runtime_files_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot resolve /proc/self/exe to find the program's files");
  const fs::path exe_dir = exe.parent_path();
  // The program where it was built: the source tree's files, so an edit applies without a build.
  if (fs::equivalent(exe_dir, fs::path(DG_BUILD_DIR), ec) && !ec) return DG_SOURCE_RUNTIME_DIR;
  // Anywhere else it is an installed program (cmake --install copies it to <prefix>/bin).
  return (exe_dir / DG_INSTALLED_RUNTIME_DIR).lexically_normal().string();
}

std::string runtime_file(const std::string& name, const std::string& instead) {
  const std::string dir = runtime_files_dir();
  const std::string path = (std::filesystem::path(dir) / name).string();
  if (!std::filesystem::is_regular_file(path))
    throw std::runtime_error(fmt::format(
        "{} is missing: this depthgrad reads its {} from {} (installed by cmake --install beside "
        "bin/depthgrad; for the program in its build folder, the source tree's tools/); {}",
        path, name, dir, instead));
  return path;
}

}  // namespace dg::cli
