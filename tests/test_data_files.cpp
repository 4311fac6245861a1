// Data and cache directory resolution, the pinned data set table (against SHA256SUMS and
// tools/download-data.sh), the checked loader on real, missing, truncated and altered files, and
// the encoded-ids cache files of train/lm/data/corpus.h.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/temp_dir.h"
#include "tests/test_data.h"
#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/lm/data/corpus.h"
#include "train/lm/data/data_files.h"

namespace fs = std::filesystem;
using dg::test::TempDir;

namespace {

// Sets (or unsets, with nullopt) an environment variable for one scope, then restores it.
class EnvVar {
 public:
  EnvVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string error_of(const std::string& data_dir, const std::string& relative_path) {
  try {
    dg::load_dataset_file(data_dir, relative_path);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("data_files: data directory from flag, then DEPTHGRAD_DATA, then ./data") {
  {
    EnvVar env("DEPTHGRAD_DATA", "/from/env");
    CHECK(dg::resolve_data_dir("/from/flag") == "/from/flag");
    CHECK(dg::resolve_data_dir("") == "/from/env");
  }
  {
    EnvVar env("DEPTHGRAD_DATA", "");
    CHECK(dg::resolve_data_dir("") == "./data");
  }
  {
    EnvVar env("DEPTHGRAD_DATA", std::nullopt);
    CHECK(dg::resolve_data_dir("") == "./data");
  }
}

TEST_CASE("data_files: cache directory from flag, XDG_CACHE_HOME, then HOME; created on demand") {
  TempDir dir("data-files");
  const std::string flag_dir = (dir.path / "flag" / "cache").string();
  CHECK(dg::resolve_cache_dir(flag_dir) == flag_dir);
  CHECK(dg::dir_exists(flag_dir));
  {
    EnvVar xdg("XDG_CACHE_HOME", (dir.path / "xdg").string());
    CHECK(dg::resolve_cache_dir("") == (dir.path / "xdg" / "depthgrad").string());
    CHECK(dg::dir_exists((dir.path / "xdg" / "depthgrad").string()));
  }
  {
    EnvVar xdg("XDG_CACHE_HOME", "relative/ignored");
    EnvVar home("HOME", (dir.path / "home").string());
    CHECK(dg::resolve_cache_dir("") == (dir.path / "home" / ".cache" / "depthgrad").string());
    CHECK(dg::dir_exists((dir.path / "home" / ".cache" / "depthgrad").string()));
  }
  {
    EnvVar xdg("XDG_CACHE_HOME", std::nullopt);
    EnvVar home("HOME", std::nullopt);
    CHECK_THROWS_WITH_AS(dg::resolve_cache_dir(""),
                         doctest::Contains("cannot choose a cache directory"), std::runtime_error);
  }
  // A file where the directory should be.
  dg::write_file_atomic((dir.path / "blocker").string(), "x");
  CHECK_THROWS_WITH_AS(dg::resolve_cache_dir((dir.path / "blocker").string()),
                       doctest::Contains("blocker"), std::runtime_error);
}

TEST_CASE("data_files: the pinned table matches SHA256SUMS and tools/download-data.sh") {
  REQUIRE(dg::dataset_files().size() == 4);
  CHECK(dg::dataset_sha256("tiny_shakespeare.txt") ==
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed");
  CHECK(dg::dataset_file("wikitext-2/valid.txt").bytes == 1121681);
  CHECK_THROWS_WITH_AS(
      dg::dataset_sha256("alpaca/alpaca_data.json"),
      doctest::Contains(
          "unknown data set file \"alpaca/alpaca_data.json\" (known files: wikitext-2/train.txt"),
      std::runtime_error);
#ifdef DG_SOURCE_DIR
  const std::string script = dg::read_file(std::string(DG_SOURCE_DIR) + "/tools/download-data.sh");
  for (const dg::DatasetFile& file : dg::dataset_files()) {
    CAPTURE(file.relative_path);
    CHECK(script.find(fmt::format("\"{}|{}|{}|{}\"", file.relative_path, file.sha256, file.url,
                                  file.pinned_url)) != std::string::npos);
  }
#else
  MESSAGE("DG_SOURCE_DIR is not defined: not comparing with tools/download-data.sh");
#endif
  const std::optional<std::string> data_dir_or_none = dg::test::data_dir_or_skip();
  if (!data_dir_or_none) return;
  const std::string data_dir = *data_dir_or_none;
  std::istringstream sums(dg::read_file(data_dir + "/SHA256SUMS"));
  std::string sha, name;
  int listed = 0;
  while (sums >> sha >> name) {
    CAPTURE(name);
    CHECK(dg::dataset_sha256(name) == sha);
    CHECK(fs::file_size(fs::path(data_dir) / name) == dg::dataset_file(name).bytes);
    ++listed;
  }
  CHECK(listed == 4);
}

TEST_CASE("data_files: load_dataset_file reads good files and explains missing or altered ones") {
  const std::optional<std::string> data_dir_or_none = dg::test::data_dir_or_skip();
  if (!data_dir_or_none) return;
  const std::string data_dir = *data_dir_or_none;
  const std::string valid = dg::load_dataset_file(data_dir, "wikitext-2/valid.txt");
  CHECK(valid.size() == 1121681);
  const std::string first_lines = " \n = Homarus gammarus = \n \n Homarus gammarus , known as";
  CHECK(valid.substr(0, first_lines.size()) == first_lines);
  const std::string shakespeare = dg::load_dataset_file(data_dir, "tiny_shakespeare.txt");
  CHECK(shakespeare.substr(0, 15) == "First Citizen:\n");

  TempDir dir("data-files");
  const std::string temp_data = dir.path.string();
  // Missing.
  const std::string missing = error_of(temp_data, "wikitext-2/valid.txt");
  CHECK(missing.find(temp_data + "/wikitext-2/valid.txt is missing") != std::string::npos);
  CHECK(missing.find("tools/download-data.sh " + temp_data) != std::string::npos);
  CHECK(missing.find("https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/"
                     "data/wikitext-2/valid.txt") != std::string::npos);
  // One byte changed: same size, different hash; both hashes are named.
  fs::create_directories(dir.path / "wikitext-2");
  std::string altered = valid;
  altered[1000] = altered[1000] == 'x' ? 'y' : 'x';
  dg::write_file_atomic(temp_data + "/wikitext-2/valid.txt", altered);
  const std::string mismatch = error_of(temp_data, "wikitext-2/valid.txt");
  CHECK(mismatch.find("has sha256 ") != std::string::npos);
  CHECK(
      mismatch.find("expected f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8") !=
      std::string::npos);
  CHECK(mismatch.find("was altered") != std::string::npos);
  CHECK(mismatch.find("tools/download-data.sh " + temp_data) != std::string::npos);
  // Truncated: the size is named as well as both hashes.
  dg::write_file_atomic(temp_data + "/wikitext-2/valid.txt", valid.substr(0, 1000));
  const std::string truncated = error_of(temp_data, "wikitext-2/valid.txt");
  CHECK(truncated.find("has 1000 bytes, expected 1121681") != std::string::npos);
  CHECK(
      truncated.find("expected f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8") !=
      std::string::npos);
  // An intact copy in the temp directory loads.
  dg::write_file_atomic(temp_data + "/wikitext-2/valid.txt", valid);
  CHECK(dg::load_dataset_file(temp_data, "wikitext-2/valid.txt") == valid);
}

TEST_CASE("ids cache: round-trip, and damaged files are refused without huge allocations") {
  const std::vector<int32_t> ids{1, 2, 3, 500, 0, -1};
  const std::string good = dg::serialize_ids(ids);
  std::vector<int32_t> back;
  CHECK(dg::deserialize_ids(good, back));
  CHECK(back == ids);
  CHECK(
      dg::deserialize_ids(dg::serialize_ids({}), back));  // once a memcpy from a null pointer (UB)
  CHECK(back.empty());
  CHECK_FALSE(dg::deserialize_ids(good.substr(0, good.size() - 1), back));
  std::string flipped = good;
  flipped[20] ^= 1;
  CHECK_FALSE(dg::deserialize_ids(flipped, back));
  // A count of 2^62 makes 16 + 4n + 32 wrap around to 48: the header, no ids and the SHA-256 of
  // nothing passed the size check and asked for a vector of 2^62 ids (std::length_error).
  std::string wrapped = "DGIDS001";
  const uint64_t count = uint64_t{1} << 62;
  wrapped.append(reinterpret_cast<const char*>(&count), 8);
  dg::Sha256 empty;
  const auto digest = empty.finish();
  wrapped.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  REQUIRE(wrapped.size() == 48);
  CHECK_FALSE(dg::deserialize_ids(wrapped, back));
}
