// Fuzz target: the JSON parser (train/io/json.h) on arbitrary bytes. A text it accepts must
// survive dump -> parse unchanged, compact and indented, and dump must be a fixed point; a text
// it refuses must give an error naming the source. It does not fuzz the writer on values
// built in memory (the parser's output is the writer's input here).
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string source = "fuzz.json";
  json::Value value;
  if (!fuzz::accepted(source, [&] { value = json::parse(fuzz::as_text(data, size), source); }))
    return 0;
  std::string compact, indented;
  try {
    compact = json::dump(value);
    indented = json::dump(value, 2);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("dump of a parsed value threw: ") + e.what());
  }
  const json::Value again = json::parse(compact, "compact dump");
  fuzz::check(again == value, "dump -> parse changed the value: " + compact);
  fuzz::check(json::parse(indented, "indented dump") == value,
              "indented dump -> parse changed the value: " + indented);
  fuzz::check(json::dump(again) == compact, "dump is not a fixed point: " + compact);
  return 0;
}
