// `depthgrad evolve`: an evolutionary search over micro-LM genomes, steered by a research
// direction. Generation 0 trains the baseline; each later generation proposes children of the
// current champion (mutations, plus one crossover with the runner-up once there is one), trains
// each child on the same seeds and keeps the best by score = mean validation NLL + z·stderr.
// The test split is evaluated once at the end, for the baseline and the champion. It does not
// parse flags or load data: the CLI hands it a TrialTrainer (tests hand it a fake one).
//
// Direction rules (plan_direction): the direction is lower-cased (ASCII only), whitespace runs
// become one space, and everything else is kept, hyphens included (the reference stripped them,
// so its "rd-attnres" term could never match, upstream-protocol.md §8 item 11). Keywords are
// matched longest first, and a match consumes its text, so "深度路由" (depth routing) is an
// AttnRes keyword and does not also fire the depth rule's "深度"; an ASCII keyword must start at
// a word boundary ("lr" does not match "world") and may be a prefix ("depth rout" matches
// "depth routing"). The rules, their keywords and what they do to the search space:
//   attnres_family  attnres, attention residual, 注意力残差, depth rout, 深度路由, 残差路由,
//                   residual, 残差, routing, 路由
//                   -> mode gene +4; modes = the AttnRes family, standard a rare control (0.25)
//   role_decoupled  rd-attnres, rd attnres, role-decoupled, role decoupled, 角色解耦, qk/v, qk-v,
//                   v route, v-route
//                   -> mode gene +4; rd_attnres and paper_rd_attnres +1
//   block_attnres   block attnres, block-attnres, block attention residual, 块注意力残差
//                   -> mode gene +4; block_attnres and paper_block_attnres +1
//   paper_form      paper formulation, paper-faithful, full attnres, 论文
//                   -> mode gene +2; the paper modes +1
//   width           width, wide, widen, dimension, dim, 宽度, 维度, 加宽
//                   -> dim gene +3; wider dims +2
//   depth           depth, deep, layers, 深度, 层数, 更深  -> layers gene +3; more layers +2
//   learning_rate   learning rate, learning-rate, lr, 学习率  -> lr gene +3, schedule gene +1
//   schedule        schedule, cosine, warmup, 调度, 余弦, 预热  -> schedule gene +3
//   gqa             gqa, grouped-query, grouped query, kv, 分组查询
//                   -> kv_heads gene +3; fewer K/V heads +1
//   heads           head, 注意力头, 多头  -> heads gene +3
//   budget          steps, budget, compute, longer, 步数, 预算, 训练更久  -> steps gene +3
//   batch           batch, 批大小, 批量  -> batch gene +3
// With any match, genes no rule named keep weight 0.5, except the budget genes (steps, batch),
// which stay fixed (weight 0) so that children are compared at the parent's compute. A direction
// that matches nothing searches the full space: every gene and value with weight 1.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/micro_lm.h"
#include "train/io/json.h"
#include "train/trainer.h"

namespace dg {

// ---- genome -------------------------------------------------------------------------------------

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
std::string gene_value(const Genome& genome, Gene gene);             // canonical text, e.g. "6e-04"
void set_gene(Genome& genome, Gene gene, const std::string& value);  // throws naming the gene
// The fingerprint of a genome: every gene's canonical text; equal genomes have equal keys.
std::string genome_key(const Genome& genome);
// "rd_attnres d64 L4 h4/kv4 lr 6e-04 cosine 200×4"
std::string genome_summary(const Genome& genome);
// The model a genome describes (vocab from the corpus); throws when the genome is not buildable.
MicroLMConfig genome_model_config(const Genome& genome, int64_t vocab);
bool genome_is_valid(const Genome& genome);
json::Value genome_to_json(const Genome& genome);
Genome genome_from_json(const json::Value& value);

// ---- direction -> search space ------------------------------------------------------------------

struct GeneSpace {
  double weight = 0;                  // chance that a mutation picks this gene ∝ weight
  std::vector<std::string> values;    // candidate values (canonical text)
  std::vector<double> value_weights;  // chance of each value ∝ weight
};
struct SearchSpace {
  std::array<GeneSpace, kGeneCount> genes;
  GeneSpace& operator[](Gene g) { return genes[static_cast<size_t>(g)]; }
  const GeneSpace& operator[](Gene g) const { return genes[static_cast<size_t>(g)]; }
};

struct RuleMatch {
  std::string rule;
  std::vector<std::string> keywords;  // the keywords that matched, in match order
  std::string effect;
};
struct DirectionPlan {
  std::string text, normalized;
  std::vector<RuleMatch> matches;  // in the order of the rule table
  bool fallback = false;           // nothing matched: the full space
  std::string note;
  // The baseline's residual mode when the command line does not name one: block_attnres (the
  // reference AttnRes, one mutation from rd_attnres), or paper_block_attnres when only the
  // paper_form rule among the mode rules matched.
  ResidualMode centre = ResidualMode::block_attnres;
  SearchSpace space;
};
// Lower-cases ASCII letters, turns whitespace runs into one space, trims; keeps hyphens, '/',
// and every non-ASCII character.
std::string normalize_direction(const std::string& text);
// The names of the rule table, in order (documented above).
std::vector<std::string> direction_rule_names();
DirectionPlan plan_direction(const std::string& direction, const Genome& baseline);
json::Value direction_plan_json(const DirectionPlan& plan);

// ---- proposals ----------------------------------------------------------------------------------

// A small deterministic generator (SplitMix64) for proposals: the same seed gives the same
// stream on every machine and thread count.
class ProposalRng {
 public:
  explicit ProposalRng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1)
  // An index drawn with probability ∝ weights[i] (weights >= 0, some > 0).
  size_t pick(const std::vector<double>& weights);

 private:
  uint64_t state_;
};

struct Proposal {
  Genome genome;
  std::string origin;                // mutation | crossover
  std::vector<std::string> changes;  // "dim: 64 → 96" (crossover: "dim: 64 → 96 (from g1-t2)")
};
// One or two genes of `parent` changed (two with probability 0.3), genes and values drawn from
// the space; the result may be invalid or already seen (the caller re-draws).
Proposal mutate(const Genome& parent, const SearchSpace& space, ProposalRng& rng);
// Each gene from `a` or `b` with probability ½; never equal to `a` when the two differ.
Proposal crossover(const Genome& a, const Genome& b, const std::string& b_id, ProposalRng& rng);

struct ProposedTrial {
  std::string trial_id;  // g<generation>-t<slot>
  int64_t slot = 0;
  Proposal proposal;
  std::vector<std::string> parents;  // champion first (crossover: and the runner-up)
  int64_t draws = 0;                 // draws needed to reach a new, valid genome
  std::string note;                  // e.g. why the crossover slot holds a mutation
};
struct GenerationPlan {
  std::vector<ProposedTrial> trials;
  std::vector<std::string> skipped;  // slots for which no new genome was found in kMaxDraws draws
};
constexpr int64_t kMaxDraws = 64;
// The children of one generation: slot 1..population, each a mutation of the champion, except the
// last slot, which is a crossover of champion and runner-up when a runner-up exists and
// population >= 2. A genome already in `seen` (or proposed earlier in this generation) or not
// buildable is re-drawn, at most kMaxDraws times; then the slot is skipped. The RNG is seeded from
// (seed, generation), so a generation's proposals depend only on the seed and the search so far.
GenerationPlan propose_generation(int64_t generation, int64_t population, uint64_t seed,
                                  const SearchSpace& space, const std::string& champion_id,
                                  const Genome& champion, const std::string& runner_up_id,
                                  const Genome* runner_up, std::vector<std::string>& seen_keys);

// ---- scoring ------------------------------------------------------------------------------------

// A child replaces its parent only when its score is lower by more than this (nats): smaller
// differences are floating-point noise (e.g. block and rd routes that start as the same function).
constexpr double kScoreTieTolerance = 1e-6;
struct TrialScore {
  double mean = 0;   // mean validation NLL over seeds
  double std = 0;    // sample std (0 for one seed)
  double sem = 0;    // standard error of the mean: std / √n
  double score = 0;  // mean + z·sem; lower is better
};
TrialScore score_trial(const std::vector<double>& nll, double z);

// ---- trials and the trainer hook ----------------------------------------------------------------

enum class EvalSplit { validation, test };

struct TrialRun {
  std::string trial_id;
  Genome genome;
  uint64_t seed = 0;
  size_t seed_index = 0, seed_count = 1;
  EvalSplit split = EvalSplit::validation;
};
struct SeedMetrics {
  uint64_t seed = 0;
  double nll = 0;           // mean NLL per token on the evaluation windows
  double perplexity = 0;    // exp(min(nll, 20))
  double initial_loss = 0;  // mean of the first ≤10 training losses
  double final_loss = 0;    // mean of the last ≤10 training losses
  int64_t parameters = 0;
  double seconds = 0;
  // When set, evaluates the trained weights (kept in memory) on the test split. The search keeps
  // these only for the baseline and the current champion. When empty (a fake trainer, or a trial
  // recorded by an earlier session of a resumed run), the test evaluation re-trains the trial
  // deterministically with split = test instead.
  std::function<double()> evaluate_test;
};
// Trains one genome on one seed and evaluates it on the requested split. Throws on failure (a
// non-finite training loss throws in dg::Trainer); the search records the error and goes on.
using TrialTrainer = std::function<SeedMetrics(const TrialRun& run)>;

// The real trainer: dg::Trainer with identical init, AdamW (weight decay on matrices only), clip
// 1.0 and the genome's schedule (cosine: 5% warmup, then down to 10% of the peak), evaluated on
// the first `eval_windows` non-overlapping windows of the split (0 = every window). It keeps each
// trained model for evaluate_test. The id vectors must outlive it.
TrialTrainer make_micro_lm_trainer(
    const std::vector<int32_t>& train, const std::vector<int32_t>& validation,
    const std::vector<int32_t>& test, int64_t vocab, int64_t eval_windows,
    std::function<void(const TrialRun&, const StepLog&)> on_step = {});
// The training configuration the real trainer uses for a genome and seed.
TrainerConfig genome_trainer_config(const Genome& genome, uint64_t seed, int64_t vocab);
// The evaluation windows of a split: the first eval_windows windows of seq_len (0 = all of them).
std::vector<int64_t> evolve_eval_starts(int64_t split_length, int64_t seq_len,
                                        int64_t eval_windows);

// ---- the search ---------------------------------------------------------------------------------

struct EvolveOptions {
  std::string model = "micro-llm";
  std::string dataset = "wikitext-2";
  std::string direction = "比较 Block AttnRes 与 RD-AttnRes 的 QK/V 深度路由";
  int64_t generations = 2;
  int64_t population = 4;
  int64_t trial_seeds = 2;  // every trial trains on seeds seed, seed+1, …
  int64_t eval_windows = 64;
  uint64_t seed = 42;  // training seeds and the proposal RNG
  double confidence_z = 1.0;
  Genome baseline;
  int64_t vocab = 512;
  int threads = 1;
  std::string run_dir;  // where files go (required when write_files)
  bool write_files = true;
  json::Value dataset_info;  // recorded as given (token counts, sha256s)
  std::function<void(const std::string& line)> on_message;
  // Called before each trial: (trial id, trials finished so far, trials planned in total).
  std::function<void(const std::string& trial_id, int64_t done, int64_t planned)> on_trial;
};

struct EvolveOutput {
  json::Value result;
  std::string summary;  // the lines the CLI prints at the end
};

// Runs (or, with `resume` = a previous result.json, continues) the search. Resuming replays the
// search with the recorded trials in place of training them: the same proposals come back (they
// depend only on the seed and the recorded results), so the run continues after the last
// finished trial. Writes result.json, report.md and index.html after every trial when write_files.
EvolveOutput run_evolution(const EvolveOptions& options, const TrialTrainer& trainer,
                           const json::Value* resume = nullptr);

// The search settings recorded in result.json["config"], and back (for --resume).
json::Value evolve_config_json(const EvolveOptions& options);
EvolveOptions evolve_options_from_config(const json::Value& config);

// result.json -> report.md / index.html (self-contained, SVG charts).
std::string render_evolve_markdown(const json::Value& result);
std::string render_evolve_html(const json::Value& result);

}  // namespace dg
