// A micro-LM genome for `depthgrad evolve`: the nine genes a search may change (residual mode,
// width, depth, heads, K/V heads, lr, schedule, steps, batch), their canonical text, the model a
// genome describes and its JSON form. It does not propose, train or score genomes.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "nn/micro_lm.h"
#include "train/io/json.h"

namespace dg {

struct Genome {
  ResidualMode mode = ResidualMode::block_attnres;
  int64_t dim = 64;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  double lr = 6e-4;
  std::string schedule = "cosine";  // constant | cosine (warmup 5% of steps)
  int64_t steps = 200;
  int64_t batch = 4;
  int64_t seq_len = 64;  // fixed by the run's config; never mutated
  bool operator==(const Genome&) const = default;
};

enum class Gene { mode, dim, layers, heads, kv_heads, lr, schedule, steps, batch };
constexpr size_t kGeneCount = 9;
const char* gene_name(Gene gene);
std::string gene_value(const Genome& genome, Gene gene);  // canonical text, e.g. "0.0006"
void set_gene(Genome& genome, Gene gene, const std::string& value);  // throws naming the gene
// The fingerprint of a genome: every gene's canonical text; equal genomes have equal keys.
std::string genome_key(const Genome& genome);
// "rd_attnres d64 L4 h4/kv4 lr 0.0006 cosine 200×4"
std::string genome_summary(const Genome& genome);
// The model a genome describes (vocab from the corpus); throws when the genome is not buildable.
MicroLMConfig genome_model_config(const Genome& genome, int64_t vocab);
bool genome_is_valid(const Genome& genome);
json::Value genome_to_json(const Genome& genome);
Genome genome_from_json(const json::Value& value);
// Every gene, in the order of the Gene enum (mutations and JSON use this order).
constexpr std::array<Gene, kGeneCount> kGenes{Gene::mode,     Gene::dim,      Gene::layers,
                                              Gene::heads,    Gene::kv_heads, Gene::lr,
                                              Gene::schedule, Gene::steps,    Gene::batch};

}  // namespace dg
