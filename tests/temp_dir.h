// TempDir: the one way tests make a scratch directory. A fresh directory under the system temp
// directory, unique to the object (mkdtemp), removed with everything in it when it goes out of
// scope. Test code only; it does not keep the directory for inspection after a failure.
#pragma once
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace dg::test {

class TempDir {
 public:
  // The directory is named dg-<tag>-XXXXXX under std::filesystem::temp_directory_path().
  explicit TempDir(const std::string& tag = "test") : path(make(tag)) {}
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // path / name, as a string.
  std::string file(const std::string& name) const { return (path / name).string(); }

  const std::filesystem::path path;

 private:
  static std::filesystem::path make(const std::string& tag) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("dg-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::generic_category(), "TempDir: cannot create " + pattern);
    return pattern;
  }
};

}  // namespace dg::test
