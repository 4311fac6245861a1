// `depthgrad import` and `depthgrad export`: Hugging Face model folders in and out
// (train/lm/hf_model.h). import turns a GPT2LMHeadModel or LlamaForCausalLM folder into a depthgrad
// model folder (model.safetensors, tokenizer.json, config.json) that generate, eval and
// train --init-from read; export writes a standard-mode model written by depthgrad as a Hugging
// Face folder. Neither downloads anything, and neither runs or trains the model.
#include <fmt/core.h>

#include <filesystem>

#include "tools/cli/commands.h"
#include "tools/cli/export_gguf_lora.h"
#include "tools/cli/flags.h"
#include "tools/cli/output_guard.h"
#include "tools/cli/shared_flags.h"
#include "train/io/files.h"
#include "train/io/sha256.h"
#include "train/lm/export_gguf.h"
#include "train/lm/export_onnx.h"
#include "train/lm/generate.h"
#include "train/lm/hf_model.h"
#include "train/lm/text/bpe.h"
#include "train/lm/trained_model.h"

namespace dg::cli {

int cmd_import(int argc, char** argv, int start) {
  Flags f("import",
          "Import a Hugging Face model folder (config.json; model.safetensors or shards with\n"
          "model.safetensors.index.json; tokenizer.json) of a GPT2LMHeadModel or a\n"
          "LlamaForCausalLM as a depthgrad model folder: --to gets model.safetensors (F32),\n"
          "tokenizer.json and config.json, which generate, eval and train --init-from read.\n"
          "Anything the model would not compute exactly (another class, activation,\n"
          "rope_scaling, biases in Llama, an unknown config field, a tokenizer with a normalizer\n"
          "or another pre-tokenizer) is refused, naming the field. Nothing is downloaded.");
  f.add("from", "", "the Hugging Face model folder (required)")
      .add("to", "", "the depthgrad model folder to write (required)")
      .add("seq-len", "0",
           "context of the imported model (0 = the checkpoint's: GPT-2's n_positions; Llama's "
           "max_position_embeddings, at most 2048)",
           FlagRange{.low = 0});
  add_overwrite_flag(f, "the model in --to: its files are removed before the import writes");
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  if (f.get("from").empty()) throw UsageError("--from is required");
  if (f.get("to").empty()) throw UsageError("--to is required");
  // A model already in --to is not replaced without --overwrite (tools/cli/output_guard.h).
  const std::vector<std::string> written{"model.safetensors", "tokenizer.json", "config.json"};
  if (!f.get_bool("overwrite")) {
    const std::string refusal = replace_refusal(
        f.get("to"), written, "a model", "replace it with --overwrite, or give another --to");
    if (!refusal.empty()) throw UsageError(refusal);
  }
  HfImportOptions options;
  options.seq_len = f.get_int("seq-len");
  const HfImport model = read_hf_model(f.get("from"), options);
  if (f.get_bool("overwrite")) remove_files(f.get("to"), written);
  write_imported_model(model, f.get("to"));
  fmt::print("imported {} from {}: {} ({} parameters)\nmodel: {}/model.safetensors\n",
             model.architecture, f.get("from"), model.config.model.describe(),
             model.config.model.parameter_count(), f.get("to"));
  return 0;
}

int cmd_export(int argc, char** argv, int start) {
  Flags f("export",
          "Write a model written by depthgrad (train, import) in another framework's layout.\n"
          "--to hf: a Hugging Face folder (config.json, model.safetensors in F32,\n"
          "tokenizer.json, generation_config.json): LlamaForCausalLM for RMSNorm + SwiGLU + RoPE\n"
          "models without biases, GPT2LMHeadModel for LayerNorm + GELU + learned positions +\n"
          "biases. --to gguf: one GGUF v3 file for llama.cpp (architecture llama for RMSNorm +\n"
          "SwiGLU + RoPE, gpt2 for LayerNorm + tanh GELU + learned positions + biases; the\n"
          "tokenizer as tokenizer.ggml.*; tensors in --type f32, f16 or bf16). Only the standard\n"
          "residual mode exports: no Hugging Face class or llama.cpp architecture computes the\n"
          "AttnRes modes. --to onnx: one ONNX file (opset 17): input_ids [batch, sequence] int64\n"
          "to logits [batch, sequence, vocab], any residual mode; the batch axis is dynamic, the\n"
          "sequence axis fixed at --sequence unless --dynamic-sequence.\n"
          "GGUF of a fine-tuned model: --base DIR (a Hugging Face folder, or a depthgrad model\n"
          "folder) or --checkpoint is the base; --adapter DIR a PEFT LoRA folder\n"
          "(adapter_config.json, adapter_model.safetensors: depthgrad finetune writes one; its\n"
          "base_model_name_or_path is the base when neither is given). --merge-lora writes the\n"
          "merged model (W + scale·B·A) as one GGUF; --lora-adapter writes llama.cpp's LoRA\n"
          "adapter GGUF, to load beside the base's GGUF (llama-cli -m base.gguf --lora FILE).\n"
          "--quant q8_0 stores the matrices as Q8_0 (llama.cpp's convert_hf_to_gguf.py rules;\n"
          "--type then names the type of a matrix whose rows are not a multiple of 32, f16\n"
          "unless given).");
  f.add("to", "", "the layout to write: hf, gguf or onnx (required)")
      .add("output", "", "the folder (hf) or file (gguf, onnx) to write (required)")
      .add("sequence", "", "onnx: the traced sequence length (default: the model's seq_len)")

      .add("type", "f32", "gguf: the tensors' type, f32 | f16 | bf16 (norm gains stay f32)")
      .add("quant", "",
           "gguf: q8_0 quantizes the matrices (norms, biases, position_embd stay f32; --type "
           "for rows not a multiple of 32, default then f16)")
      .add("checkpoint", "",
           "model.safetensors or checkpoint.safetensors (required unless --base or --adapter)")
      .add("base", "",
           "gguf: the base model folder: Hugging Face (config.json, safetensors, tokenizer.json) "
           "or depthgrad's (model.safetensors + tokenizer.json); instead of --checkpoint")
      .add("adapter", "",
           "gguf: a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors) over the "
           "base; needs --merge-lora or --lora-adapter")
      .add_switch("merge-lora", "gguf: write the base with --adapter merged in (W + scale·B·A)")
      .add_switch("lora-adapter",
                  "gguf: write --adapter as llama.cpp's LoRA adapter GGUF (no base weights)")
      .add("tokenizer", "", "tokenizer.json (default: the tokenizer.json beside --checkpoint)")
      .add_switch("dynamic-sequence",
                  "onnx: leave the sequence axis free (up to the traced length)");
  add_overwrite_flag(f, "what --output holds: the export's files (hf) or the file (gguf)");
  if (!f.parse(argc, argv, start)) {
    fmt::print("{}", f.help());
    return 0;
  }
  const std::string to = f.get("to");
  if (to != "hf" && to != "gguf" && to != "onnx")
    throw UsageError(fmt::format("--to: expected hf, gguf or onnx, got '{}'", to));
  if (to != "gguf" && f.given("type"))
    throw UsageError(fmt::format("--type applies to --to gguf (the {} export is float32)", to));
  for (const char* gguf_only : {"quant", "base", "adapter", "merge-lora", "lora-adapter"})
    if (to != "gguf" && f.given(gguf_only))
      throw UsageError(fmt::format("--{} applies to --to gguf", gguf_only));
  if (to == "gguf" && (f.given("base") || f.given("adapter") || f.given("quant") ||
                       f.get_bool("merge-lora") || f.get_bool("lora-adapter")))
    return export_gguf_command(f);
  if (to != "onnx" && (f.given("sequence") || f.given("dynamic-sequence")))
    throw UsageError("--sequence and --dynamic-sequence apply to --to onnx");
  GgmlType type = GgmlType::f32;
  try {
    type = parse_gguf_export_type(f.get("type"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--type: {}", e.what()));
  }
  if (f.get("output").empty()) throw UsageError("--output is required");
  if (f.get("checkpoint").empty()) throw UsageError("--checkpoint is required");
  // An earlier export in --output is not replaced without --overwrite (tools/cli/output_guard.h).
  const std::string output = f.get("output");
  const bool overwrite = f.get_bool("overwrite");
  const std::vector<std::string> hf_files{"config.json", "model.safetensors", "tokenizer.json",
                                          "generation_config.json"};
  if (!overwrite && to == "hf") {
    const std::string refusal = replace_refusal(
        output, hf_files, "an export", "replace it with --overwrite, or give another --output");
    if (!refusal.empty()) throw UsageError(refusal);
  }
  if (!overwrite && to != "hf" && std::filesystem::exists(std::filesystem::symlink_status(output)))
    throw UsageError(fmt::format(
        "--output: {} exists: replace it with --overwrite, or give another --output", output));
  const std::string path = f.get("checkpoint");
  const TrainedModel trained = load_trained_model(path);
  if (to == "onnx") {
    LmOnnxOptions options;
    if (!f.get("sequence").empty()) options.sequence = f.get_int("sequence");
    options.dynamic_sequence = f.get_bool("dynamic-sequence");
    try {
      export_lm_onnx(*trained.model, output, options);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--sequence: {}", e.what()));
    }
    fmt::print("exported {} as ONNX to {}\n", path, output);
    return 0;
  }
  if (to == "hf") hf_architecture_for(trained.config.model);  // refuses before the tokenizer
  const ModelTokenizer loaded = model_tokenizer(f, trained, path);
  const BpeTokenizer& tokenizer = loaded.tokenizer;
  const std::string& tokenizer_json = loaded.json;
  // Token ids: an imported model's own, else the specials depthgrad's tokenizers train with.
  auto token = [&](const char* key, const char* special) -> int64_t {
    auto it = trained.metadata.find(key);
    return it != trained.metadata.end() ? std::stoll(it->second) : tokenizer.token_id(special);
  };
  if (overwrite && to == "hf") remove_files(output, hf_files);
  if (to == "gguf") {
    GgufExportOptions options;
    options.type = type;
    options.bos_token_id = token("depthgrad.bos_token_id", "<bos>");
    options.eos_token_id = token("depthgrad.eos_token_id", "<eos>");
    export_gguf(*trained.model, trained.config.model, tokenizer, f.get("output"), options);
    fmt::print("exported {} as GGUF ({}) to {}\n", path, f.get("type"), f.get("output"));
    return 0;
  }
  const std::string arch = export_hf(*trained.model, trained.config.model, tokenizer_json,
                                     token("depthgrad.bos_token_id", "<bos>"),
                                     token("depthgrad.eos_token_id", "<eos>"), f.get("output"));
  fmt::print("exported {} as {} to {}\n", path, arch, f.get("output"));
  return 0;
}

}  // namespace dg::cli
