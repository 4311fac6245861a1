// Whole-file reading, crash-safe atomic file writing, and directory helpers (POSIX).
// Does not lock files, follow special cases for network file systems, or read files lazily.
#pragma once
#include <string>
#include <string_view>

namespace dg {

// The whole file as bytes. Throws std::runtime_error naming the path and the system error, and
// refuses (before reading) anything that is not a regular file: directories, FIFOs, devices.
std::string read_file(const std::string& path);

// Replaces `path` with `bytes` so that readers see the old or the new content, never a mix:
// writes a temporary file in the same directory, fsyncs it, renames it over `path`, then
// fsyncs the directory. On any failure the temporary file is removed and
// std::runtime_error names `path` and the failing step. The directory must exist.
// Every file depthgrad writes goes through here (the one exception is the append-only step log,
// tools/cli/progress.h). The temporary is named .<name>.tmp-<pid>-<16 hex digits>; after each
// write the directory's temporaries of writers that no longer run are removed.
void write_file_atomic(const std::string& path, std::string_view bytes);

// True for a temporary of write_file_atomic whose writing process no longer exists (killed
// mid-write): readers never open temporaries, and such a file is safe to delete.
bool is_stale_temporary(const std::string& filename);
// Deletes the stale temporaries in `directory`; returns how many. Never throws.
int remove_stale_temporaries(const std::string& directory);

// Creates `path` and its missing parents (like mkdir -p). Throws naming the path when it
// cannot, or when something that is not a directory is in the way.
void make_dirs(const std::string& path);

// Creates a new directory `base` (its parents as needed) that no other process has: mkdir is
// exclusive, so when `base` exists (another run started in the same microsecond, or a folder of
// that name was made by hand) it tries `base`-2, `base`-3, … Returns the one it created.
std::string make_unique_dir(const std::string& base);

// True when `path` exists and is a regular file (or a symlink to one).
bool file_exists(const std::string& path);

// True when `path` exists and is a directory.
bool dir_exists(const std::string& path);

// An exclusive advisory lock (flock) on a directory, held while the object lives: for processes
// that each read some files there and rewrite one they share (the ranks of a reproduce run and
// its state.json). Blocks until the lock is free. Where the directory cannot be opened or the
// file system has no flock it locks nothing (the writes stay atomic, the union best effort).
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& directory);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dg
