// Fuzz target: a random tokenizer, written and read back. The input gives up to 4 training
// texts (any bytes), a vocabulary size, a minimum frequency and optional specials; train_bpe
// trains on them, and then: to_json -> from_json gives the same tokens, merges and added tokens
// and encodes alike, and every training text round-trips exactly (decode(encode(t)) == t, since
// all of its bytes are in the vocabulary). It does not compare with Hugging Face
// (tests/test_bpe.cpp has goldens).
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/lm/text/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  fuzz::Bytes in(data, size);
  const int vocab_size = static_cast<int>(in.in_range(0, 400));
  const int min_frequency = static_cast<int>(in.in_range(0, 3));
  std::vector<std::string> specials;
  for (uint32_t i = in.in_range(0, 2); i > 0; --i) specials.push_back(in.string(6));
  std::vector<std::string> texts(in.in_range(1, 4));
  for (std::string& text : texts) text = in.string(255);
  if (!in.empty()) texts.back() += in.rest();
  const std::vector<std::string_view> views(texts.begin(), texts.end());

  BpeTokenizer tokenizer;
  try {
    tokenizer = train_bpe(views, vocab_size, min_frequency, specials);
  } catch (const std::invalid_argument&) {
    return 0;  // empty, duplicate or non-UTF-8 specials: refused as documented
  }
  const std::string json = tokenizer.to_json();
  BpeTokenizer back;
  try {
    back = BpeTokenizer::from_json(json, "trained tokenizer.json");
  } catch (const std::exception& e) {
    fuzz::fail(std::string("a trained tokenizer's own JSON is refused: ") + e.what());
  }
  fuzz::check(back.vocab_size() == tokenizer.vocab_size(), "vocab size changed on the round-trip");
  for (int id = 0; id < tokenizer.vocab_size(); ++id)
    fuzz::check(back.token(id) == tokenizer.token(id), "token changed: id " + std::to_string(id));
  fuzz::check(back.merges() == tokenizer.merges(), "merges changed on the round-trip");
  fuzz::check(back.added_tokens().size() == tokenizer.added_tokens().size(),
              "added tokens changed");
  fuzz::check(back.to_json() == json, "to_json is not a fixed point");
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    fuzz::check(back.encode(text) == ids, "the read-back tokenizer encodes differently");
    fuzz::check(tokenizer.decode(ids) == text, "a training text does not round-trip");
  }
  return 0;
}
