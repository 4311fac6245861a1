// Whole-file reading, crash-safe atomic file writing, and directory helpers (POSIX).
// Does not lock files, follow special cases for network file systems, or read files lazily.
#pragma once
#include <string>
#include <string_view>

namespace dg {

// The whole file as bytes. Throws std::runtime_error naming the path and the system error.
std::string read_file(const std::string& path);

// Replaces `path` with `bytes` so that readers see the old or the new content, never a mix:
// writes a temporary file in the same directory, fsyncs it, renames it over `path`, then
// fsyncs the directory. On any failure the temporary file is removed and
// std::runtime_error names `path` and the failing step. The directory must exist.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Creates `path` and its missing parents (like mkdir -p). Throws naming the path when it
// cannot, or when something that is not a directory is in the way.
void make_dirs(const std::string& path);

// True when `path` exists and is a regular file (or a symlink to one).
bool file_exists(const std::string& path);

// True when `path` exists and is a directory.
bool dir_exists(const std::string& path);

}  // namespace dg
