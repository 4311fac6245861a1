// Generation: the K/V-cached decoder against MicroLM::forward at every position in every residual
// mode (with and without GQA, float32 and float64, prefill chunks and single steps), greedy
// decoding against the full forward's argmax (across context moves too), sampling (seeds, top-k,
// top-p, temperature, option checks), long prompts, UTF-8 streaming and the training sample; the
// CausalLM interface (its checks, reset, the calls generate_tokens makes as the window slides, a
// user's own CausalLM, and the recomputing wrapper against the Decoder).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

#include "nn/containers.h"
#include "nn/lm/causal_lm.h"
#include "nn/lm/decode.h"
#include "tests/test_helpers.h"
#include "train/lm/generate.h"

using namespace dg;

namespace {

// Every parameter random and away from degenerate values: routes and pseudo-queries clearly
// non-uniform, the V route unlike the QK route (init_identical would make rd equal block).
void randomize(const Module& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    double lo = -0.2, hi = 0.2;
    const bool bias = name.ends_with(".bias");
    if (name.find("_query") != std::string::npos || name.find("_route") != std::string::npos) {
      lo = -0.8, hi = 0.8;
    } else if (p.dim() == 1 && !bias) {
      lo = 0.7, hi = 1.3;
    } else if (p.dim() == 2) {
      hi = 1.5 / std::sqrt(static_cast<double>(p.size(1)));
      lo = -hi;
    }
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(p.numel());
    for (double& x : v) x = dist(rng);
    p.copy_from(Tensor::from_vector(v, p.shape(), p.dtype()));
  }
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  return ids;
}

MicroLMConfig tiny_config(ResidualMode mode, int64_t kv_heads) {
  MicroLMConfig c;
  c.vocab = 53;
  c.dim = 16;
  c.layers = 3;
  c.heads = 4;
  c.kv_heads = kv_heads;
  c.seq_len = 11;
  c.expansion = 2;
  c.mode = mode;
  return c;
}

const std::vector<ResidualMode> kModes = all_residual_modes();

// Full-forward logits [T, V] of ids.
Tensor full_logits(MicroLM& model, const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(ids.size());
  return dg::raw::view_reshape(model.forward(Tensor::from_ids(ids, {1, T})),
                               {T, model.config().vocab});
}

int32_t argmax_row(const Tensor& logits, int64_t row) {
  std::vector<double> v = dg::raw::view_narrow(logits, 0, row, 1).to_vector();
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Checks the decoder's logits against the full forward at every position: one position per call,
// and a prefill chunk of `chunk` positions followed by single steps.
void check_against_forward(const MicroLMConfig& config, DType dtype, double tolerance) {
  MicroLM model(config, dtype);
  randomize(model, 11);
  const std::vector<int32_t> ids = random_ids(config.seq_len, config.vocab, 5);
  const Tensor full = full_logits(model, ids);
  Decoder decoder(model);
  // Chunks before single steps: none; a prompt (from position 0, the fused kernel); the whole
  // context; chunks that start later (the per-row loop over the cache, several rows at once).
  const std::vector<std::vector<int64_t>> patterns = {{}, {4}, {config.seq_len}, {3, 4}, {1, 2, 5}};
  for (const std::vector<int64_t>& chunks : patterns) {
    CAPTURE(chunks.size());
    CAPTURE(chunks.empty() ? 0 : chunks.back());
    decoder.reset();
    int64_t t = 0;
    for (int64_t chunk : chunks) {
      const Tensor& got = decoder.append(std::span(ids.data() + t, chunk), true);
      REQUIRE(got.shape() == Shape{chunk, config.vocab});
      CHECK(test::rel_diff(got.to_vector(), dg::raw::view_narrow(full, 0, t, chunk).to_vector()) <
            tolerance);
      t += chunk;
    }
    for (; t < config.seq_len; ++t) {
      CAPTURE(t);
      const Tensor& step = decoder.append(std::span(ids.data() + t, 1));
      REQUIRE(step.shape() == Shape{config.vocab});
      CHECK(
          test::rel_diff(step.to_vector(),
                         dg::raw::view_reshape(dg::raw::view_narrow(full, 0, t, 1), {config.vocab})
                             .to_vector()) < tolerance);
    }
    CHECK(decoder.cached_length() == config.seq_len);
  }
}

// The reference generator: one full forward per id on the window generate_tokens documents.
std::vector<int32_t> greedy_by_full_forward(MicroLM& model, std::vector<int32_t> context,
                                            int64_t n) {
  const int64_t cap = model.config().seq_len;
  if (static_cast<int64_t>(context.size()) > cap)
    context.erase(context.begin(), context.end() - cap);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id =
        argmax_row(full_logits(model, context), static_cast<int64_t>(context.size()) - 1);
    out.push_back(id);
    if (static_cast<int64_t>(context.size()) == cap)
      context.erase(context.begin(), context.end() - (std::max<int64_t>(1, cap / 2) - 1));
    context.push_back(id);
  }
  return out;
}

GenerationOptions options(int64_t n, double temperature, uint64_t seed, int64_t top_k = 0,
                          double top_p = 1.0) {
  GenerationOptions g;
  g.max_new_tokens = n;
  g.sampling.temperature = temperature;
  g.sampling.seed = seed;
  g.sampling.top_k = top_k;
  g.sampling.top_p = top_p;
  return g;
}

Tensor logits_of(const std::vector<double>& probabilities) {
  std::vector<double> l;
  for (double p : probabilities) l.push_back(std::log(p));
  return Tensor::from_vector(l, {static_cast<int64_t>(l.size())});
}

// Counts of each id over `draws` samples from fixed logits.
std::map<int32_t, int> histogram(const Tensor& logits, SamplingOptions o, int draws) {
  TokenSampler sampler(o);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) counts[sampler.sample(logits)]++;
  return counts;
}

}  // namespace

TEST_CASE("cached incremental logits equal the full forward at every position, in every mode") {
  for (ResidualMode mode : kModes) {
    for (int64_t kv_heads : {4, 2, 1}) {
      CAPTURE(residual_mode_name(mode));
      CAPTURE(kv_heads);
      check_against_forward(tiny_config(mode, kv_heads), DType::f32, 1e-5);
      check_against_forward(tiny_config(mode, kv_heads), DType::f64, 1e-12);
    }
  }
}

TEST_CASE(
    "the decoder follows the model's other switches: learned positions, LayerNorm, GELU, biases, "
    "untied head, block sizes, tanh GELU, ffn width, RoPE base") {
  for (ResidualMode mode : kModes) {
    CAPTURE(residual_mode_name(mode));
    MicroLMConfig c = tiny_config(mode, 2);
    c.rope = false;
    c.learned_positions = true;
    c.norm = Norm::Kind::layer;
    c.ffn = FeedForward::Kind::gelu;
    c.bias = true;
    c.tied_head = false;
    check_against_forward(c, DType::f64, 1e-12);
    check_against_forward(c, DType::f32, 1e-5);
  }
  {  // the imported models' switches: tanh GELU, an odd feed-forward width, another RoPE base
    MicroLMConfig c = tiny_config(residual_mode("standard"), 2);
    c.ffn = FeedForward::Kind::gelu_tanh;
    c.ffn_hidden = 13;
    c.rope_theta = 500000.0;
    check_against_forward(c, DType::f64, 1e-12);
    check_against_forward(c, DType::f32, 1e-5);
  }
  for (int64_t block_size :
       {1, 3, 4}) {  // Full AttnRes, blocks straddling layers, more than one layer
    for (ResidualMode mode :
         {residual_mode("paper_block_attnres"), residual_mode("paper_rd_attnres")}) {
      CAPTURE(block_size);
      MicroLMConfig c = tiny_config(mode, 2);
      c.attnres_block_size = block_size;
      check_against_forward(c, DType::f64, 1e-12);
    }
  }
}

TEST_CASE("decoder: bit-identical at 1 and 2 threads, buffers reused, bad calls refused") {
  test::ThreadsGuard guard;
  MicroLMConfig c = tiny_config(residual_mode("rd_attnres"), 2);
  MicroLM model(c);
  randomize(model, 3);
  const std::vector<int32_t> ids = random_ids(c.seq_len, c.vocab, 9);
  std::vector<std::vector<float>> per_threads;
  for (int n : {1, 2}) {
    set_threads(n);
    Decoder d(model);
    std::vector<float> all = d.append(std::span(ids.data(), 3), true).to_floats();
    const float* storage = nullptr;
    for (size_t t = 3; t < ids.size(); ++t) {
      const Tensor& l = d.append(std::span(ids.data() + t, 1));
      if (!storage) storage = l.data<float>();
      CHECK(l.data<float>() == storage);  // the same buffer every step
      std::vector<float> v = l.to_floats();
      all.insert(all.end(), v.begin(), v.end());
    }
    per_threads.push_back(all);
  }
  CHECK(test::same_bits(per_threads[0], per_threads[1]));

  // Once its buffers exist (the first prompt and the first moved window), generating asks for no
  // tensor memory: with the storage cache emptied, any request would come from the system.
  Decoder reused(model);
  const int32_t one[] = {ids[0]};
  generate_tokens(reused, one, options(30, 1.0, 1));
  storage_cache_clear();
  const uint64_t fresh = storage_fresh_allocations();
  const size_t live = storage_stats().live_bytes;
  GenerationResult again = generate_tokens(reused, one, options(30, 1.0, 2));
  CHECK(again.context_resets > 0);
  CHECK(storage_fresh_allocations() == fresh);
  CHECK(storage_stats().live_bytes == live);

  Decoder d(model);
  CHECK_THROWS_AS(d.append(std::span<const int32_t>()), std::invalid_argument);
  const int32_t bad[] = {static_cast<int32_t>(c.vocab)};
  CHECK_THROWS_WITH_AS(d.append(bad), doctest::Contains("outside the vocabulary"),
                       std::invalid_argument);
  d.append(ids);
  CHECK_THROWS_WITH_AS(d.append(std::span(ids.data(), 1)), doctest::Contains("exceed the context"),
                       std::invalid_argument);
}

TEST_CASE("greedy decoding is the full forward's argmax, across context moves, for every mode") {
  for (ResidualMode mode : kModes) {
    CAPTURE(residual_mode_name(mode));
    MicroLMConfig c = tiny_config(mode, 2);
    MicroLM model(c);
    randomize(model, 21);
    Decoder decoder(model);
    const std::vector<int32_t> prompt = random_ids(4, c.vocab, 8);
    // 30 ids from a context of 11: the window moves several times.
    GenerationResult r = generate_tokens(decoder, prompt, options(30, 0.0, 1));
    CHECK(r.tokens == greedy_by_full_forward(model, prompt, 30));
    CHECK(r.context_resets >= 3);
    CHECK(r.prompt_tokens_kept == 4);
  }
}

TEST_CASE(
    "sampling: same seed same ids, another seed other ids, top-k 1 and tiny top-p are greedy") {
  MicroLMConfig c = tiny_config(residual_mode("paper_rd_attnres"), 2);
  MicroLM model(c);
  randomize(model, 4);
  Decoder decoder(model);
  const std::vector<int32_t> prompt = random_ids(3, c.vocab, 2);
  const std::vector<int32_t> a = generate_tokens(decoder, prompt, options(25, 1.0, 7)).tokens;
  const std::vector<int32_t> b = generate_tokens(decoder, prompt, options(25, 1.0, 7)).tokens;
  const std::vector<int32_t> other = generate_tokens(decoder, prompt, options(25, 1.0, 8)).tokens;
  CHECK(a.size() == 25);
  CHECK(a == b);
  CHECK(a != other);
  const std::vector<int32_t> greedy = generate_tokens(decoder, prompt, options(25, 0.0, 7)).tokens;
  CHECK(a != greedy);  // temperature 1 really samples
  CHECK(generate_tokens(decoder, prompt, options(25, 1.0, 7, 1)).tokens == greedy);
  CHECK(generate_tokens(decoder, prompt, options(25, 1.5, 9, 0, 1e-9)).tokens == greedy);
  CHECK(generate_tokens(decoder, prompt, options(0, 1.0, 7)).tokens.empty());
  GenerationOptions stop = options(25, 0.0, 7);
  stop.stop_token = greedy[2];
  const auto first_stop = std::find(greedy.begin(), greedy.end(), greedy[2]) - greedy.begin();
  CHECK(generate_tokens(decoder, prompt, stop).tokens ==
        std::vector<int32_t>(greedy.begin(), greedy.begin() + first_stop + 1));
}

TEST_CASE("sampling: the distribution, top-k, top-p and temperature") {
  const Tensor logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingOptions o;
  o.seed = 3;
  const int draws = 20000;
  auto freq = [&](std::map<int32_t, int>& h, int32_t id) {
    return static_cast<double>(h[id]) / draws;
  };
  auto plain = histogram(logits, o, draws);
  CHECK(freq(plain, 0) == doctest::Approx(0.5).epsilon(0.05));
  CHECK(freq(plain, 3) == doctest::Approx(0.05).epsilon(0.15));
  o.top_k = 2;  // ids 0 and 1, renormalised: 5/8 and 3/8
  auto k2 = histogram(logits, o, draws);
  CHECK(k2.size() == 2);
  CHECK(freq(k2, 0) == doctest::Approx(0.625).epsilon(0.05));
  o.top_k = 0;
  o.top_p = 0.7;  // 0.5 < 0.7, 0.5 + 0.3 >= 0.7: ids 0 and 1
  auto p07 = histogram(logits, o, draws);
  CHECK(p07.size() == 2);
  CHECK(freq(p07, 1) == doctest::Approx(0.375).epsilon(0.05));
  o.top_p = 0.85;  // 0.8 < 0.85: three ids
  CHECK(histogram(logits, o, draws).size() == 3);
  o.top_p = 1.0;
  o.temperature = 0.5;  // p² renormalised: 0.25 / (0.25 + 0.09 + 0.0225 + 0.0025)
  auto cold = histogram(logits, o, draws);
  CHECK(freq(cold, 0) == doctest::Approx(0.25 / 0.365).epsilon(0.05));
  o.temperature = 0;
  CHECK(histogram(logits, o, 10).size() == 1);
  // ties go to the lower id
  CHECK(TokenSampler(o).sample(Tensor::from_vector({1.0, 3.0, 3.0}, {3})) == 1);
  CHECK_THROWS_WITH_AS(TokenSampler(SamplingOptions{}).sample(Tensor::from_vector({1.0, NAN}, {2})),
                       doctest::Contains("non-finite"), std::runtime_error);
  // the first non-finite id is named, an infinity as much as a NaN; the tie rule holds for -0/+0
  o.temperature = 0;
  CHECK_THROWS_WITH(
      TokenSampler(o).sample(Tensor::from_vector({1.0, 5.0, INFINITY, NAN, -INFINITY}, {5})),
      doctest::Contains("for id 2"));
  CHECK(TokenSampler(o).sample(Tensor::from_vector({-1.0, -0.0, 0.0, -2.0}, {4})) == 1);
}

TEST_CASE("sampling options are checked: temperature >= 0, top-k >= 0, top-p in (0, 1]") {
  auto with = [](double temperature, int64_t top_k, double top_p) {
    SamplingOptions o;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    return o;
  };
  for (double p : {0.0, -0.1, 1.0000001, 2.0, double(NAN)})
    CHECK_THROWS_WITH_AS(with(1, 0, p).validate(), doctest::Contains("top-p"),
                         std::invalid_argument);
  CHECK_THROWS_WITH_AS(with(-0.5, 0, 1).validate(), doctest::Contains("temperature"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(with(INFINITY, 0, 1).validate(), doctest::Contains("temperature"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(with(1, -1, 1).validate(), doctest::Contains("top-k"),
                       std::invalid_argument);
  CHECK_NOTHROW(with(0, 0, 1).validate());
  CHECK_NOTHROW(with(2, 5, 0.01).validate());
  CHECK_THROWS_AS(TokenSampler(with(1, 0, 0)), std::invalid_argument);
}

TEST_CASE("a prompt longer than the context keeps its last seq_len ids") {
  MicroLMConfig c = tiny_config(residual_mode("block_attnres"), 4);
  MicroLM model(c);
  randomize(model, 6);
  Decoder decoder(model);
  const std::vector<int32_t> long_prompt = random_ids(3 * c.seq_len + 2, c.vocab, 12);
  const std::vector<int32_t> tail(long_prompt.end() - c.seq_len, long_prompt.end());
  GenerationResult r = generate_tokens(decoder, long_prompt, options(8, 1.0, 5));
  CHECK(r.prompt_tokens_kept == c.seq_len);
  CHECK(r.tokens == generate_tokens(decoder, tail, options(8, 1.0, 5)).tokens);
  CHECK(generate_tokens(decoder, long_prompt, options(8, 0.0, 5)).tokens ==
        greedy_by_full_forward(model, long_prompt, 8));
  CHECK_THROWS_WITH_AS(generate_tokens(decoder, std::span<const int32_t>(), options(8, 1.0, 5)),
                       doctest::Contains("prompt"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(generate_tokens(decoder, tail, options(-1, 1.0, 5)),
                       doctest::Contains("max-new-tokens"), std::invalid_argument);
}

TEST_CASE("UTF-8 streaming holds back split characters and replaces invalid bytes") {
  const std::string fffd = "\xEF\xBF\xBD";
  Utf8Stream s;
  CHECK(s.push("caf\xC3") == "caf");
  CHECK(s.push("\xA9 ok") == "\xC3\xA9 ok");
  CHECK(s.push("\xF0\x9F") == "");  // a 4-byte emoji in three pieces
  CHECK(s.push("\x98") == "");
  CHECK(s.push("\x80!") == "\xF0\x9F\x98\x80!");
  CHECK(s.push("\xFF\x80x") == fffd + fffd + "x");      // never valid: replaced at once
  CHECK(s.push("\xE2\x82y") == fffd + "y");             // a truncated sequence: one U+FFFD
  CHECK(s.push("\xED\xA0\x80") == fffd + fffd + fffd);  // a surrogate is not a character
  CHECK(s.push("\xC0\xAF") == fffd + fffd);             // nor is an overlong form
  CHECK(s.push("\xE2\x82") == "");
  CHECK(s.finish() == fffd);  // unfinished at the end
  CHECK(s.finish().empty());
  // Any cut of the bytes gives the same text: the decode itself when it is valid UTF-8.
  std::mt19937_64 rng(1);
  const std::string valid = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC \xF0\x9F\x98\x80 end";
  const std::string mixed = valid + "\xFF\xC3 \xF0\x9F\x98 \xE2\x82\xAC\xAC\xF4\x90 tail\xE2";
  Utf8Stream whole;
  std::string mixed_text = whole.push(mixed);
  mixed_text += whole.finish();
  CHECK(mixed_text ==
        valid + fffd + fffd + " " + fffd + " \xE2\x82\xAC" + fffd + fffd + fffd + " tail" + fffd);
  for (int trial = 0; trial < 200; ++trial) {
    for (const std::string* input : {&valid, &mixed}) {
      Utf8Stream t;
      std::string joined;
      size_t at = 0;
      while (at < input->size()) {
        const size_t n = std::min<size_t>(input->size() - at, rng() % 4);  // empty pieces too
        joined += t.push(std::string_view(*input).substr(at, n));
        at += n;
      }
      joined += t.finish();
      CHECK(joined == (input == &valid ? valid : mixed_text));
    }
  }
}

TEST_CASE("training samples: text after a prompt; empty prompts and foreign tokenizers refused") {
  const std::string text = "the cat sat on the mat. the dog sat on the log. caf\xC3\xA9 au lait. ";
  std::string corpus;
  for (int i = 0; i < 20; ++i) corpus += text;
  BpeTokenizer tok = train_bpe({corpus}, 300, 2, {"<pad>", "<unk>", "<bos>", "<eos>"});
  MicroLMConfig c = tiny_config(residual_mode("rd_attnres"), 2);
  c.vocab = tok.vocab_size();
  MicroLM model(c);
  randomize(model, 2);
  SamplingOptions o;
  o.seed = 4;
  Decoder decoder(model);
  const std::string a = sample_text(decoder, tok, "the cat", 12, o);
  CHECK(!a.empty());
  CHECK(a == sample_text(decoder, tok, "the cat", 12, o));
  CHECK_THROWS_WITH_AS(sample_text(decoder, tok, "", 12, o),
                       doctest::Contains("encodes to no token ids"), std::invalid_argument);
  MicroLMConfig other = c;
  other.vocab = c.vocab + 1;
  MicroLM wrong(other);
  Decoder wrong_decoder(wrong);
  CHECK_THROWS_WITH_AS(sample_text(wrong_decoder, tok, "the cat", 12, o),
                       doctest::Contains("vocabulary"), std::invalid_argument);
}

TEST_CASE("time_decode times the requested number of generated ids") {
  MicroLMConfig c = tiny_config(residual_mode("standard"), 4);
  DecodeTiming t = time_decode(c, 25);
  CHECK(t.tokens == 25);
  CHECK(t.seconds > 0);
  CHECK(t.tokens_per_second > 0);
}

// ---- the CausalLM interface ---------------------------------------------------------------------

namespace {

// A user's own CausalLM: a bigram table (the logits of the next id depend on the last id only),
// with a context of `context` positions. It records every call generate_tokens makes on it.
class BigramLM : public CausalLM {
 public:
  BigramLM(int64_t vocab, int64_t context) : vocab_(vocab), context_(context) {
    for (int64_t i = 0; i < vocab; ++i)  // the likeliest successor of i is (i + 2) mod vocab
      table_.push_back(Tensor::from_vector(std::vector<double>(static_cast<size_t>(vocab), 0.0),
                                           {vocab}, DType::f64));
    for (int64_t i = 0; i < vocab; ++i) table_[i].data<double>()[(i + 2) % vocab] = 1.0;
  }
  int64_t vocab_size() const override { return vocab_; }
  int64_t context_length() const override { return context_; }
  int64_t cached_length() const override { return cached_; }
  void reset() override {
    cached_ = 0;
    calls.push_back({});  // an empty entry marks a reset
  }
  std::vector<std::vector<int32_t>> calls;

 protected:
  const Tensor& forward_new(std::span<const int32_t> ids) override {
    cached_ += static_cast<int64_t>(ids.size());
    calls.emplace_back(ids.begin(), ids.end());
    return table_[ids.back()];
  }

 private:
  int64_t vocab_, context_, cached_ = 0;
  std::vector<Tensor> table_;
};

RecomputingCausalLM recomputing(MicroLM& model) {
  return RecomputingCausalLM([&model](const Tensor& ids) { return model.forward(ids); },
                             model.config().vocab, model.config().seq_len);
}

}  // namespace

TEST_CASE("generate_tokens on a user's CausalLM: the calls it makes as the window slides") {
  BigramLM lm(7, 5);
  const std::vector<int32_t> prompt = {1, 2, 3};
  GenerationResult r = generate_tokens(lm, prompt, options(8, 0.0, 1));
  CHECK(r.tokens == std::vector<int32_t>{5, 0, 2, 4, 6, 1, 3, 5});  // greedy: i -> i + 2 mod 7
  CHECK(r.context_resets == 2);
  // The prompt, one id per step until the 5 positions are full, then reset and the last
  // max(1, 5/2) = 2 ids re-read (the newest included); no call after the last id is drawn.
  const std::vector<std::vector<int32_t>> expected = {{},  {1, 2, 3}, {5}, {0}, {},    {0, 2},
                                                      {4}, {6},       {1}, {},  {1, 3}};
  CHECK(lm.calls == expected);

  // A context of one position: every step re-reads the newest id alone; a longer prompt keeps
  // its last id.
  BigramLM one(7, 1);
  r = generate_tokens(one, prompt, options(4, 0.0, 1));
  CHECK(r.prompt_tokens_kept == 1);
  CHECK(r.tokens == std::vector<int32_t>{5, 0, 2, 4});
  CHECK(r.context_resets == 3);
  CHECK(one.calls == std::vector<std::vector<int32_t>>{{}, {3}, {}, {5}, {}, {0}, {}, {2}});
  // Sampling draws from the table's logits (e^1 against e^0 six times): same seed, same ids.
  CHECK(generate_tokens(lm, prompt, options(20, 1.0, 3)).tokens ==
        generate_tokens(lm, prompt, options(20, 1.0, 3)).tokens);
}

TEST_CASE("CausalLM::forward_tokens checks ids, the context and the logits it hands back") {
  BigramLM lm(7, 4);
  CHECK_THROWS_WITH_AS(lm.forward_tokens(std::span<const int32_t>()),
                       doctest::Contains("no token ids"), std::invalid_argument);
  for (int32_t bad : {-1, 7}) {
    const int32_t ids[] = {1, bad};
    CHECK_THROWS_WITH_AS(lm.forward_tokens(ids), doctest::Contains("outside the vocabulary [0, 7)"),
                         std::invalid_argument);
  }
  const int32_t three[] = {1, 2, 3};
  lm.forward_tokens(three);
  CHECK(lm.cached_length() == 3);
  CHECK_THROWS_WITH_AS(lm.forward_tokens(std::span<const int32_t>(three, 2)),
                       doctest::Contains("3 cached + 2 new positions exceed the context of 4"),
                       std::invalid_argument);
  CHECK(lm.cached_length() == 3);  // a refused call changes nothing
  lm.reset();
  CHECK(lm.cached_length() == 0);
  CHECK(lm.forward_tokens(three).data<double>()[5] == 1.0);

  // A forward that returns something other than logits [1, T, vocab] is refused, and its ids are
  // not cached; so is a CausalLM whose logits are not [vocab].
  RecomputingCausalLM wrong(
      [](const Tensor& ids) {
        return Tensor::zeros({1, ids.size(1), 6});
      },
      7, 4);
  CHECK_THROWS_WITH_AS(wrong.forward_tokens(three), doctest::Contains("not logits [1, 3, 7]"),
                       std::logic_error);
  CHECK(wrong.cached_length() == 0);
  struct Flat : BigramLM {
    Flat() : BigramLM(7, 4) {}
    Tensor two_rows = Tensor::zeros({2, 7});
    const Tensor& forward_new(std::span<const int32_t>) override { return two_rows; }
  } flat;
  CHECK_THROWS_WITH_AS(flat.forward_tokens(three), doctest::Contains("not float logits [7]"),
                       std::logic_error);
  CHECK_THROWS_AS(RecomputingCausalLM({}, 7, 4), std::invalid_argument);
  auto zeros = [](const Tensor& ids) { return Tensor::zeros({1, ids.size(1), 7}); };
  CHECK_THROWS_AS(RecomputingCausalLM(zeros, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(RecomputingCausalLM(zeros, 7, 0), std::invalid_argument);
}

TEST_CASE("RecomputingCausalLM over MicroLM::forward equals the Decoder: logits and greedy ids") {
  for (ResidualMode mode : kModes) {
    CAPTURE(residual_mode_name(mode));
    for (DType dtype : {DType::f32, DType::f64}) {
      MicroLMConfig c = tiny_config(mode, 2);
      MicroLM model(c, dtype);
      randomize(model, 31);
      Decoder decoder(model);
      RecomputingCausalLM full = recomputing(model);
      // Logits at every position, a prefill of 4 then single ids: float rounding only.
      const std::vector<int32_t> ids = random_ids(c.seq_len, c.vocab, 17);
      const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-12;
      for (int64_t t = 0; t < c.seq_len; t += t == 0 ? 4 : 1) {
        const std::span<const int32_t> chunk(ids.data() + t, t == 0 ? 4 : 1);
        const std::vector<double> a = decoder.forward_tokens(chunk).to_vector();
        CHECK(test::rel_diff(a, full.forward_tokens(chunk).to_vector()) < tolerance);
      }
      CHECK(full.cached_length() == c.seq_len);
      // Greedy decoding of 30 ids from a context of 11: the window moves, and both give the ids.
      const std::vector<int32_t> prompt = random_ids(4, c.vocab, 8);
      const GenerationResult a = generate_tokens(decoder, prompt, options(30, 0.0, 1));
      const GenerationResult b = generate_tokens(full, prompt, options(30, 0.0, 1));
      CHECK(a.tokens == b.tokens);
      CHECK(a.context_resets == b.context_resets);
    }
  }
}

TEST_CASE("reset: the next forward_tokens starts at position 0, with the same bits as a new one") {
  MicroLMConfig c = tiny_config(residual_mode("paper_rd_attnres"), 2);
  MicroLM model(c);
  randomize(model, 5);
  const std::vector<int32_t> a = random_ids(7, c.vocab, 1), b = random_ids(5, c.vocab, 2);
  Decoder decoder(model);
  RecomputingCausalLM full = recomputing(model);
  BigramLM bigram(c.vocab, c.seq_len);
  for (CausalLM* lm : std::initializer_list<CausalLM*>{&decoder, &full, &bigram}) {
    const std::vector<double> fresh = lm->forward_tokens(b).to_vector();
    lm->reset();
    lm->forward_tokens(a);
    CHECK(lm->cached_length() == 7);
    lm->reset();
    CHECK(lm->cached_length() == 0);
    CHECK(test::same_bits(lm->forward_tokens(b).to_vector(), fresh));
    CHECK(lm->cached_length() == 5);
  }
  // A Decoder may share its model instead of borrowing it: the model lives as long as it does.
  std::unique_ptr<CausalLM> owner;
  {
    auto shared = std::make_shared<MicroLM>(c);
    randomize(*shared, 5);
    owner = std::make_unique<Decoder>(std::shared_ptr<const MicroLM>(shared));
  }
  decoder.reset();
  CHECK(
      test::same_bits(owner->forward_tokens(a).to_vector(), decoder.forward_tokens(a).to_vector()));
  CHECK_THROWS_AS(Decoder(std::shared_ptr<const MicroLM>()), std::invalid_argument);
}

TEST_CASE("any Module with ids [1, T] -> logits [1, T, V] generates through RecomputingCausalLM") {
  manual_seed(0);
  Sequential net(std::make_unique<Embedding>(9, 8), std::make_unique<Linear>(8, 9));
  RecomputingCausalLM lm([&net](const Tensor& ids) { return net.forward(ids); }, 9, 6);
  const std::vector<int32_t> prompt = {4, 1};
  const GenerationResult r = generate_tokens(lm, prompt, options(10, 0.0, 1));
  REQUIRE(r.tokens.size() == 10);
  // This net reads each position alone: greedy id k + 1 is the argmax of the net at id k.
  int32_t last = prompt.back();
  for (int32_t id : r.tokens) {
    NoGradGuard no_grad;
    CHECK(id ==
          argmax_row(dg::raw::view_reshape(net.forward(Tensor::from_ids({last}, {1, 1})), {1, 9}),
                     0));
    last = id;
  }
  CHECK(generate_tokens(lm, prompt, options(10, 1.0, 4)).tokens ==
        generate_tokens(lm, prompt, options(10, 1.0, 4)).tokens);
}
