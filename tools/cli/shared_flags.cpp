// The shared data-location and thread flags (see shared_flags.h).
#include "tools/cli/shared_flags.h"

#include <fmt/core.h>

#include <stdexcept>

#include "tensor/threads.h"
#include "train/data_files.h"
#include "train/fsutil.h"

namespace dg::cli {

Flags& add_data_location_flags(Flags& f) {
  return f.add("dataset-dir", "", "data directory (else $DEPTHGRAD_DATA, else ./data)")
      .add("cache-dir", "", "tokenizer/ids cache (else $XDG_CACHE_HOME/depthgrad, else ~/.cache/depthgrad)")
      .add_switch("no-cache", "do not read or write the tokenizer/ids cache");
}

DataLocation resolve_data_location(const Flags& f) {
  DataLocation d;
  d.data_dir = resolve_data_dir(f.get("dataset-dir"));
  if (!dir_exists(d.data_dir))
    throw std::runtime_error(fmt::format(
        "--dataset-dir: {} does not exist (fetch the data with tools/download-data.sh {})", d.data_dir, d.data_dir));
  d.cache_dir = f.get_bool("no-cache") ? "" : resolve_cache_dir(f.get("cache-dir"));
  return d;
}

Flags& add_threads_flag(Flags& f) {
  return f.add("threads", "", "threads for OpenMP and OpenBLAS (default: DEPTHGRAD_THREADS or physical cores)");
}

int apply_threads_flag(const Flags& f) {
  if (!f.given("threads")) {
    init_threads_from_env();
    return threads();
  }
  const int n = parse_threads(f.get("threads"), "--threads");
  set_threads(n);
  return n;
}

}  // namespace dg::cli
