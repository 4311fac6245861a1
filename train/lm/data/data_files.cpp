// The pinned data set table and the checked loader. The table must agree with
// tools/download-data.sh (a test compares them). Does not fetch, decompress or cache data.
#include "train/lm/data/data_files.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/sha256.h"

namespace dg {

namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

std::string fetch_hint(const std::string& data_dir) {
  return fmt::format("fetch the data with: tools/download-data.sh {}", data_dir);
}

}  // namespace

const std::vector<DatasetFile>& dataset_files() {
  // Sizes and hashes from shared/data/SHA256SUMS and its README; URLs from section 1.1 of the
  // upstream protocol, and the same paths at the commits the README names.
  static const std::vector<DatasetFile> files = {
      {"wikitext-2/train.txt", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f",
       10797148,
       "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/"
       "wikitext-2/train.txt",
       "https://raw.githubusercontent.com/pytorch/examples/"
       "77f55b912142e11fcfdf5b530231fb9c52f181e8/"
       "word_language_model/data/wikitext-2/train.txt"},
      {"wikitext-2/valid.txt", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
       1121681,
       "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/"
       "wikitext-2/valid.txt",
       "https://raw.githubusercontent.com/pytorch/examples/"
       "77f55b912142e11fcfdf5b530231fb9c52f181e8/"
       "word_language_model/data/wikitext-2/valid.txt"},
      {"wikitext-2/test.txt", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
       1256449,
       "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/"
       "wikitext-2/test.txt",
       "https://raw.githubusercontent.com/pytorch/examples/"
       "77f55b912142e11fcfdf5b530231fb9c52f181e8/"
       "word_language_model/data/wikitext-2/test.txt"},
      {"tiny_shakespeare.txt", "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
       1115394,
       "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
       "https://raw.githubusercontent.com/karpathy/char-rnn/"
       "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/"
       "data/tinyshakespeare/input.txt"},
  };
  return files;
}

const DatasetFile& dataset_file(const std::string& relative_path) {
  std::string known;
  for (const DatasetFile& file : dataset_files()) {
    if (file.relative_path == relative_path) return file;
    known += (known.empty() ? "" : ", ") + file.relative_path;
  }
  throw std::runtime_error(
      fmt::format("unknown data set file \"{}\" (known files: {})", relative_path, known));
}

std::string dataset_sha256(const std::string& relative_path) {
  return dataset_file(relative_path).sha256;
}

std::string resolve_data_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const std::string from_env = env_or_empty("DEPTHGRAD_DATA");
  if (!from_env.empty()) return from_env;
  return "./data";
}

std::string load_dataset_file(const std::string& data_dir, const std::string& relative_path) {
  const DatasetFile& pinned = dataset_file(relative_path);
  const std::string path = data_dir + "/" + relative_path;
  if (!file_exists(path))
    throw std::runtime_error(fmt::format("data set file {} is missing; {} (source: {})", path,
                                         fetch_hint(data_dir), pinned.url));
  const std::string bytes = read_file(path);
  const std::string actual_sha = sha256_hex(bytes);
  if (bytes.size() != pinned.bytes)
    throw std::runtime_error(fmt::format(
        "data set file {} has {} bytes, expected {} (sha256 {}, expected {}); it is truncated or a "
        "different "
        "file; {}",
        path, bytes.size(), pinned.bytes, actual_sha, pinned.sha256, fetch_hint(data_dir)));
  if (actual_sha != pinned.sha256)
    throw std::runtime_error(
        fmt::format("data set file {} has sha256 {}, expected {}; it was altered; {}", path,
                    actual_sha, pinned.sha256, fetch_hint(data_dir)));
  return bytes;
}

std::string resolve_cache_dir(const std::string& flag_value) {
  std::string directory = flag_value;
  if (directory.empty()) {
    const std::string xdg = env_or_empty("XDG_CACHE_HOME");
    if (!xdg.empty() && xdg[0] == '/') {  // the XDG spec ignores relative paths
      directory = xdg + "/depthgrad";
    } else {
      const std::string home = env_or_empty("HOME");
      if (home.empty())
        throw std::runtime_error(
            "cannot choose a cache directory: no cache directory flag was given and XDG_CACHE_HOME "
            "and HOME are unset");
      directory = home + "/.cache/depthgrad";
    }
  }
  make_dirs(directory);
  return directory;
}

}  // namespace dg
