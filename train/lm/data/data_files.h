// Where the data and cache directories are, and the pinned data set files: each is read whole
// and checked against its pinned size and SHA-256 before use. Never downloads anything itself:
// a missing or altered file is an error that says how to fetch it (tools/download-data.sh).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dg {

struct DatasetFile {
  std::string relative_path;  // inside the data directory, e.g. "wikitext-2/valid.txt"
  std::string sha256;         // lowercase hex
  uint64_t bytes;
  std::string url;         // canonical source (tracks a branch, tools/attnres/PROTOCOL.md §1.1)
  std::string pinned_url;  // the same file at a fixed commit
};

// The four pinned files: wikitext-2/{train,valid,test}.txt and tiny_shakespeare.txt.
const std::vector<DatasetFile>& dataset_files();

// The table entry for `relative_path`; throws std::runtime_error listing the known files.
const DatasetFile& dataset_file(const std::string& relative_path);

// The pinned SHA-256 (lowercase hex) of a data set file; throws for unknown files.
std::string dataset_sha256(const std::string& relative_path);

// The data directory: `flag_value` when non-empty, else $DEPTHGRAD_DATA when set and non-empty,
// else "./data".
std::string resolve_data_dir(const std::string& flag_value);

// The content of data_dir/relative_path after checking its size and SHA-256. A missing file,
// a size mismatch or a hash mismatch throws std::runtime_error naming the file, what is wrong
// (both hashes for a mismatch) and the command that fetches it: tools/download-data.sh <data_dir>.
std::string load_dataset_file(const std::string& data_dir, const std::string& relative_path);

// The cache directory, created when missing: `flag_value` when non-empty, else
// $XDG_CACHE_HOME/depthgrad (when set to an absolute path), else $HOME/.cache/depthgrad.
// Throws when none can be determined or the directory cannot be created.
std::string resolve_cache_dir(const std::string& flag_value);

}  // namespace dg
