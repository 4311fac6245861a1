// Genes: canonical text, parsing with errors that name the gene, the model config a genome
// describes and the JSON form (see genome.h).
#include "train/experiments/evolve/genome.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace dg {

using json::Object;
using json::Value;

const char* gene_name(Gene g) {
  static const char* names[kGeneCount] = {"mode", "dim",      "layers", "heads", "kv_heads",
                                          "lr",   "schedule", "steps",  "batch"};
  return names[static_cast<size_t>(g)];
}

namespace {

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

std::string gene_value(const Genome& g, Gene gene) {
  switch (gene) {
    case Gene::mode:
      return residual_mode_name(g.mode);
    case Gene::dim:
      return std::to_string(g.dim);
    case Gene::layers:
      return std::to_string(g.layers);
    case Gene::heads:
      return std::to_string(g.heads);
    case Gene::kv_heads:
      return std::to_string(g.kv_heads);
    case Gene::lr:
      return fmt::format("{:g}", g.lr);
    case Gene::schedule:
      return g.schedule;
    case Gene::steps:
      return std::to_string(g.steps);
    case Gene::batch:
      return std::to_string(g.batch);
  }
  return "";
}

void set_gene(Genome& g, Gene gene, const std::string& value) {
  switch (gene) {
    case Gene::mode:
      g.mode = parse_residual_mode(value);
      return;
    case Gene::dim:
      g.dim = parse_positive(value, gene);
      return;
    case Gene::layers:
      g.layers = parse_positive(value, gene);
      return;
    case Gene::heads:
      g.heads = parse_positive(value, gene);
      return;
    case Gene::kv_heads:
      g.kv_heads = parse_positive(value, gene);
      return;
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
      g.lr = lr;
      return;
    }
    case Gene::schedule:
      if (value != "constant" && value != "cosine")
        throw std::invalid_argument(
            fmt::format("genome: gene schedule must be constant or cosine, got '{}'", value));
      g.schedule = value;
      return;
    case Gene::steps:
      g.steps = parse_positive(value, gene);
      return;
    case Gene::batch:
      g.batch = parse_positive(value, gene);
      return;
  }
}

std::string genome_key(const Genome& g) {
  std::string key;
  for (Gene gene : kGenes) key += fmt::format("{}={};", gene_name(gene), gene_value(g, gene));
  return key + fmt::format("seq_len={}", g.seq_len);
}

std::string genome_summary(const Genome& g) {
  return fmt::format("{} d{} L{} h{}/kv{} lr {} {} {}×{}", residual_mode_name(g.mode), g.dim,
                     g.layers, g.heads, g.kv_heads, gene_value(g, Gene::lr), g.schedule, g.steps,
                     g.batch);
}

MicroLMConfig genome_model_config(const Genome& g, int64_t vocab) {
  MicroLMConfig c;
  c.vocab = vocab;
  c.dim = g.dim;
  c.layers = g.layers;
  c.heads = g.heads;
  c.kv_heads = g.kv_heads;
  c.seq_len = g.seq_len;
  c.mode = g.mode;
  c.validate();
  if (g.schedule != "constant" && g.schedule != "cosine")
    throw std::invalid_argument(
        fmt::format("genome: schedule must be constant or cosine, got '{}'", g.schedule));
  if (g.steps < 1 || g.batch < 1 || !(g.lr > 0))
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

Value genome_to_json(const Genome& g) {
  Object o;
  o.emplace_back("mode", residual_mode_name(g.mode));
  o.emplace_back("dim", g.dim);
  o.emplace_back("layers", g.layers);
  o.emplace_back("heads", g.heads);
  o.emplace_back("kv_heads", g.kv_heads);
  o.emplace_back("lr", g.lr);
  o.emplace_back("schedule", g.schedule);
  o.emplace_back("steps", g.steps);
  o.emplace_back("batch", g.batch);
  o.emplace_back("seq_len", g.seq_len);
  return Value(std::move(o));
}

Genome genome_from_json(const Value& v) {
  Genome g;
  g.mode = parse_residual_mode(v.at("mode").as_string());
  g.dim = v.at("dim").as_int();
  g.layers = v.at("layers").as_int();
  g.heads = v.at("heads").as_int();
  g.kv_heads = v.at("kv_heads").as_int();
  g.lr = v.at("lr").as_double();
  g.schedule = v.at("schedule").as_string();
  g.steps = v.at("steps").as_int();
  g.batch = v.at("batch").as_int();
  g.seq_len = v.at("seq_len").as_int();
  return g;
}
}  // namespace dg
