// Fuzz target: the byte-level BPE encoder (train/lm/text/bpe.h) on arbitrary bytes, with a small
// tokenizer trained once on a fixed mixed-script text (so some bytes are not in its vocabulary)
// plus the corpus's specials. Checks what bpe.h promises: every id is in range, and
// decode(encode(s)) is s with each byte that is not in the vocabulary replaced by "<unk>"; the
// same tokenizer read back from its tokenizer.json encodes identically. Training is
// fuzz_bpe_train's job.
#include <array>
#include <cstdint>

#include "tests/fuzz/fuzz_common.h"
#include "train/lm/text/bpe.h"

namespace {

struct Fixture {
  dg::BpeTokenizer tokenizer, reloaded;
  std::array<bool, 256> known{};  // byte b is in the vocabulary
  int32_t unk = -1;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    const std::string text =
        "The quick brown fox jumps over the lazy dog; the dog sleeps. It's 12:30 and we're "
        "done, aren't we? Numbers 0123456789 and   spaces\ttabs\nnewlines\r\n. "
        "Caf\xC3\xA9 na\xC3\xAFve \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 "
        "\xCE\xB1\xCE\xB2\xCE\xB3 "
        "<bos> text <eos> THE QUICK BROWN FOX the the the fox fox dog dog "
        "x_y-z+w=v/u\\t|s!@#$%^&*()[]{}";
    Fixture out;
    out.tokenizer =
        dg::train_bpe({text, text.substr(40)}, 300, 1, {"<pad>", "<unk>", "<bos>", "<eos>"});
    out.reloaded = dg::BpeTokenizer::from_json(out.tokenizer.to_json(), "trained tokenizer");
    out.unk = out.tokenizer.token_id("<unk>");
    for (int b = 0; b < 256; ++b) {
      const std::vector<int32_t> ids = out.tokenizer.encode(std::string(1, static_cast<char>(b)));
      out.known[b] = !(ids.size() == 1 && ids[0] == out.unk);
    }
    return out;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  const Fixture& f = fixture();
  const std::string_view text = fuzz::as_text(data, size);
  std::vector<int32_t> ids;
  try {
    ids = f.tokenizer.encode(text);
  } catch (const std::exception& e) {
    fuzz::fail(std::string("encode threw: ") + e.what());
  }
  for (const int32_t id : ids)
    fuzz::check(id >= 0 && id < f.tokenizer.vocab_size(), "id out of range: " + std::to_string(id));
  std::string expected;
  for (const unsigned char byte : text) {
    if (f.known[byte])
      expected += static_cast<char>(byte);
    else
      expected += "<unk>";
  }
  fuzz::check(f.tokenizer.decode(ids) == expected,
              "decode(encode(s)) is not s (unknown bytes as <unk>)");
  fuzz::check(f.reloaded.encode(text) == ids,
              "the tokenizer read back from its JSON encodes differently");
  return 0;
}
