// File helpers: read errors name the path, atomic writes replace whole files and leave no
// temporary files behind when they fail, make_dirs creates parents.
#include <doctest/doctest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "tests/temp_dir.h"
#include "train/io/files.h"

namespace fs = std::filesystem;
using dg::test::TempDir;

namespace {

size_t entry_count(const TempDir& dir) {
  return static_cast<size_t>(
      std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("files: atomic write then read returns the exact bytes") {
  TempDir dir("files");
  const std::string path = dir.file("blob.bin");
  std::string bytes;
  for (int i = 0; i < 200000; ++i)
    bytes += static_cast<char>((i * 7919) & 0xFF);  // includes NUL bytes
  dg::write_file_atomic(path, bytes);
  CHECK(dg::file_exists(path));
  CHECK(dg::read_file(path) == bytes);
  // Overwriting replaces the whole content (a shorter file leaves no tail of the old one).
  dg::write_file_atomic(path, "short");
  CHECK(dg::read_file(path) == "short");
  dg::write_file_atomic(path, "");
  CHECK(dg::read_file(path).empty());
  CHECK(entry_count(dir) == 1);  // no temporary files left over
}

TEST_CASE("files: errors name the path and the reason") {
  TempDir dir("files");
  const std::string missing = dir.file("nope.txt");
  CHECK_FALSE(dg::file_exists(missing));
  CHECK_THROWS_WITH_AS(
      dg::read_file(missing),
      doctest::Contains((missing + " for reading: No such file or directory").c_str()),
      std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::read_file(dir.path.string()), doctest::Contains("it is a directory"),
                       std::runtime_error);
  CHECK_FALSE(dg::file_exists(dir.path.string()));
  CHECK(dg::dir_exists(dir.path.string()));

  // Writing into a directory that does not exist.
  const std::string in_missing_dir = dir.file("no/such/dir/out.txt");
  CHECK_THROWS_WITH_AS(dg::write_file_atomic(in_missing_dir, "x"),
                       doctest::Contains(("cannot write " + in_missing_dir).c_str()),
                       std::runtime_error);

  // The rename step fails when the target is a non-empty directory: the temp file must go.
  const std::string blocked = dir.file("blocked");
  fs::create_directories(fs::path(blocked) / "child");
  CHECK_THROWS_WITH_AS(dg::write_file_atomic(blocked, "data"),
                       doctest::Contains(("cannot write " + blocked + ": rename failed").c_str()),
                       std::runtime_error);
  CHECK(entry_count(dir) == 1);  // only "blocked" itself
}

TEST_CASE("files: make_dirs creates parents and refuses files in the way") {
  TempDir dir("files");
  const std::string nested = dir.file("a/b/c");
  dg::make_dirs(nested);
  CHECK(dg::dir_exists(nested));
  dg::make_dirs(nested);  // existing is fine
  dg::write_file_atomic(dir.file("a/file"), "x");
  CHECK_THROWS_WITH_AS(dg::make_dirs(dir.file("a/file")),
                       doctest::Contains(dir.file("a/file").c_str()), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::make_dirs(dir.file("a/file/below")),
                       doctest::Contains("cannot create directory"), std::runtime_error);
  CHECK(dg::read_file(dir.file("a/file")) == "x");
}

TEST_CASE("TempDir: a fresh directory per object, removed with its contents") {
  fs::path first_path;
  {
    TempDir first("files"), second("files");
    first_path = first.path;
    CHECK(fs::is_directory(first.path));
    CHECK(first.path != second.path);
    CHECK(entry_count(first) == 0);
    fs::create_directories(first.path / "nested" / "deeper");
    dg::write_file_atomic(first.file("nested/deeper/x.txt"), "x");
  }
  CHECK_FALSE(fs::exists(first_path));
}
