// char_lstm: a character language model on Tiny Shakespeare (embedding -> LSTM -> linear), trained
// by dg::Trainer on windows of characters (dg::TokenWindows over the character ids), its
// validation loss measured on the last tenth of the text, then text sampled from it one character
// at a time, the LSTM's state carried between steps. It checks its own result: the validation loss
// must fall below --max-val-loss (default: 0.9 × the entropy of the training text's character
// frequencies, what a model that ignores context gets), else it exits 1.
//   char_lstm DATA_DIR [--steps N] [--batch B] [--seq-len T] [--embed E] [--hidden H]
//             [--layers L] [--lr R] [--eval-windows W] [--sample-chars C] [--max-val-loss X]
// DATA_DIR holds tiny_shakespeare.txt. It does not save checkpoints, resume or tokenize beyond
// bytes (the characters are the text's distinct bytes).
#include <depthgrad/depthgrad.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::string data_dir;
  int64_t steps = 1500, batch = 32, seq_len = 64, embed = 32, hidden = 256, layers = 2;
  double lr = 3e-3;
  int64_t eval_windows = 200, sample_chars = 300;
  double max_val_loss = 0;  // 0: 0.9 × the character-frequency entropy
};

Settings parse(int argc, char** argv) {
  Settings s;
  const std::map<std::string, int64_t*> ints = {{"--steps", &s.steps},
                                                {"--batch", &s.batch},
                                                {"--seq-len", &s.seq_len},
                                                {"--embed", &s.embed},
                                                {"--hidden", &s.hidden},
                                                {"--layers", &s.layers},
                                                {"--eval-windows", &s.eval_windows},
                                                {"--sample-chars", &s.sample_chars}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      s.data_dir = arg;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument("char_lstm: " + arg + " needs a value");
    const std::string value = argv[++i];
    if (ints.count(arg))
      *ints.at(arg) = std::stoll(value);
    else if (arg == "--lr")
      s.lr = std::stod(value);
    else if (arg == "--max-val-loss")
      s.max_val_loss = std::stod(value);
    else
      throw std::invalid_argument("char_lstm: unknown flag " + arg);
  }
  if (s.data_dir.empty())
    throw std::invalid_argument("char_lstm: usage: char_lstm DATA_DIR [--steps N] ...");
  return s;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("char_lstm: cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// ids [B, T] -> logits [B·T, vocab].
class CharLSTM : public dg::Module {
 public:
  CharLSTM(int64_t vocab, const Settings& s)
      : embedding(register_module("embedding", std::make_unique<dg::Embedding>(vocab, s.embed))),
        lstm(register_module(
            "lstm", std::make_unique<dg::LSTM>(dg::RecurrentOptions{.input_size = s.embed,
                                                                    .hidden_size = s.hidden,
                                                                    .num_layers = s.layers,
                                                                    .batch_first = true}))),
        head(register_module("head", std::make_unique<dg::Linear>(s.hidden, vocab))) {}
  dg::Tensor forward(const dg::Tensor& ids) const {
    return hooked(
        [&](const dg::Tensor& ids) {
          const dg::Tensor h = lstm(embedding(ids)).output;  // [B, T, H]
          return head(dg::reshape(h, {-1, h.size(2)}));
        },
        ids);
  }
  dg::Embedding& embedding;
  dg::LSTM& lstm;
  dg::Linear& head;
};

// Characters drawn one at a time from softmax(logits), starting after `prompt`; the LSTM's state
// (h, c) is carried from step to step, so each step reads one character.
std::string sample(const CharLSTM& model, const std::vector<char>& chars,
                   const std::vector<int32_t>& id_of, const std::string& prompt, int64_t count,
                   dg::TorchGenerator& gen) {
  dg::NoGradGuard no_grad;
  dg::Tensor h, c;
  std::string out = prompt;
  int64_t next = id_of[static_cast<unsigned char>(prompt[0])];
  for (size_t i = 0; i < prompt.size() + static_cast<size_t>(count) - 1; ++i) {
    const dg::Tensor x = model.embedding(dg::Tensor::from_ids({next}, {1, 1}));
    const dg::RecurrentOutput r = model.lstm(x, h, c);
    h = r.h_n, c = r.c_n;
    if (i + 1 < prompt.size()) {  // still reading the prompt
      next = id_of[static_cast<unsigned char>(prompt[i + 1])];
      continue;
    }
    const dg::Tensor p = dg::softmax(model.head(dg::reshape(r.output, {1, -1})), 1);
    std::array<float, 1> u{};
    gen.uniform_(u.data(), 1, 0.0, 1.0);
    const std::vector<double> probs = p.to_vector();
    double total = 0;
    next = static_cast<int64_t>(probs.size()) - 1;
    for (size_t k = 0; k < probs.size(); ++k)
      if ((total += probs[k]) > u[0]) {
        next = static_cast<int64_t>(k);
        break;
      }
    out += chars[next];
  }
  return out;
}

int run(const Settings& s) {
  const std::string text = read_text(s.data_dir + "/tiny_shakespeare.txt");
  std::vector<int32_t> id_of(256, -1);
  std::vector<char> chars;
  for (unsigned char ch : text) id_of[ch] = 0;
  for (int b = 0; b < 256; ++b)
    if (id_of[b] == 0) id_of[b] = static_cast<int32_t>(chars.size()), chars.push_back(char(b));
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = id_of[static_cast<unsigned char>(text[i])];
  const size_t split = ids.size() * 9 / 10;
  const std::vector<int32_t> train_ids(ids.begin(), ids.begin() + split),
      valid_ids(ids.begin() + split, ids.end());
  const int64_t vocab = static_cast<int64_t>(chars.size());

  std::vector<double> freq(vocab, 0.0);  // the context-free baseline: H = −Σ p log p
  for (int32_t id : train_ids) freq[id] += 1.0 / static_cast<double>(train_ids.size());
  double entropy = 0;
  for (double p : freq) entropy -= p > 0 ? p * std::log(p) : 0;
  const double bound = s.max_val_loss > 0 ? s.max_val_loss : 0.9 * entropy;

  const dg::TokenWindows train(train_ids, s.seq_len, /*stride=*/1);
  const dg::TokenWindows valid(valid_ids, s.seq_len, s.seq_len, s.eval_windows);
  dg::manual_seed(0);
  CharLSTM model(vocab, s);
  const dg::TrainingConfig config{.steps = s.steps, .batch = s.batch, .clip = 1.0, .seed = 1};
  dg::AdamW optimizer(model, dg::AdamWConfig{.lr = s.lr, .weight_decay = 0.0});
  dg::CosineAnnealingLR schedule(optimizer, s.steps, /*warmup_steps=*/s.steps / 20,
                                 /*min_lr_ratio=*/0.1);
  const auto loss = [](CharLSTM& m, const dg::Batch& batch) {
    return dg::cross_entropy(m(batch[0]), dg::reshape(batch[1], {-1}));
  };
  dg::Trainer trainer(model, train, dg::Sampler::random(train.size(), config.seed), loss, config,
                      optimizer, &schedule);
  std::printf(
      "char_lstm: %lld characters (%lld distinct), %lld parameters; context-free entropy "
      "%.3f nats, bound %.3f\n",
      static_cast<long long>(ids.size()), static_cast<long long>(vocab),
      static_cast<long long>(model.parameter_count()), entropy, bound);
  const auto start = std::chrono::steady_clock::now();
  const int64_t every = std::max<int64_t>(1, s.steps / 10);
  trainer.run(s.steps, [&](const dg::StepLog& log) {
    if (log.step % every == 0 || log.step + 1 == s.steps)
      std::printf("step %5lld  loss %.4f  lr %.5f  %.0f chars/s\n",
                  static_cast<long long>(log.step), log.loss, log.lr, log.tokens_per_second);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double val_loss = dg::evaluate_loss(model, valid, loss, s.batch);
  std::printf("validation loss %.4f nats/char over %lld windows of %lld (%.1f s of training)\n",
              val_loss, static_cast<long long>(valid.size()), static_cast<long long>(s.seq_len),
              seconds);
  dg::TorchGenerator gen(7);
  std::printf("--- sample ---\n%s\n--------------\n",
              sample(model, chars, id_of, "ROMEO:", s.sample_chars, gen).c_str());
  if (!(val_loss < bound)) {
    std::printf("FAILED: validation loss %.4f is not below %.4f\n", val_loss, bound);
    return 1;
  }
  std::printf("example passed\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
