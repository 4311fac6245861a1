// `depthgrad generate`: text from a model written by depthgrad train, streamed to stdout as it is
// decoded. Once loaded (train/lm/trained_model.h) the model is only a CausalLM (nn/lm/causal_lm.h);
// sampling and the context window are train/lm/generate.h's. It does not train, evaluate or print
// the prompt; bad flags and files end in one line on stderr.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>

#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/shared_flags.h"
#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/lm/generate.h"
#include "train/lm/trained_model.h"

namespace dg::cli {

namespace {
// The sampling flags, checked before any file is read: each error names its flag.
SamplingOptions sampling_from_flags(const Flags& f) {
  SamplingOptions o;
  o.temperature = f.get_double("temperature");
  o.top_k = f.get_int("top-k");
  o.top_p = f.get_double("top-p");
  const int64_t seed = f.get_int("seed");
  if (seed < 0) throw UsageError(fmt::format("--seed must be >= 0, got {}", seed));
  o.seed = static_cast<uint64_t>(seed);
  try {
    o.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--") + e.what());  // the messages start with the option's name
  }
  return o;
}
}  // namespace

int cmd_generate(int argc, char** argv, int start) {
  Flags f("generate",
          "Continue a prompt with a model written by depthgrad train or import (model.safetensors\n"
          "or checkpoint.safetensors), printing the continuation (not the prompt) as it is\n"
          "decoded, then a newline; a summary line goes to stderr. The model sees at most\n"
          "seq_len tokens: a longer prompt keeps its last seq_len tokens (stderr says so), and\n"
          "when the context is full its last seq_len/2 tokens are re-read as a fresh context\n"
          "(a sliding window). Generation stops after --max-new-tokens or at the end-of-text\n"
          "token (an imported model's eos_token_id, else the tokenizer's <eos>). Bytes that are\n"
          "not valid UTF-8 print as U+FFFD. The same model, prompt, flags and seed give the same\n"
          "text.");
  f.add("checkpoint", "",
        "weights or training checkpoint written by depthgrad train, or the model.safetensors of "
        "depthgrad import (required)")
      .add("prompt", "", "text to continue (required; must encode to at least one token)")
      .add("max-new-tokens", "128", "tokens to generate (>= 0)")
      .add("temperature", "1.0",
           "softmax temperature (>= 0; 0 = greedy, always the most likely token)")
      .add("top-k", "0", "sample among the k most likely tokens only (0 = all)")
      .add("top-p", "1.0",
           "sample among the fewest most likely tokens whose probability reaches p, in (0, 1]")
      .add("seed", "0", "seed of the sampler")
      .add("tokenizer", "", "tokenizer.json (default: the tokenizer.json beside --checkpoint)")
      .add_switch("quiet", "no summary line on stderr");
  add_threads_flag(f);
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  const int threads = apply_threads_flag(f);
  if (f.get("checkpoint").empty()) throw UsageError("--checkpoint is required");
  if (!f.given("prompt")) throw UsageError("--prompt is required");
  GenerationOptions options;
  options.max_new_tokens = f.get_int("max-new-tokens");
  if (options.max_new_tokens < 0)
    throw UsageError(fmt::format("--max-new-tokens must be >= 0, got {}", options.max_new_tokens));
  options.sampling = sampling_from_flags(f);

  const std::string path = f.get("checkpoint");
  const TrainedModel trained = load_trained_model(path);
  const ModelTokenizer loaded = model_tokenizer(f, trained, path);
  const BpeTokenizer& tokenizer = loaded.tokenizer;
  // From here on the model is only a CausalLM: any model behind that interface generates alike.
  const std::unique_ptr<CausalLM> model = trained.causal_lm();
  const std::vector<int32_t> prompt = tokenizer.encode(f.get("prompt"));
  if (prompt.empty()) throw UsageError("--prompt encodes to no tokens (it is empty)");
  // An imported model's end-of-text id (train/lm/hf_model.h), else depthgrad's <eos>.
  const auto eos = trained.metadata.find("depthgrad.eos_token_id");
  options.stop_token = eos != trained.metadata.end() ? static_cast<int32_t>(std::stol(eos->second))
                                                     : tokenizer.token_id("<eos>");
  const bool quiet = f.get_bool("quiet");
  const int64_t context = model->context_length();
  if (static_cast<int64_t>(prompt.size()) > context && !quiet)
    fmt::print(stderr, "note: the prompt has {} tokens; the model sees its last {} (seq_len)\n",
               prompt.size(), context);

  Utf8Stream stream;
  auto write = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  GenerationResult r = generate_tokens(*model, prompt, options, [&](int32_t id) {
    if (id != options.stop_token) write(stream.push(tokenizer.decode({id})));
  });
  write(stream.finish() + "\n");
  if (!quiet)
    fmt::print(
        stderr, "{} tokens in {:.2f} s ({:.1f} tokens/s, {} thread(s)); prompt {} tokens{}{}\n",
        r.tokens.size(), r.seconds,
        r.seconds > 0 ? static_cast<double>(r.tokens.size()) / r.seconds : 0.0, threads,
        prompt.size(),
        r.context_resets ? fmt::format(", context moved {} time(s)", r.context_resets) : "",
        !r.tokens.empty() && r.tokens.back() == options.stop_token ? ", stopped at <eos>" : "");
  return 0;
}

}  // namespace dg::cli
