// `depthgrad finetune`: LoRA adapters trained over a frozen Hugging Face GPT-2 or Llama on your
// own text (or a built-in data set), written in PEFT's layout. It imports --from (read_hf_model;
// the tokenizer is the model's own), adds the adapters --lora names (train/lm/peft.h: PEFT's
// target names and matching) and trains only them with train's loop (tools/cli/train_run.h: the
// data, --resume, --accum, MPI ranks under mpirun, --precision bf16, checkpoints, steps.jsonl,
// progress). The output folder gets adapter_config.json + adapter_model.safetensors (PEFT's
// files), model.safetensors (the merged model, for generate, eval and export), the training
// checkpoint, config.json, tokenizer.json, steps.jsonl and summary.json.
//
//   depthgrad finetune --from tests/data/hf/llama --lora r=8,alpha=16,targets=q_proj,v_proj
//       --dataset my-text.txt --steps 200 --output-dir runs/lora
//
// --base-precision bf16 or int8 stores the blocks' frozen Linears quantized (nn/quantize.h); the
// merged model is then not written. It does not train full weights (depthgrad train --init-from
// does) or read an adapter to continue (resume from the training checkpoint).
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "nn/lora.h"
#include "nn/quantize.h"
#include "tensor/gemm_kernels.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_guard.h"
#include "tools/cli/progress.h"
#include "tools/cli/ranks.h"
#include "tools/cli/run_config_flags.h"
#include "tools/cli/shared_flags.h"
#include "tools/cli/train_run.h"
#include "tools/cli/train_samples.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/sha256.h"
#include "train/lm/hf_model.h"
#include "train/lm/micro_lm_training.h"
#include "train/lm/peft.h"
#include "train/stop.h"

namespace dg::cli {

namespace {

// Files finetune writes besides train's (tools/cli/train_run.h): removed first with --overwrite.
const std::vector<std::string> kAdapterFiles = {"adapter_config.json", "adapter_model.safetensors"};

// What finetune runs without flags: 100 steps of AdamW at 3e-4 without weight decay (the adapters
// start at zero: B = 0), a constant rate, clipping at 1.
RunConfig finetune_defaults() {
  RunConfig c;
  c.training.steps = 100;
  c.training.adamw.lr = 3e-4;
  c.training.adamw.weight_decay = 0;
  c.training.schedule.kind = Schedule::Kind::constant;
  return c;
}

// The run-config flags finetune takes: every training and data setting but the initialisation
// (the model is --from's; the adapters start as PEFT's, from --seed).
std::vector<std::string> training_and_data_flags() {
  std::vector<std::string> names;
  for (const Setting<RunConfig>& row : run_config_settings())
    if (row.section != "model" && row.key != "init") names.push_back(row.flag_name());
  return names;
}

void declare_finetune_flags(Flags& f) {
  f.add("from", "", "a Hugging Face GPT2LMHeadModel or LlamaForCausalLM folder (required)")
      .add("lora", "r=8,alpha=8",
           "the adapters: r=R,alpha=A[,dropout=P][,rslora=true][,targets=T1,T2,...]; targets are "
           "PEFT's module names (Llama: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj; "
           "GPT-2: c_attn c_proj c_fc; default PEFT's: q_proj,v_proj / c_attn), or longer "
           "suffixes (layers.1.mlp.down_proj)")
      .add("base-precision", "f32",
           "the frozen base's linear weights: f32, bf16 or int8 (per output row; "
           "nn/quantize.h); the embeddings and the head stay f32");
  add_run_config_flags(f, {{"", finetune_defaults()}}, training_and_data_flags());
  f.add("output-dir", "runs/finetune/latest",
        "output directory (adapter, merged weights, config, log, checkpoint)")
      .alias("output")
      .add("checkpoint-every", "200", "steps between training checkpoints (0 = only at the end)")
      .add("eval-every", "0", "steps between validation evaluations (0 = only at the end)")
      .add("resume", "", "training checkpoint to resume from (with the same --from and --lora)")
      .add_switch("skip-nonfinite",
                  "skip a step whose loss or gradient is not finite instead of stopping the run")
      .add_switch("quiet", "no progress output");
  add_overwrite_flag(f, "the run in --output-dir: its files are removed before the new run writes");
  add_layout_flags(f);
  add_data_location_flags(f);
  add_threads_flag(f, /*sized_to_run=*/true);
  add_train_sample_flags(f);
}

// "2" -> 2, refusing anything else with the key named.
double lora_number(const std::string& key, const std::string& value) {
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    if (used == value.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(fmt::format("--lora: {}={} is not a number", key, value));
}

// --lora's text: comma-separated key=value pairs; a part without '=' is one more target.
PeftLoraConfig parse_lora_flag(const std::string& text, const MicroLMConfig& model) {
  PeftLoraConfig config;
  bool alpha_given = false;
  std::string key;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string part = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t eq = part.find('=');
    if (eq == std::string::npos && key == "targets" && !part.empty()) {
      config.target_modules.push_back(part);
      continue;
    }
    if (eq == std::string::npos)
      throw UsageError(
          fmt::format("--lora: '{}' is not key=value (keys: r, alpha, dropout, "
                      "rslora, targets)",
                      part));
    key = part.substr(0, eq);
    const std::string value = part.substr(eq + 1);
    if (key == "r") {
      const double r = lora_number(key, value);
      if (r < 1 || r != std::floor(r) || r > 1e9)
        throw UsageError(fmt::format("--lora: r must be a positive integer, got '{}'", value));
      config.r = static_cast<int64_t>(r);
    } else if (key == "alpha") {
      config.lora_alpha = lora_number(key, value);
      alpha_given = true;
    } else if (key == "dropout") {
      config.lora_dropout = lora_number(key, value);
      if (config.lora_dropout < 0 || config.lora_dropout >= 1)
        throw UsageError(fmt::format("--lora: dropout must be in [0, 1), got '{}'", value));
    } else if (key == "rslora") {
      if (value != "true" && value != "false")
        throw UsageError(fmt::format("--lora: rslora must be true or false, got '{}'", value));
      config.use_rslora = value == "true";
    } else if (key == "targets") {
      if (!value.empty()) config.target_modules.push_back(value);
    } else {
      throw UsageError(
          fmt::format("--lora: unknown key '{}' (keys: r, alpha, dropout, rslora, targets)", key));
    }
  }
  if (!alpha_given) config.lora_alpha = 8;  // PEFT's default lora_alpha
  if (config.target_modules.empty())        // PEFT's default targets for the two classes
    config.target_modules = hf_architecture_for(model) == "GPT2LMHeadModel"
                                ? std::vector<std::string>{"c_attn"}
                                : std::vector<std::string>{"q_proj", "v_proj"};
  try {
    peft_matched_modules(model, config.target_modules, "--lora targets");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return config;
}

// --base-precision: f32 (nullopt), or the frozen blocks' Linears stored as bf16 or int8 per
// output row (nn/quantize.h).
std::optional<QuantFormat> base_format(const Flags& f) {
  const std::string p = f.get("base-precision");
  if (p == "f32") return std::nullopt;
  if (p == "bf16" || p == "int8") return parse_quant_format(p);
  throw UsageError(fmt::format("--base-precision: expected f32, bf16 or int8, got '{}'", p));
}

// The run: finetune's defaults, the training and data flags given, --from's model.
RunConfig finetune_run_from_flags(const Flags& f, const HfImport& hf) {
  RunConfig run = finetune_defaults();
  apply_run_config_flags(f, run);
  run.model = hf.config.model;
  Schedule& schedule = run.training.schedule;
  if (schedule.kind == Schedule::Kind::constant)
    schedule.warmup_steps = 0;
  else if (!f.given("warmup"))
    schedule.warmup_steps = default_warmup_steps(schedule.kind, run.training.steps);
  schedule.lr = run.training.adamw.lr;
  schedule.total_steps = run.training.steps;
  return run;
}

// The adapters' settings as the checkpoints record them beside the model's config: a resume
// with other adapters is refused before anything changes.
json::Value lora_record(const PeftLoraConfig& lora, const std::optional<QuantFormat>& base) {
  json::Value settings = json::Object();
  settings["r"] = lora.r;
  settings["alpha"] = lora.lora_alpha;
  settings["dropout"] = lora.lora_dropout;
  settings["rslora"] = lora.use_rslora;
  json::Array targets;
  for (const std::string& t : lora.target_modules) targets.push_back(t);
  settings["targets"] = targets;
  settings["base_precision"] = base ? quant_format_name(*base) : "f32";
  json::Value record = json::Object();
  record["lora"] = settings;
  return record;
}

// The imported model with its adapters: the base weights loaded (the blocks' Linears quantized
// with --base-precision bf16 or int8), the adapters added (A drawn from the run's seed, B zero)
// and every other parameter frozen, before the Trainer is made.
std::shared_ptr<MicroLM> adapted_model(const RunConfig& run, const HfImport& hf,
                                       const PeftLoraConfig& lora,
                                       const std::optional<QuantFormat>& base,
                                       lora::Summary& summary) {
  auto model = std::make_shared<MicroLM>(run.model, DType::f32);
  model->load_state_dict(hf.weights);
  if (base)
    quantize_frozen(*model, *base, [](const std::string& path, const Linear&) {
      return path.starts_with("blocks.");
    });
  manual_seed(run.training.seed);
  summary = apply_peft_lora(*model, run.model, lora);
  return model;
}

// 1234567 -> "1,234,567" (Python's {:,d}).
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

// PEFT's print_trainable_parameters line.
std::string trainable_line(const lora::Summary& s) {
  return fmt::format("trainable params: {} || all params: {} || trainable%: {:.4f}",
                     with_commas(s.trainable), with_commas(s.total),
                     100.0 * static_cast<double>(s.trainable) / static_cast<double>(s.total));
}

// The merged model as a depthgrad model file (generate, eval and export read it): the adapters
// folded into the weights, their own tensors left out; metadata as an imported model's.
void write_merged_model(const std::string& path, MicroLM& model, const RunConfig& run,
                        const HfImport& hf, const Splits& data) {
  lora::merge(model);
  std::vector<NamedTensor> tensors;
  for (const auto& [name, t] : model.state_dict())
    if (name.find(".lora_") == std::string::npos) tensors.emplace_back(name, t);
  std::map<std::string, std::string> meta{
      {"depthgrad.config", json::dump(to_json(run))},
      {"depthgrad.tokenizer_sha256", data.corpus.tokenizer_sha256},
      {"depthgrad.imported_from", hf.architecture},
      {"depthgrad.tokenizer", "given"}};
  if (hf.bos_token_id >= 0) meta["depthgrad.bos_token_id"] = std::to_string(hf.bos_token_id);
  if (hf.eos_token_id >= 0) meta["depthgrad.eos_token_id"] = std::to_string(hf.eos_token_id);
  save_tensors(path, tensors, meta);
  lora::unmerge(model);
}

// The run's settings, read and agreed by every rank.
struct FinetuneRun {
  HfImport hf;
  RunConfig run;
  PeftLoraConfig lora;
  std::optional<QuantFormat> base;  // --base-precision: nullopt for f32
};

// Rank 0's files at the end: the adapter (PEFT), the merged model (a float32 base only: merging
// writes the weights) and summary.json; prints the validation loss and where the files are.
void write_finetune_end(const std::string& out, const FinetuneRun& s, const lora::Summary& counts,
                        const Splits& data, const EvalWindows& eval, MicroLMTrainer& trainer) {
  const RunConfig& run = s.run;
  const HfImport& hf = s.hf;
  const PeftLoraConfig& lora = s.lora;
  MicroLM& model = trainer.model();
  save_peft_adapter(model, run.model, lora, out);
  const double v = evaluate_windows(model, data.validation, eval.starts, run.model.seq_len);
  if (!s.base) write_merged_model(out + "/model.safetensors", model, run, hf, data);
  json::Value summary;
  summary["config"] = to_json(run);
  summary["from"] = lora.base_model_name_or_path;
  summary["architecture"] = hf.architecture;
  summary["lora"] = lora_record(lora, s.base)["lora"];
  summary["adapted_modules"] = static_cast<int64_t>(counts.adapted.size());
  summary["trainable_parameters"] = counts.trainable;
  summary["all_parameters"] = counts.total;
  summary["dataset"] = data.description;
  summary["steps"] = trainer.step();
  summary["first_train_loss"] = trainer.losses().empty() ? 0.0 : trainer.losses().front();
  summary["final_train_loss"] = trainer.losses().empty() ? 0.0 : trainer.losses().back();
  summary["validation_loss"] = v;
  summary["validation_windows"] = run.data.eval_windows;
  summary["skipped_steps"] = trainer.skipped_steps();
  summary["wall_seconds"] = trainer.wall_seconds();
  write_file_atomic(out + "/summary.json", json::dump(summary, 2) + "\n");
  fmt::print("validation loss {:.6f} perplexity {:.3f} after {} steps ({})\n", v,
             std::exp(std::min(v, 20.0)), trainer.step(), eval.what);
  fmt::print("adapter (PEFT): {0}/adapter_config.json, {0}/adapter_model.safetensors\n", out);
  if (s.base)
    fmt::print(
        "merged weights: not written (the base is {}: a merge writes float32 weights; the "
        "adapter applies to the float32 model as it is)\n",
        quant_format_name(*s.base));
  else
    fmt::print("merged weights: {}/model.safetensors\n", out);
  fmt::print("checkpoint: {}\n", checkpoint_path_in(out));
}

FinetuneRun finetune_settings(const Flags& f) {
  if (f.get("from").empty())
    throw UsageError("--from is required: a Hugging Face GPT-2 or Llama folder");
  FinetuneRun s;
  s.base = base_format(f);
  s.hf = read_hf_model(f.get("from"));
  s.run = finetune_run_from_flags(f, s.hf);
  s.lora = parse_lora_flag(f.get("lora"), s.run.model);
  s.lora.base_model_name_or_path = f.get("from");
  return s;
}

// The steps, with train's per-step work; an interrupt saves the checkpoint and says how to resume.
int run_steps(const TrainLoop& loop, MicroLMTrainer& trainer, int argc, char** argv) {
  if (loop.world.size() == 1) install_stop_handlers();
  try {
    trainer.run(loop.run.training.steps,
                [&](const StepLog& log) { after_train_step(loop, trainer, log); });
  } catch (const Interrupted& e) {
    loop.progress.finish();
    trainer.save_checkpoint(loop.ckpt);
    fmt::print(stderr, "depthgrad finetune: {}; checkpoint saved: {}\nresume with:\n  {}\n",
               e.what(), loop.ckpt,
               resume_command(argc, argv, {"resume"}, {{"resume", loop.ckpt}}, {"overwrite"}));
    return e.exit_code();
  }
  loop.progress.finish();
  return 0;
}

const char* kFinetuneHelp =
    "Fine-tune a Hugging Face GPT-2 or Llama with LoRA adapters (the base frozen) on your own\n"
    "text (--dataset FILE or FOLDER) or a built-in set, and write the adapter in PEFT's layout\n"
    "(adapter_config.json, adapter_model.safetensors), the merged model and a training checkpoint\n"
    "into --output-dir. The training flags are train's; the model is --from's.";

int finetune_on_rank(int argc, char** argv, int start, World& world, bool& agreed) {
  Flags f("finetune", kFinetuneHelp);
  declare_finetune_flags(f);
  if (!f.parse(argc, argv, start)) {
    if (world.rank() == 0) fmt::print("{}", f.help());
    return 0;
  }
  FinetuneRun s = finetune_settings(f);
  RunConfig& run = s.run;
  check_same_flags(world, f, to_json(run));
  agreed = true;
  apply_layout_flags(f, world.size(), run);
  const ThreadChoice thread_choice = apply_threads_for_run(f, run);
  check_precision_supported(run.training.precision, "training.precision");
  const MatmulPrecisionScope precision(run.training.precision);
  const bool writes = world.rank() == 0, resuming = !f.get("resume").empty();
  refuse_replacing_a_run(f, world);
  const std::string out = f.get("output-dir");
  Splits data = load_train_data(f, world, run, s.hf.tokenizer_json);
  lora::Summary counts;
  std::shared_ptr<MicroLM> model = adapted_model(run, s.hf, s.lora, s.base, counts);
  s.hf.weights = {};  // copied into the model (and quantized there): not held through training
  auto ids = std::shared_ptr<const std::vector<int32_t>>(
      std::shared_ptr<const std::vector<int32_t>>(), &data.train);  // data outlives the trainer
  MicroLMTrainer trainer(run, model, ids, &world.collectives(), lora_record(s.lora, s.base));
  if (resuming) trainer.load_checkpoint(f.get("resume"));
  trainer.set_skip_nonfinite(f.get_bool("skip-nonfinite"));
  if (writes) {
    if (f.get_bool("overwrite")) remove_files(out, kAdapterFiles);
    write_run_start(out, f.get_bool("overwrite"), resuming, run, data, trainer.step());
  }
  TrainSamples samples(f, data.corpus.tokenizer, run.training.seed);
  Progress progress(f.get_bool("quiet") || !writes, writes ? out + "/steps.jsonl" : "", resuming);
  progress.set_prior_seconds(trainer.wall_seconds());
  progress.message(
      fmt::format("fine-tuning {} from {} with LoRA r={} alpha={} on {} ({}) for {} "
                  "steps on {} ({} train ids), {}",
                  s.hf.architecture, f.get("from"), s.lora.r, s.lora.lora_alpha,
                  counts.adapted.size(), fmt::join(s.lora.target_modules, ","), run.training.steps,
                  data.description, data.train.size(), thread_choice.describe()));
  if (writes) fmt::print("{}\n", trainable_line(counts));  // printed as PEFT does, even --quiet
  if (world.size() > 1 || run.training.accum > 1) progress.message(layout_line(world, trainer));
  const EvalWindows eval = validation_windows(run, data);
  const TrainLoop loop{f,     world, run, data, eval, samples, progress, checkpoint_path_in(out),
                       writes};
  if (const int code = run_steps(loop, trainer, argc, argv)) return code;
  trainer.save_checkpoint(loop.ckpt);
  if (writes) write_finetune_end(out, s, counts, data, eval, trainer);
  return 0;
}

}  // namespace

int cmd_finetune(int argc, char** argv, int start) {
  World world;  // MPI when started by mpirun/srun, else one process
  return run_on_every_rank(world, "finetune", [&](bool& agreed) {
    return finetune_on_rank(argc, argv, start, world, agreed);
  });
}

}  // namespace dg::cli
