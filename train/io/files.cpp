// File helpers on POSIX calls (open/read/write/fsync/rename) so every step's errno is reported.
// Does not retry on full disks or handle Windows paths.
#include "train/io/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <system_error>

namespace dg {

namespace {

std::string errno_text(int error) { return std::strerror(error); }

// Closes a descriptor on scope exit unless released.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Closes now and returns close()'s errno (0 on success).
  int close_now() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

std::string parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string random_suffix() {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  return fmt::format("{:016x}", generator());
}

}  // namespace

namespace {
// What a non-regular file is, for the error that refuses it.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

std::string read_file(const std::string& path) {
  // Only regular files are read: a FIFO would block the open (or never end), a device like
  // /dev/zero would be read until memory runs out. Checked before opening (opening some devices
  // has effects) and again on the open descriptor (the path may have changed in between);
  // O_NONBLOCK keeps the open itself from waiting for a FIFO's writer.
  struct stat before {};
  if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode))
    throw std::runtime_error(fmt::format("cannot read {}: it is {}, not a regular file", path,
                                         file_kind(before.st_mode)));
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0)
    throw std::runtime_error(
        fmt::format("cannot open {} for reading: {}", path, errno_text(errno)));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0)
    throw std::runtime_error(fmt::format("cannot stat {}: {}", path, errno_text(errno)));
  if (!S_ISREG(info.st_mode))
    throw std::runtime_error(
        fmt::format("cannot read {}: it is {}, not a regular file", path, file_kind(info.st_mode)));
  std::string bytes;
  bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::read(file.get(), buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("error reading {}: {}", path, errno_text(errno)));
    }
    if (got == 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return bytes;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string directory = parent_directory(path);
  const std::string temp_path =
      fmt::format("{}/.{}.tmp-{}-{}", directory, std::filesystem::path(path).filename().string(),
                  ::getpid(), random_suffix());
  const auto fail = [&](const std::string& step, int error) {
    ::unlink(temp_path.c_str());
    throw std::runtime_error(
        fmt::format("cannot write {}: {} failed: {}", path, step, errno_text(error)));
  };

  {
    FileDescriptor file(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (file.get() < 0) {
      // Nothing was created, so there is nothing to remove.
      throw std::runtime_error(fmt::format("cannot write {}: creating temporary file {} failed: {}",
                                           path, temp_path, errno_text(errno)));
    }
    size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t put = ::write(file.get(), bytes.data() + written, bytes.size() - written);
      if (put < 0) {
        if (errno == EINTR) continue;
        fail("write", errno);
      }
      written += static_cast<size_t>(put);
    }
    if (::fsync(file.get()) != 0) fail("fsync", errno);
    if (const int error = file.close_now()) fail("close", error);
  }
  if (::rename(temp_path.c_str(), path.c_str()) != 0) fail("rename", errno);

  // Make the rename itself durable. Some file systems refuse fsync on directories (EINVAL);
  // the data is already safe then, so only real I/O errors are reported.
  FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno == EIO)
    throw std::runtime_error(fmt::format("cannot write {}: fsync of directory {} failed: {}", path,
                                         directory, errno_text(errno)));
  remove_stale_temporaries(directory);
}

bool is_stale_temporary(const std::string& filename) {
  // .<name>.tmp-<pid>-<16 hex digits>, and no process <pid> any more
  const size_t mark = filename.rfind(".tmp-");
  if (filename.empty() || filename[0] != '.' || mark == std::string::npos) return false;
  const std::string tail = filename.substr(mark + 5);
  const size_t dash = tail.find('-');
  if (dash == std::string::npos || dash == 0 || tail.size() - dash - 1 != 16) return false;
  if (tail.find_first_not_of("0123456789") != dash) return false;
  if (tail.find_first_not_of("0123456789abcdef", dash + 1) != std::string::npos) return false;
  long pid = 0;
  try {
    pid = std::stol(tail.substr(0, dash));
  } catch (const std::exception&) {
    return false;
  }
  if (pid <= 0) return false;
  return pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

int remove_stale_temporaries(const std::string& directory) {
  int removed = 0;
  try {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
      const std::string name = entry.path().filename().string();
      if (is_stale_temporary(name) && ::unlink(entry.path().c_str()) == 0) ++removed;
    }
  } catch (const std::exception&) {
  }
  return removed;  // best effort: an unreadable directory or a file gone meanwhile is no error
}

void make_dirs(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error)
    throw std::runtime_error(fmt::format("cannot create directory {}: {}", path, error.message()));
  if (!dir_exists(path))
    throw std::runtime_error(fmt::format("cannot create directory {}: a file is in the way", path));
}

std::string make_unique_dir(const std::string& base) {
  const std::string parent = parent_directory(base);
  make_dirs(parent);
  for (int attempt = 1; attempt <= 10000; ++attempt) {
    const std::string candidate = attempt == 1 ? base : fmt::format("{}-{}", base, attempt);
    if (::mkdir(candidate.c_str(), 0755) == 0) return candidate;
    if (errno != EEXIST)
      throw std::runtime_error(
          fmt::format("cannot create directory {}: {}", candidate, errno_text(errno)));
  }
  throw std::runtime_error(
      fmt::format("cannot create directory {}: {}-2 … {}-10000 exist too", base, base, base));
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool dir_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

DirectoryLock::DirectoryLock(const std::string& directory) {
  fd_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) return;
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    ::close(fd_);  // no flock here: nothing locked
    fd_ = -1;
    return;
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace dg
