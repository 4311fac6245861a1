// A micro-LM genome for `depthgrad evolve`: a run configuration (train/lm/run_config.h) and the
// nine genes a search may change in it (residual mode, width, depth, heads, K/V heads of the model;
// lr, schedule, steps, batch of the training), their canonical text, the run a trial trains and the
// genome's JSON form. It does not propose, train or score genomes.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "nn/lm/micro_lm.h"
#include "train/io/json.h"
#include "train/lm/run_config.h"

namespace dg {

// What a genome is: a RunConfig whose genes are fields of it. Evolve fixes the rest: clipping at
// 1.0, AdamW weight decay on matrices only, identical initialisation (block and rd arms start as
// the same function), cosine = warm-up over 5% of the steps then down to 10% of the peak, the
// whole train split; the vocabulary comes from the corpus, the seed and the evaluation windows
// from the trial (genome_run_config).
struct Genome {
  // evolve's micro baseline: block_attnres d64 L4 h4/kv4, seq 64, lr 6e-4 cosine,
  // kArmsDifferSteps steps × 4.
  Genome();
  RunConfig run;
};

// The training budget from which block_attnres and rd_attnres genomes can be told apart. With
// identical initialisation their routes start equal, so the two train almost alike: measured at
// the micro size (d64 L4, seeds 42/43 and 1-10, one thread), their per-step losses differ by less
// than 1e-4 until step 60-180 and by less than 1e-3 until step 200-540; after 200 steps their
// validation NLLs differ by about 2e-5 with no consistent sign (paired over 6 seeds: CI [-2.2e-4,
// +6.9e-5]), after 600 steps by -3.8e-4, rd lower on every seed (paired over 10 seeds: 9/10 wins,
// CI [-6.8e-4, -1.9e-4]). evolve's default budget, and the threshold of its warning.
constexpr int64_t kArmsDifferSteps = 600;

enum class Gene { mode, dim, layers, heads, kv_heads, lr, schedule, steps, batch };
constexpr size_t kGeneCount = 9;
const char* gene_name(Gene gene);
std::string gene_value(const Genome& genome, Gene gene);  // canonical text, e.g. "0.0006"
// Sets a gene (and what follows from it: the schedule's warm-up follows steps and schedule);
// throws naming the gene when the text is not a value of it.
void set_gene(Genome& genome, Gene gene, const std::string& value);
// The fingerprint of a genome: every gene's canonical text and the sequence length; equal
// genomes have equal keys, and genomes are compared by it.
std::string genome_key(const Genome& genome);
bool operator==(const Genome& a, const Genome& b);
// "rd_attnres d64 L4 h4/kv4 lr 0.0006 cosine 200×4"
std::string genome_summary(const Genome& genome);
// The model a genome describes (vocab from the corpus); throws when the genome is not buildable.
MicroLMConfig genome_model_config(const Genome& genome, int64_t vocab);
bool genome_is_valid(const Genome& genome);
// The run a trial trains: the genome's RunConfig with the corpus's vocabulary, the trial's seed
// and `eval_windows` evaluation windows (0 = every window). Validated (throws naming the key).
RunConfig genome_run_config(const Genome& genome, uint64_t seed, int64_t vocab,
                            int64_t eval_windows);
// {"mode", "dim", "layers", "heads", "kv_heads", "lr", "schedule", "steps", "batch", "seq_len"}:
// the genes as result.json records them (the fixed settings are in its "protocol").
json::Value genome_to_json(const Genome& genome);
Genome genome_from_json(const json::Value& value);
// Every gene, in the order of the Gene enum (mutations and JSON use this order).
constexpr std::array<Gene, kGeneCount> kGenes{Gene::mode,     Gene::dim,      Gene::layers,
                                              Gene::heads,    Gene::kv_heads, Gene::lr,
                                              Gene::schedule, Gene::steps,    Gene::batch};

}  // namespace dg
