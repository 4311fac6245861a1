// A GPT-2-style decoder (gpt2_model.h) trained on a text file by depthgrad's generic loop, the
// same dg::Trainer that trains the MLPs and the MicroLM: byte-level BPE trained on the text,
// TokenWindows with a random Sampler, cross-entropy of the logits, AdamW with warm-up and cosine,
// checkpoints, Ctrl-C at a step boundary with the resume command printed, the validation loss
// (dg::evaluate_loss), a check that the model's own K/V cache gives the full forward's logits,
// and a sample drawn through the CausalLM interface (dg::generate_tokens).
//   gpt2 --text tiny_shakespeare.txt --steps 1000 --out runs/gpt2
// Built with the package's component mpi (depthgrad::mpi, or the in-tree target example_gpt2
// with DG_MPI=ON) and started by mpirun, it trains over ranks (mpirun -np 2 gpt2 ...; rank 0
// prints and writes); otherwise, from the same source, in one process. It does not read a config
// file, evaluate on a test split or load pretrained weights.
#include <depthgrad/lm.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gpt2_model.h"

namespace {

// ---- flags: --name value, each with a default and a line of help ----------------------------
struct Flag {
  std::string name, value, help;
};
std::vector<Flag> flag_table() {
  return {
      {"text", "", "the training text (required); its last 10% (from a line start) is validation"},
      {"out", "gpt2-run", "folder of checkpoint.safetensors, model.safetensors, steps.jsonl"},
      {"resume", "", "a checkpoint.safetensors to continue from (same flags otherwise)"},
      {"steps", "200", "optimizer steps"},
      {"batch", "8", "windows per micro-batch"},
      {"accum", "1", "micro-batches per step (per process)"},
      {"dim", "64", "model width"},
      {"layers", "2", "blocks"},
      {"heads", "4", "attention heads (must divide dim)"},
      {"seq-len", "64", "tokens per window, and the model's context"},
      {"vocab", "512", "BPE vocabulary (256 bytes + merges)"},
      {"lr", "1e-3", "peak learning rate (linear warm-up, cosine to a tenth)"},
      {"warmup", "-1", "warm-up steps (-1: 5% of steps)"},
      {"seed", "1", "seed of the initialisation, the windows drawn and the sample"},
      {"checkpoint-every", "0",
       "also save the checkpoint every N steps (0: at the end and on stop)"},
      {"log-every", "10", "a progress line every N steps"},
      {"eval-windows", "64", "validation windows of seq-len tokens (0: all)"},
      {"sample-tokens", "200", "tokens generated after training (0: none)"},
      {"prompt", "ROMEO:", "the sample's prompt"},
      {"temperature", "0.8", "sampling temperature (0: greedy), among the 40 likeliest ids"},
      {"threads", "0", "threads (0: DEPTHGRAD_THREADS / OMP_NUM_THREADS / all cores)"},
      {"check-cache", "false", "only check the K/V cache against the full forward, then exit"},
      {"weights", "", "with --check-cache: a model.safetensors to check (else a fresh model)"},
  };
}

class Flags {
 public:
  Flags(int argc, char** argv) : table_(flag_table()) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        help = true;
        continue;
      }
      if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + arg + "'");
      Flag& flag = find(arg.substr(2));
      if (flag.name == "check-cache") {
        flag.value = "true";
        continue;
      }
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      flag.value = argv[++i];
      given_.push_back({arg, flag.value});
    }
  }
  bool help = false;
  std::string str(const std::string& name) { return find(name).value; }
  int64_t integer(const std::string& name) {
    try {
      size_t end = 0;
      const int64_t v = std::stoll(str(name), &end);
      if (end == str(name).size()) return v;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument("--" + name + " '" + str(name) + "' is not an integer");
  }
  double number(const std::string& name) {
    try {
      size_t end = 0;
      const double v = std::stod(str(name), &end);
      if (end == str(name).size()) return v;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument("--" + name + " '" + str(name) + "' is not a number");
  }
  // The command line again, for a shell, with --resume CHECKPOINT instead of any --resume given.
  std::string resume_command(const std::string& program, const std::string& checkpoint) const {
    auto quoted = [](const std::string& s) {  // 'it'\''s' is the shell's it's
      std::string q = "'";
      for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    std::string line = program;
    for (const auto& [flag, value] : given_)
      if (flag != "--resume") line += " " + flag + " " + quoted(value);
    return line + " --resume " + quoted(checkpoint);
  }
  std::string usage() const {
    std::string text = "usage: gpt2 --text FILE [flags]\n";
    for (const Flag& f : table_)
      text += fmt::format("  --{:<17} {} (default: {})\n", f.name, f.help, f.value);
    return text;
  }

 private:
  Flag& find(const std::string& name) {
    for (Flag& f : table_)
      if (f.name == name) return f;
    throw std::invalid_argument("unknown flag --" + name + " (see --help)");
  }
  std::vector<Flag> table_;
  std::vector<std::pair<std::string, std::string>> given_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read --text " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// ---- the K/V cache against the full forward ---------------------------------------------------
// Feeds `ids` to the CachedLM in calls of 5, 1, 1, 3, 1, 7, … ids and compares each call's logits
// with Model::forward's on the same prefix; then `context` greedy ids after an 8-id prompt drawn
// through the cache (its window moves once) against RecomputingCausalLM over Model::forward.
struct CacheCheck {
  double max_diff = 0, max_logit = 0;
  int64_t calls = 0;
  bool same_greedy_ids = false;
  bool passed(double tolerance) const {
    return max_diff <= tolerance * std::max(1.0, max_logit) && same_greedy_ids;
  }
};
CacheCheck check_cache(const gpt2::Model& model, const std::vector<int32_t>& ids) {
  dg::NoGradGuard no_graph;
  const int64_t T = static_cast<int64_t>(ids.size());
  const dg::Tensor full = model(dg::Tensor::from_ids(ids, {1, T}));  // [1, T, V]
  gpt2::CachedLM cached(model);
  CacheCheck r;
  const int64_t chunks[] = {5, 1, 1, 3, 1, 7};
  for (int64_t at = 0, c = 0; at < T; ++c, ++r.calls) {
    const int64_t n = std::min(chunks[c % 6], T - at);
    const dg::Tensor got = cached.forward_tokens(std::span(ids).subspan(at, n));
    at += n;
    const dg::Tensor want = dg::reshape(dg::slice(full, 1, at - 1, at), {model.config.vocab});
    const std::vector<float> g = got.to_floats(), w = want.to_floats();
    for (size_t i = 0; i < g.size(); ++i) {
      r.max_diff = std::max(r.max_diff, static_cast<double>(std::abs(g[i] - w[i])));
      r.max_logit = std::max(r.max_logit, static_cast<double>(std::abs(w[i])));
    }
  }
  dg::RecomputingCausalLM recomputing([&](const dg::Tensor& x) { return model(x); },
                                      model.config.vocab, model.config.context);
  const dg::GenerationOptions greedy{.max_new_tokens = model.config.context,
                                     .sampling = {.temperature = 0}};
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + std::min<int64_t>(T, 8));
  r.same_greedy_ids = dg::generate_tokens(cached, prompt, greedy).tokens ==
                      dg::generate_tokens(recomputing, prompt, greedy).tokens;
  return r;
}
constexpr double kCacheTolerance = 1e-5;  // max |Δ logit| / max(1, max |logit|), float32

bool report_cache_check(const CacheCheck& r, int64_t positions) {
  const bool ok = r.passed(kCacheTolerance);
  fmt::print(
      "K/V cache vs full forward over {} positions in {} calls: max |diff| {:.3g} (max |logit| "
      "{:.3g}; tolerance {:g} relative), greedy ids {} -> {}\n",
      positions, r.calls, r.max_diff, r.max_logit, kCacheTolerance,
      r.same_greedy_ids ? "the same" : "DIFFERENT", ok ? "ok" : "FAILED");
  return ok;
}

std::string format_seconds(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

// steps.jsonl keeps one line per step: a resumed run drops the lines past its checkpoint.
void keep_first_lines(const std::string& path, int64_t lines) {
  std::ifstream in(path);
  std::string kept, line;
  for (int64_t i = 0; i < lines && std::getline(in, line); ++i) kept += line + "\n";
  in.close();
  std::ofstream(path, std::ios::trunc) << kept;
}

// The text, split by position (the last 10% from a line break on is validation), and a BPE
// trained on the training part.
struct TextData {
  std::string text;
  dg::BpeTokenizer tokenizer;
  std::vector<int32_t> train_ids, validation_ids;
  double tokenizer_seconds = 0;
};

TextData load_text(Flags& flags) {
  if (flags.str("text").empty()) throw std::invalid_argument("--text FILE is required");
  TextData d;
  d.text = read_text(flags.str("text"));
  const std::string& text = d.text;
  const size_t cut = text.find('\n', text.size() * 9 / 10);
  if (cut == std::string::npos) throw std::runtime_error("--text: no line break in its last 10%");
  const std::string_view train_text(text.data(), cut + 1), validation_text(text.data() + cut + 1);
  auto t0 = std::chrono::steady_clock::now();
  d.tokenizer = dg::train_bpe({train_text}, static_cast<int>(flags.integer("vocab")), 2, {},
                              /*full_byte_alphabet=*/true);
  d.train_ids = d.tokenizer.encode(train_text);
  d.validation_ids = d.tokenizer.encode(validation_text);
  d.tokenizer_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return d;
}

// The loop's settings: AdamW with β2 0.95 and weight decay 0.1 on matrices, warm-up (5% of the
// steps unless --warmup) then cosine.
// The loop's settings: steps, batch, accumulation, seed, and the global gradient norm clipped at
// 1, as GPT-2 trains (the loop's default is no clipping).
dg::TrainingConfig training_settings(Flags& flags, uint64_t seed) {
  dg::TrainingConfig settings;
  settings.steps = flags.integer("steps");
  settings.batch = flags.integer("batch");
  settings.accum = flags.integer("accum");
  settings.seed = seed;
  settings.clip = 1.0;
  return settings;
}

// Ranks stop together: each says whether it saw a signal (mpirun passes Ctrl-C on as SIGTERM to
// every rank, not at one step; a batch system may signal one rank only), and only what they
// agreed on counts: a signal that lands on one rank after the exchange is acted on at the next
// step by every rank, never by that rank alone (which would leave the others waiting in the next
// step's collectives).
void stop_together(dg::Collectives* world, const dg::StepLog& s) {
  if (world) {
    int signal = 0;
    for (double seen : world->all_gather(std::vector<double>{double(dg::stop_signal())}))
      signal = std::max(signal, static_cast<int>(seen));
    if (signal == 0) return;
    if (dg::stop_signal() == 0) dg::request_stop(signal);
  }
  dg::stop_if_requested(fmt::format("after step {} of {}", s.step + 1, s.steps));
}

// A sample of --sample-tokens tokens after --prompt, drawn through the CausalLM interface on the
// model's own K/V cache and printed as it is decoded.
void print_sample(Flags& flags, gpt2::Model& model, const TextData& data, uint64_t seed) {
  gpt2::CachedLM lm(model);
  std::vector<int32_t> prompt = data.tokenizer.encode(flags.str("prompt"));
  if (prompt.empty()) prompt = {data.train_ids[0]};
  const dg::GenerationOptions options{
      .max_new_tokens = flags.integer("sample-tokens"),
      .sampling = {.temperature = flags.number("temperature"), .top_k = 40, .seed = seed}};
  fmt::print("sample:\n{}", flags.str("prompt"));
  dg::Utf8Stream stream;
  const dg::GenerationResult r = dg::generate_tokens(lm, prompt, options, [&](int32_t id) {
    fmt::print("{}", stream.push(data.tokenizer.decode({id})));
    std::fflush(stdout);
  });
  fmt::print("{}\n({} tokens in {:.2f} s, {:.0f} tokens/s, {} context moves)\n", stream.finish(),
             r.tokens.size(), r.seconds, static_cast<double>(r.tokens.size()) / r.seconds,
             r.context_resets);
}

// world: the MPI process group, or null for one process.
int run(int argc, char** argv, dg::Collectives* world) {
  Flags flags(argc, argv);
  if (flags.help) {
    fmt::print("{}", flags.usage());
    return 0;
  }
  const bool root = !world || world->rank() == 0;
  const int ranks = world ? world->size() : 1;
  if (flags.integer("threads") > 0) dg::set_threads(static_cast<int>(flags.integer("threads")));

  // ---- data: the text, split by position; a BPE trained on the training part ----
  const TextData data = load_text(flags);
  const std::vector<int32_t>&train_ids = data.train_ids, &validation_ids = data.validation_ids;
  gpt2::Config config{.vocab = data.tokenizer.vocab_size(),
                      .context = flags.integer("seq-len"),
                      .dim = flags.integer("dim"),
                      .layers = flags.integer("layers"),
                      .heads = flags.integer("heads")};
  const uint64_t seed = static_cast<uint64_t>(flags.integer("seed"));
  gpt2::Model model(config);
  model.init_weights(seed);
  if (root)
    fmt::print(
        "text: {} bytes -> {} train + {} validation tokens (BPE of {} ids, {:.1f} s); model: "
        "dim {} layers {} heads {} context {}, {} parameters\n",
        data.text.size(), train_ids.size(), validation_ids.size(), config.vocab,
        data.tokenizer_seconds, config.dim, config.layers, config.heads, config.context,
        model.parameter_count());
  const int64_t T = config.context;
  const std::vector<int32_t> check_ids(
      validation_ids.begin(), validation_ids.begin() + std::min<size_t>(T, validation_ids.size()));

  if (flags.str("check-cache") == "true") {
    if (!flags.str("weights").empty()) dg::load_weights(flags.str("weights"), model);
    return root && !report_cache_check(check_cache(model, check_ids), T) ? 1 : 0;
  }

  // ---- the loop: any Module, a Dataset and a Sampler, a loss of (model, batch) ----
  const dg::TokenWindows train_windows(train_ids, T, /*stride=*/1);
  const int64_t eval_windows = flags.integer("eval-windows");
  const int64_t all_windows = (static_cast<int64_t>(validation_ids.size()) - T - 1) / T + 1;
  const dg::TokenWindows validation_windows(
      validation_ids, T, T, eval_windows > 0 ? std::min(eval_windows, all_windows) : -1);
  const auto loss = [](gpt2::Model& m, const dg::Batch& b) {
    return m.loss(b[0], b[1]);  // inputs, targets: int64 [batch, T]
  };
  const dg::TrainingConfig settings = training_settings(flags, seed);
  // The optimiser and its schedule are the caller's: AdamW (GPT-2's β2 and decay of the
  // matrices only), linear warm-up then cosine decay to a tenth.
  dg::AdamW optimizer(model, {.lr = flags.number("lr"),
                              .beta2 = 0.95,
                              .weight_decay = 0.1,
                              .decay = dg::DecayPolicy::matrices_only});
  const int64_t warmup = flags.integer("warmup") >= 0 ? flags.integer("warmup")
                                                      : std::max<int64_t>(1, settings.steps / 20);
  dg::CosineAnnealingLR schedule(optimizer, settings.steps, warmup, /*min_lr_ratio=*/0.1);
  dg::Trainer trainer(model, train_windows, dg::Sampler::random(train_windows.size(), seed), loss,
                      settings, optimizer, &schedule, config.to_json(), world);

  const std::string out = flags.str("out");
  const std::string checkpoint = out + "/checkpoint.safetensors", log_path = out + "/steps.jsonl";
  if (root) {
    std::filesystem::create_directories(out);
    data.tokenizer.save(out + "/tokenizer.json");
  }
  if (!flags.str("resume").empty()) {
    trainer.load_checkpoint(flags.str("resume"));
    if (root) {
      keep_first_lines(log_path, trainer.step());
      fmt::print("resuming from {} at step {}\n", flags.str("resume"), trainer.step());
    }
  } else if (root) {
    std::ofstream(log_path, std::ios::trunc);
  }
  std::ofstream log(log_path, std::ios::app);
  if (root)
    fmt::print("{} rank(s) x accum {} x batch {} = {} windows of {} tokens per step, {} steps\n",
               ranks, settings.accum, settings.batch, trainer.global_batch(), T, settings.steps);

  dg::install_stop_handlers();
  const int64_t log_every = std::max<int64_t>(1, flags.integer("log-every"));
  const int64_t checkpoint_every = flags.integer("checkpoint-every");
  const int64_t first_step = trainer.step();
  double seconds = 0;
  try {
    trainer.run(settings.steps, [&](const dg::StepLog& s) {
      seconds += s.seconds;
      if (root) {
        log << fmt::format(
                   "{{\"step\":{},\"loss\":{},\"grad_norm\":{},\"lr\":{},\"seconds\":{},"
                   "\"tokens_per_second\":{}}}\n",
                   s.step, s.loss, s.grad_norm, s.lr, s.seconds, s.tokens_per_second)
            << std::flush;
        if ((s.step + 1) % log_every == 0 || s.step + 1 == s.steps) {
          const double left = seconds / static_cast<double>(s.step + 1 - first_step) *
                              static_cast<double>(s.steps - s.step - 1);
          fmt::print("step {:>5}/{}  loss {:.4f}  {:.0f} tokens/s  {} left\n", s.step + 1, s.steps,
                     s.loss, s.tokens_per_second, format_seconds(left));
          std::fflush(stdout);
        }
      }
      if (checkpoint_every > 0 && (s.step + 1) % checkpoint_every == 0)
        trainer.save_checkpoint(checkpoint);
      stop_together(world, s);
    });
  } catch (const dg::Interrupted& e) {
    trainer.save_checkpoint(checkpoint);
    if (root) {
      const std::string launcher = ranks > 1 ? fmt::format("mpirun -np {} ", ranks) : "";
      fmt::print(stderr, "{}; checkpoint saved to {}\nresume with:\n  {}{}\n", e.what(), checkpoint,
                 launcher, flags.resume_command(argv[0], checkpoint));
    }
    return e.exit_code();
  }
  trainer.save_checkpoint(checkpoint);
  if (!root) return 0;

  dg::save_weights(out + "/model.safetensors", model);
  fmt::print("training: {} steps in {:.1f} s, weights checksum {}\n", trainer.step(),
             trainer.wall_seconds(), dg::parameter_checksum(trainer.parameters()));
  const double validation = dg::evaluate_loss(model, validation_windows, loss, 16);
  fmt::print("validation loss {:.4f} (perplexity {:.2f}) over {} windows of {} tokens\n",
             validation, std::exp(validation), validation_windows.size(), T);

  // ---- generation through the CausalLM interface, on the model's own K/V cache ----
  const bool cache_ok = report_cache_check(check_cache(model, check_ids), T);
  if (flags.integer("sample-tokens") > 0) print_sample(flags, model, data, seed);
  return cache_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<dg::World> world;
  try {
    // MPI when built with depthgrad::mpi and started by mpirun or srun, else one process. Made
    // here, not before the try: a launch MPI cannot serve (srun without PMI) is refused by a throw.
    world = std::make_unique<dg::World>();
    return run(argc, argv, world->size() > 1 ? &world->collectives() : nullptr);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt2: error on rank {}: {}\n", world ? world->rank() : 0, e.what());
    if (world && world->size() > 1) world->abort(1);  // the other ranks may be waiting for this one
    return 1;
  }
}
