// Genes as fields of a RunConfig: canonical text, parsing with errors that name the gene, the run
// a trial trains and the JSON form (see genome.h).
#include "tools/attnres/evolve/genome.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace dg {

using json::Object;
using json::Value;

namespace {

// The schedule follows the genes: warm-up 5% of the steps for cosine, none for constant; its rate
// and length are the training's (the Trainer sets them too).
void settle_schedule(Genome& g) {
  LMTrainingConfig& t = g.run.training;
  t.schedule.warmup_steps = default_warmup_steps(t.schedule.kind, t.steps);
  t.schedule.total_steps = t.steps;
  t.schedule.lr = t.adamw.lr;
}

int64_t parse_positive(const std::string& text, Gene g) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 1)
    throw std::invalid_argument(
        fmt::format("genome: gene {} needs a positive integer, got '{}'", gene_name(g), text));
  return v;
}
}  // namespace

Genome::Genome() {
  MicroLMConfig& m = run.model;
  m.mode = residual_mode("block_attnres");
  m.dim = 64;
  m.layers = 4;
  m.heads = 4;
  m.kv_heads = 4;
  m.seq_len = 64;
  LMTrainingConfig& t = run.training;
  t.steps = kArmsDifferSteps;
  t.batch = 4;
  t.clip = 1.0;
  t.adamw.lr = 6e-4;
  t.adamw.decay = DecayPolicy::matrices_only;
  t.schedule.kind = Schedule::Kind::warmup_cosine;
  t.init = InitScheme::identical;
  run.data.train_limit = 0;
  run.data.eval_limit = 0;
  run.data.eval_full = false;
  settle_schedule(*this);
}

const char* gene_name(Gene g) {
  static const char* names[kGeneCount] = {"mode", "dim",      "layers", "heads", "kv_heads",
                                          "lr",   "schedule", "steps",  "batch"};
  return names[static_cast<size_t>(g)];
}

std::string gene_value(const Genome& g, Gene gene) {
  const MicroLMConfig& m = g.run.model;
  const LMTrainingConfig& t = g.run.training;
  switch (gene) {
    case Gene::mode:
      return residual_mode_name(m.mode);
    case Gene::dim:
      return std::to_string(m.dim);
    case Gene::layers:
      return std::to_string(m.layers);
    case Gene::heads:
      return std::to_string(m.heads);
    case Gene::kv_heads:
      return std::to_string(m.kv_heads);
    case Gene::lr:
      return fmt::format("{:g}", t.adamw.lr);
    case Gene::schedule:
      return schedule_kind_name(t.schedule.kind);
    case Gene::steps:
      return std::to_string(t.steps);
    case Gene::batch:
      return std::to_string(t.batch);
  }
  return "";
}

void set_gene(Genome& g, Gene gene, const std::string& value) {
  MicroLMConfig& m = g.run.model;
  LMTrainingConfig& t = g.run.training;
  switch (gene) {
    case Gene::mode:
      m.mode = parse_residual_mode(value);
      break;
    case Gene::dim:
      m.dim = parse_positive(value, gene);
      break;
    case Gene::layers:
      m.layers = parse_positive(value, gene);
      break;
    case Gene::heads:
      m.heads = parse_positive(value, gene);
      break;
    case Gene::kv_heads:
      m.kv_heads = parse_positive(value, gene);
      break;
    case Gene::lr: {
      size_t used = 0;
      double lr = 0;
      try {
        lr = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || !(lr > 0) || !std::isfinite(lr))
        throw std::invalid_argument(
            fmt::format("genome: gene lr needs a positive number, got '{}'", value));
      t.adamw.lr = lr;
      break;
    }
    case Gene::schedule:
      if (value != "constant" && value != "cosine")
        throw std::invalid_argument(
            fmt::format("genome: gene schedule must be constant or cosine, got '{}'", value));
      t.schedule.kind = parse_schedule_kind(value);
      break;
    case Gene::steps:
      t.steps = parse_positive(value, gene);
      break;
    case Gene::batch:
      t.batch = parse_positive(value, gene);
      break;
  }
  settle_schedule(g);
}

std::string genome_key(const Genome& g) {
  std::string key;
  for (Gene gene : kGenes) key += fmt::format("{}={};", gene_name(gene), gene_value(g, gene));
  return key + fmt::format("seq_len={}", g.run.model.seq_len);
}

bool operator==(const Genome& a, const Genome& b) { return genome_key(a) == genome_key(b); }

std::string genome_summary(const Genome& g) {
  const MicroLMConfig& m = g.run.model;
  return fmt::format("{} d{} L{} h{}/kv{} lr {} {} {}×{}", residual_mode_name(m.mode), m.dim,
                     m.layers, m.heads, m.kv_heads, gene_value(g, Gene::lr),
                     gene_value(g, Gene::schedule), g.run.training.steps, g.run.training.batch);
}

MicroLMConfig genome_model_config(const Genome& g, int64_t vocab) {
  MicroLMConfig c = g.run.model;
  c.vocab = vocab;
  c.validate();
  const LMTrainingConfig& t = g.run.training;
  if (t.steps < 1 || t.batch < 1 || !(t.adamw.lr > 0))
    throw std::invalid_argument(
        fmt::format("genome: steps, batch and lr must be positive ({})", genome_summary(g)));
  return c;
}

bool genome_is_valid(const Genome& g) {
  try {
    genome_model_config(g, 512);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

RunConfig genome_run_config(const Genome& g, uint64_t seed, int64_t vocab, int64_t eval_windows) {
  RunConfig run = g.run;
  run.model = genome_model_config(g, vocab);
  run.training.seed = seed;
  run.data.eval_windows = eval_windows;
  run.validate();
  return run;
}

Value genome_to_json(const Genome& g) {
  const MicroLMConfig& m = g.run.model;
  const LMTrainingConfig& t = g.run.training;
  Object o;
  o.emplace_back("mode", residual_mode_name(m.mode));
  o.emplace_back("dim", m.dim);
  o.emplace_back("layers", m.layers);
  o.emplace_back("heads", m.heads);
  o.emplace_back("kv_heads", m.kv_heads);
  o.emplace_back("lr", t.adamw.lr);
  o.emplace_back("schedule", gene_value(g, Gene::schedule));
  o.emplace_back("steps", t.steps);
  o.emplace_back("batch", t.batch);
  o.emplace_back("seq_len", m.seq_len);
  return Value(std::move(o));
}

Genome genome_from_json(const Value& v) {
  Genome g;
  MicroLMConfig& m = g.run.model;
  m.mode = parse_residual_mode(v.at("mode").as_string());
  m.dim = v.at("dim").as_int();
  m.layers = v.at("layers").as_int();
  m.heads = v.at("heads").as_int();
  m.kv_heads = v.at("kv_heads").as_int();
  m.seq_len = v.at("seq_len").as_int();
  LMTrainingConfig& t = g.run.training;
  t.adamw.lr = v.at("lr").as_double();
  t.steps = v.at("steps").as_int();
  t.batch = v.at("batch").as_int();
  set_gene(g, Gene::schedule, v.at("schedule").as_string());  // checks it; settles the schedule
  return g;
}
}  // namespace dg
