// Fuzz target: tokenizer.json loading (BpeTokenizer::from_json) on arbitrary bytes. A file it
// refuses must give an error naming the file; a tokenizer it accepts must write a JSON that
// reads back to the same tokenizer (to_json a fixed point after one round), and must encode a
// fixed mixed text and its own tokens to in-range ids that decode without throwing. It does not
// assert decode(encode(s)) == s for loaded files (fuzz_bpe_encode does, for a trained one).
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/lm/text/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const std::string source = "fuzz-tokenizer.json";
  BpeTokenizer tokenizer;
  if (!fuzz::accepted(
          source, [&] { tokenizer = BpeTokenizer::from_json(fuzz::as_text(data, size), source); }))
    return 0;
  const std::string json = tokenizer.to_json();
  BpeTokenizer back;
  try {
    back = BpeTokenizer::from_json(json, "written tokenizer.json");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a loaded tokenizer's own JSON is refused: ") + e.what());
  }
  fuzz::check(back.to_json() == json, "to_json is not a fixed point after one round");

  std::string sample = "Hello, world! It's 2024 \xC3\xA9\xE4\xB8\xAD <unk> \xFF\x80";
  for (int id = 0; id < tokenizer.vocab_size() && id < 64; ++id) sample += tokenizer.token(id);
  for (const BpeTokenizer::AddedToken& added : tokenizer.added_tokens()) sample += added.content;
  std::vector<int32_t> ids;
  // A byte outside the vocabulary with no unk token is refused with a message saying so.
  if (!fuzz::accepted("is not in the vocabulary", [&] { ids = tokenizer.encode(sample); }))
    return 0;
  for (const int32_t id : ids)
    fuzz::check(id >= 0 && id < tokenizer.vocab_size(), "id out of range: " + std::to_string(id));
  fuzz::check(back.encode(sample) == ids, "the read-back tokenizer encodes differently");
  tokenizer.decode(ids);
  return 0;
}
