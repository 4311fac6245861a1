// Sampling, the generation loop, UTF-8 streaming, training samples and decode timing (see
// generate.h).
#include "train/lm/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace dg {

// ---- sampling -----------------------------------------------------------------------------------

void SamplingOptions::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw std::invalid_argument(
        fmt::format("temperature must be finite and >= 0 (0 = greedy), got {}", temperature));
  if (top_k < 0)
    throw std::invalid_argument(fmt::format("top-k must be >= 0 (0 = no limit), got {}", top_k));
  if (!(top_p > 0 && top_p <= 1))
    throw std::invalid_argument(fmt::format("top-p must be in (0, 1], got {}", top_p));
}

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  options_.validate();
}

int32_t TokenSampler::sample(const Tensor& logits) {
  if (logits.dim() != 1 || logits.numel() < 1)
    throw std::invalid_argument(
        fmt::format("TokenSampler: expected logits [vocab], got {}", logits.describe()));
  const int64_t V = logits.numel();
  values_.resize(static_cast<size_t>(V));
  dispatch_float(logits.dtype(), "TokenSampler", [&]<class T>() {
    const Tensor c = logits.contiguous();
    const T* p = c.data<T>();
    for (int64_t i = 0; i < V; ++i) values_[i] = static_cast<double>(p[i]);
  });
  // The finiteness check and the argmax in passes that vectorise (a running argmax is a chain of
  // dependent compares, a nanosecond per id): v − v is 0 for a finite v and NaN otherwise; then
  // the first id that reaches the maximum (ties go to the lower id).
  double finite = 0, max = -INFINITY;
#pragma omp simd reduction(+ : finite) reduction(max : max)
  for (int64_t i = 0; i < V; ++i) {
    finite += values_[i] - values_[i];
    max = std::max(max, values_[i]);
  }
  if (finite != 0)
    for (int64_t i = 0; i < V; ++i)
      if (!std::isfinite(values_[i]))
        throw std::runtime_error(fmt::format(
            "the model gave a non-finite logit ({}) for id {}: are the weights diverged?",
            values_[i], i));
  int32_t best = 0;
  while (values_[best] != max) ++best;
  if (options_.temperature == 0 || options_.top_k == 1) return best;

  // Candidates, most likely first (lower id first on ties) when a filter needs the order.
  order_.resize(static_cast<size_t>(V));
  std::iota(order_.begin(), order_.end(), 0);
  auto more_likely = [&](int32_t a, int32_t b) {
    return values_[a] > values_[b] || (values_[a] == values_[b] && a < b);
  };
  const bool filter_k = options_.top_k > 0 && options_.top_k < V, filter_p = options_.top_p < 1;
  if (filter_k) {
    std::partial_sort(order_.begin(), order_.begin() + options_.top_k, order_.end(), more_likely);
    order_.resize(static_cast<size_t>(options_.top_k));
  } else if (filter_p) {
    std::sort(order_.begin(), order_.end(), more_likely);
  }
  // Unnormalised probabilities exp((l − max) / temperature), in place.
  double total = 0;
  for (int32_t id : order_)
    total += (values_[id] = std::exp((values_[id] - max) / options_.temperature));
  if (filter_p) {  // the shortest prefix whose mass reaches top_p (at least one id)
    double mass = 0;
    size_t keep = 0;
    while (keep < order_.size() && (keep == 0 || mass < options_.top_p * total))
      mass += values_[order_[keep++]];
    order_.resize(keep);
    total = mass;
  }
  double u = rng_.random() * total;
  for (int32_t id : order_) {
    u -= values_[id];
    if (u < 0) return id;
  }
  return order_.back();  // u landed on the total through rounding
}

// ---- generation ---------------------------------------------------------------------------------

GenerationResult generate_tokens(CausalLM& model, std::span<const int32_t> prompt,
                                 const GenerationOptions& options,
                                 const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt has no token ids");
  if (options.max_new_tokens < 0)
    throw std::invalid_argument(
        fmt::format("max-new-tokens must be >= 0, got {}", options.max_new_tokens));
  TokenSampler sampler(options.sampling);
  const auto start = std::chrono::steady_clock::now();
  GenerationResult r;
  const int64_t capacity = model.context_length();
  const size_t first = prompt.size() > static_cast<size_t>(capacity) ? prompt.size() - capacity : 0;
  std::vector<int32_t> context(prompt.begin() + static_cast<std::ptrdiff_t>(first),
                               prompt.end());  // the ids in the cache
  context.reserve(static_cast<size_t>(capacity) + 1);
  r.prompt_tokens_kept = static_cast<int64_t>(context.size());
  r.tokens.reserve(static_cast<size_t>(std::min<int64_t>(options.max_new_tokens, 1 << 16)));
  if (options.max_new_tokens > 0) {
    model.reset();
    const Tensor* logits = &model.forward_tokens(context);
    for (int64_t i = 0; i < options.max_new_tokens; ++i) {
      const int32_t id = sampler.sample(*logits);
      r.tokens.push_back(id);
      if (on_token) on_token(id);
      if (id == options.stop_token || i + 1 == options.max_new_tokens) break;
      if (model.cached_length() == capacity) {  // full: re-read the last capacity/2, id included
        const int64_t keep = std::max<int64_t>(1, capacity / 2);
        context.erase(context.begin(), context.end() - (keep - 1));
        context.push_back(id);
        model.reset();
        logits = &model.forward_tokens(context);
        ++r.context_resets;
      } else {
        context.push_back(id);
        logits = &model.forward_tokens(std::span<const int32_t>(&context.back(), 1));
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// ---- UTF-8 streaming ----------------------------------------------------------------------------

namespace {
// Moves what can be printed from the front of `pending` to the returned text: complete valid
// UTF-8 sequences as they are, each maximal invalid subpart (Unicode §3.9, "substitution of
// maximal subparts") as one U+FFFD. A valid but incomplete sequence at the end stays in
// `pending` unless `final`, when it too becomes U+FFFD.
std::string take_printable(std::string& pending, bool final) {
  static const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  const size_t n = pending.size();
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(pending[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte (Table 3-7)
    if (c >= 0xC2 && c <= 0xDF)
      len = 2;
    else if (c == 0xE0)
      len = 3, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
      len = 3;
    else if (c == 0xED)
      len = 3, hi = 0x9F;  // no surrogates
    else if (c == 0xF0)
      len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      len = 4;
    else if (c == 0xF4)
      len = 4, hi = 0x8F;  // nothing above U+10FFFF
    if (len == 0) {        // a continuation byte without a lead, or a byte that never starts one
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const auto b = static_cast<unsigned char>(pending[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
    }
    if (k == len) {
      out.append(pending, i, len);
      i += len;
    } else if (i + k == n && !final) {
      break;  // may still complete: wait for the next token's bytes
    } else {
      out += kReplacement;
      i += k;
    }
  }
  pending.erase(0, i);
  return out;
}
}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  return take_printable(pending_, false);
}

std::string Utf8Stream::finish() { return take_printable(pending_, true); }

// ---- training samples and timing ----------------------------------------------------------------

void check_tokenizer_vocab(int64_t model_vocab, const BpeTokenizer& tokenizer,
                           const std::string& tokenizer_source) {
  if (tokenizer.vocab_size() != model_vocab)
    throw std::invalid_argument(
        fmt::format("{}: the tokenizer has {} ids but the model's vocabulary is {}: not the "
                    "tokenizer this model was trained with",
                    tokenizer_source, tokenizer.vocab_size(), model_vocab));
}

std::string sample_text(CausalLM& model, const BpeTokenizer& tokenizer, const std::string& prompt,
                        int64_t tokens, const SamplingOptions& options) {
  check_tokenizer_vocab(model.vocab_size(), tokenizer, "sample");
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  if (ids.empty())
    throw std::invalid_argument(fmt::format("the prompt '{}' encodes to no token ids", prompt));
  GenerationOptions g;
  g.max_new_tokens = tokens;
  g.sampling = options;
  return tokenizer.decode(generate_tokens(model, ids, g).tokens);
}

DecodeTiming time_decode(const MicroLMConfig& config, int64_t tokens, uint64_t seed) {
  MicroLM model(config);
  model.init_identical(seed);
  Decoder decoder(model);
  return time_decode(decoder, tokens);
}

DecodeTiming time_decode(CausalLM& model, int64_t tokens) {
  GenerationOptions g;
  g.max_new_tokens = tokens;
  g.sampling.temperature = 0;
  const int32_t prompt[] = {0};
  GenerationResult r = generate_tokens(model, prompt, g);
  DecodeTiming t;
  t.tokens = static_cast<int64_t>(r.tokens.size());
  t.seconds = r.seconds;
  t.tokens_per_second = r.seconds > 0 ? static_cast<double>(t.tokens) / r.seconds : 0;
  return t;
}

}  // namespace dg
