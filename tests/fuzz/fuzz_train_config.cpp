// Fuzz target: JSON training configs as `depthgrad train --config` reads them
// (run_config_from_json on json::parse). A config it accepts must survive to_json -> dump ->
// parse -> from_json unchanged; one it refuses must give an error naming the file. It does not
// build the model a config describes (its size is the user's choice, not a reader's defect).
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/lm/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string source = "fuzz-config.json";
  RunConfig config;
  if (!fuzz::accepted(source, [&] {
        config = run_config_from_json(json::parse(fuzz::as_text(data, size), source), source);
      }))
    return 0;
  const json::Value written = to_json(config);
  const std::string text = json::dump(written, 2);
  RunConfig back;
  try {
    back = run_config_from_json(json::parse(text, "written config"), "written config");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a config's own JSON is refused: ") + e.what() + "\n" + text);
  }
  fuzz::check(to_json(back) == written, "config changed on the round-trip:\n" + text);
  return 0;
}
