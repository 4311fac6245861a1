// File helpers on POSIX calls (open/read/write/fsync/rename) so every step's errno is reported.
// Does not retry on full disks or handle Windows paths.
#include "train/io/files.h"

#include <fcntl.h>
#include <fmt/format.h>
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

std::string read_file(const std::string& path) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0)
    throw std::runtime_error(
        fmt::format("cannot open {} for reading: {}", path, errno_text(errno)));
  struct stat info {};
  if (::fstat(file.get(), &info) != 0)
    throw std::runtime_error(fmt::format("cannot stat {}: {}", path, errno_text(errno)));
  if (S_ISDIR(info.st_mode))
    throw std::runtime_error(fmt::format("cannot read {}: it is a directory", path));
  std::string bytes;
  if (S_ISREG(info.st_mode)) bytes.reserve(static_cast<size_t>(info.st_size));
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
  const std::string temp_path = fmt::format(
      "{}/.{}.tmp-{}", directory, std::filesystem::path(path).filename().string(), random_suffix());
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
}

void make_dirs(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error)
    throw std::runtime_error(fmt::format("cannot create directory {}: {}", path, error.message()));
  if (!dir_exists(path))
    throw std::runtime_error(fmt::format("cannot create directory {}: a file is in the way", path));
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool dir_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

}  // namespace dg
