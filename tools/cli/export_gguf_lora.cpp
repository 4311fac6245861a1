// `depthgrad export --to gguf` of a fine-tuned model (tools/cli/export_gguf_lora.h): the base from
// --base (a Hugging Face or depthgrad model folder) or --checkpoint, a PEFT adapter folder from
// --adapter (train/lm/peft.h), and one of --merge-lora (the merged model as one GGUF) or
// --lora-adapter (llama.cpp's adapter GGUF); --quant q8_0 for any of them. The plain --to gguf
// export without these flags stays in cmd_hf.cpp. The file formats are train/lm/export_gguf.h's.
#include "tools/cli/export_gguf_lora.h"

#include <fmt/core.h>

#include <filesystem>

#include "nn/lora.h"
#include "tools/cli/output_guard.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/lm/export_gguf.h"
#include "train/lm/generate.h"
#include "train/lm/hf_model.h"
#include "train/lm/peft.h"
#include "train/lm/text/bpe.h"
#include "train/lm/trained_model.h"

namespace dg::cli {

namespace {

// The base model of an export: its MicroLM, config, tokenizer and the EOS/BOS ids it knows.
struct BaseModel {
  std::shared_ptr<MicroLM> model;
  MicroLMConfig config;
  BpeTokenizer tokenizer;
  int64_t bos_token_id = -1, eos_token_id = -1;
  std::string source;  // for messages
};

BaseModel base_from_checkpoint(const std::string& path, const std::string& tokenizer_flag) {
  const TrainedModel trained = load_trained_model(path);
  const std::string tokenizer_path =
      !tokenizer_flag.empty()
          ? tokenizer_flag
          : (std::filesystem::path(path).parent_path() / "tokenizer.json").string();
  if (!file_exists(tokenizer_path))
    throw std::runtime_error(
        fmt::format("no tokenizer: {} does not exist (pass --tokenizer)", tokenizer_path));
  BaseModel base{trained.model,
                 trained.config.model,
                 BpeTokenizer::from_json(read_file(tokenizer_path), tokenizer_path),
                 -1,
                 -1,
                 path};
  check_tokenizer_vocab(base.config.vocab, base.tokenizer, tokenizer_path);
  const auto id = [&](const char* key) -> int64_t {
    const auto it = trained.metadata.find(key);
    return it == trained.metadata.end() ? -1 : std::stoll(it->second);
  };
  base.bos_token_id = id("depthgrad.bos_token_id");
  base.eos_token_id = id("depthgrad.eos_token_id");
  return base;
}

// A folder: depthgrad's (model.safetensors with depthgrad.config) or a Hugging Face model's.
BaseModel base_from_folder(const std::string& dir, const std::string& tokenizer_flag) {
  const std::string depthgrad_file = (std::filesystem::path(dir) / "model.safetensors").string();
  if (file_exists(depthgrad_file) &&
      load_safetensors(depthgrad_file).metadata.count("depthgrad.config"))
    return base_from_checkpoint(depthgrad_file, tokenizer_flag);
  const HfImport hf = read_hf_model(dir);
  auto model = std::make_shared<MicroLM>(hf.config.model);
  model->load_state_dict(hf.weights);
  const std::string tokenizer_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  return BaseModel{
      model,           hf.config.model, BpeTokenizer::from_json(hf.tokenizer_json, tokenizer_path),
      hf.bos_token_id, hf.eos_token_id, dir};
}

// --base, else --checkpoint, else the adapter's base_model_name_or_path (as given, then relative
// to the adapter folder).
BaseModel load_base(const Flags& f) {
  if (!f.get("base").empty()) return base_from_folder(f.get("base"), f.get("tokenizer"));
  if (!f.get("checkpoint").empty())
    return base_from_checkpoint(f.get("checkpoint"), f.get("tokenizer"));
  if (f.get("adapter").empty()) throw UsageError("--base or --checkpoint is required");
  const std::string config_path =
      (std::filesystem::path(f.get("adapter")) / "adapter_config.json").string();
  const PeftLoraConfig config = parse_peft_adapter_config(read_file(config_path), config_path);
  const std::string named = config.base_model_name_or_path;
  if (named.empty())
    throw UsageError(fmt::format(
        "{} names no base_model_name_or_path: give the base with --base or --checkpoint",
        config_path));
  for (const std::filesystem::path& dir :
       {std::filesystem::path(named), std::filesystem::path(f.get("adapter")) / named})
    if (std::filesystem::is_directory(dir))
      return base_from_folder(dir.string(), f.get("tokenizer"));
  throw UsageError(fmt::format(
      "{}: base_model_name_or_path '{}' is not a folder here (nor beside the adapter); give the "
      "base with --base or --checkpoint (nothing is downloaded)",
      config_path, named));
}

GgufExportOptions export_options(const Flags& f, const BaseModel& base) {
  GgufExportOptions options;
  try {
    if (f.given("quant")) {
      options.quant = parse_gguf_quant_type(f.get("quant"));
      options.type = f.given("type") ? parse_gguf_export_type(f.get("type")) : GgmlType::f16;
    } else {
      options.type = parse_gguf_export_type(f.get("type"));
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--{}: {}", f.given("quant") ? "quant" : "type", e.what()));
  }
  options.bos_token_id = base.bos_token_id;
  options.eos_token_id = base.eos_token_id;
  return options;
}

}  // namespace

int export_gguf_command(const Flags& f) {
  const bool merge = f.get_bool("merge-lora"), adapter_file = f.get_bool("lora-adapter");
  if (merge && adapter_file)
    throw UsageError(
        "--merge-lora and --lora-adapter: give one (the merged model, or the adapter)");
  if ((merge || adapter_file) && f.get("adapter").empty())
    throw UsageError(fmt::format("--{} needs --adapter DIR (a PEFT LoRA folder)",
                                 merge ? "merge-lora" : "lora-adapter"));
  if (!f.get("adapter").empty() && !merge && !adapter_file)
    throw UsageError(
        "--adapter: say what to write: --merge-lora (the merged model) or --lora-adapter "
        "(llama.cpp's adapter file)");
  if (!f.get("base").empty() && !f.get("checkpoint").empty())
    throw UsageError("--base and --checkpoint both name the base model: give one");
  const std::string output = f.get("output");
  if (output.empty()) throw UsageError("--output is required");
  if (!f.get_bool("overwrite") && std::filesystem::exists(std::filesystem::symlink_status(output)))
    throw UsageError(fmt::format(
        "--output: {} exists: replace it with --overwrite, or give another --output", output));
  BaseModel base = load_base(f);
  const GgufExportOptions options = export_options(f, base);
  std::string what = "the base model";
  if (!f.get("adapter").empty()) {
    load_peft_adapter(*base.model, base.config, f.get("adapter"));
    what = fmt::format("the adapter {}", f.get("adapter"));
  }
  if (adapter_file) {
    save_gguf(output,
              lora_adapter_gguf(*base.model, base.config, lora_factors_of(*base.model), options));
  } else {
    if (merge) {
      lora::merge(*base.model);
      what = fmt::format("{} merged with {}", base.source, f.get("adapter"));
    }
    export_gguf(*base.model, base.config, base.tokenizer, output, options);
  }
  fmt::print("exported {} as GGUF ({}{}) to {}\n", what == "the base model" ? base.source : what,
             f.given("quant") ? f.get("quant") + ", else " : "", ggml_type_name(options.type),
             output);
  return 0;
}

}  // namespace dg::cli
