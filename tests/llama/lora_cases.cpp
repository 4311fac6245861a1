// The models of ctest's llama_cpp_client (tests/llama/llama_cpp_client.sh): for the imported tiny
// Llama and GPT-2 (tests/data/hf), a base that has learned one sentence and a LoRA adapter that
// has learned another, so greedy text is varied, plain ASCII and tells base from fine-tuned.
// Their random weights alone continue with lone bytes (half of their 288 ids are bytes ≥ 0x80,
// pieces that are not UTF-8), which no client can compare as text.
//
//   llama_lora_cases HF_DATA_DIR OUT_DIR
//
// writes, for ARCH = llama and gpt2, in OUT_DIR/ARCH/:
//   base/      the base (depthgrad model folder: model.safetensors, tokenizer.json, config.json),
//              60 AdamW steps on kBaseText from the import
//   adapter/   PEFT's adapter folder (train/lm/peft.h) over base, every projection adapted (r 4,
//              alpha 8; GPT-2's c_attn one shared A), 60 steps on kAdapterText with the base frozen
//   merged/    the base with the adapter merged (lora::merge), for `depthgrad generate`
//   merged_q8/ merged with every tensor that --quant q8_0 stores as Q8_0 replaced by its Q8_0
//              dequantization (gguf_stored_type, quantize_q8_0): what llama.cpp reads from the
//              q8_0 GGUF
//   base_q8_adapter/  the base's Q8_0 dequantization with the adapter (read back from adapter/)
//              merged in: what llama.cpp computes from a q8_0 base GGUF and the adapter GGUF
// Deterministic (fixed seeds, one thread's kernels are bit-identical to more). Never part of
// the library; a test fixture only.
#include <fmt/core.h>

#include <filesystem>
#include <stdexcept>

#include "nn/lm/micro_lm.h"
#include "nn/lora.h"
#include "tensor/tensor.h"
#include "train/io/files.h"
#include "train/lm/export_gguf.h"
#include "train/lm/hf_model.h"
#include "train/lm/peft.h"
#include "train/lm/text/bpe.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"

namespace {

constexpr char kBaseText[] = "the cat sat on the mat and the dog ran to the park. ";
constexpr char kAdapterText[] = "a fox jumps over a lazy dog, then runs far away. ";
constexpr int kSteps = 60;

bool is_lora_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

// The model's own weights (adapters left out), copied, in parameter order.
std::vector<dg::NamedTensor> base_weights(const dg::MicroLM& model) {
  std::vector<dg::NamedTensor> out;
  for (const auto& [name, tensor] : model.named_parameters())
    if (!is_lora_parameter(name)) out.emplace_back(name, tensor.detach().clone());
  return out;
}

// kSteps of AdamW (lr 1e-2, clip 1) on every window of seq_len + 1 ids of `text` repeated.
void train_on(dg::MicroLM& model, const dg::BpeTokenizer& tok, const std::string& text) {
  const int64_t T = model.config().seq_len, B = 8;
  std::string repeated;
  while (repeated.size() < 4 * text.size() + 64) repeated += text;
  const std::vector<int32_t> ids = tok.encode(repeated);
  if (static_cast<int64_t>(ids.size()) < B + T + 1)
    throw std::runtime_error("lora_cases: the training text is too short");
  std::vector<int32_t> x(B * T), y(B * T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      x[b * T + t] = ids[b + t];
      y[b * T + t] = ids[b + t + 1];
    }
  const dg::Tensor xs = dg::Tensor::from_ids(x, {B, T}), ys = dg::Tensor::from_ids(y, {B, T});
  dg::AdamW opt(model, dg::AdamWConfig{.lr = 1e-2, .weight_decay = 0});
  for (int step = 0; step < kSteps; ++step) {
    model.zero_grad();
    dg::backward(model.loss(xs, ys));
    dg::clip_grad_norm(model, 1.0);
    opt.step();
  }
}

// The weights a q8_0 GGUF holds, as float32: every tensor --quant q8_0 stores as Q8_0 goes
// through quantize_q8_0 and back (row by row: blocks run along a row, which the Q/K permutation
// and gpt2's q/k/v fusion move whole, so the per-Linear round trip is the file's).
std::vector<dg::NamedTensor> q8_0_round_trip(const std::vector<dg::NamedTensor>& weights) {
  dg::GgufExportOptions q8;
  q8.type = dg::GgmlType::f16;
  q8.quant = dg::GgmlType::q8_0;
  std::vector<dg::NamedTensor> out;
  for (const auto& [name, tensor] : weights) {
    // Only the GGUF names that matter for the rule: position_embd and norms stay F32.
    const std::string gguf_like = name == "position.weight"                ? "position_embd.weight"
                                  : name.find("norm") != std::string::npos ? "x_norm.weight"
                                                                           : "x.weight";
    if (dg::gguf_stored_type(gguf_like, tensor.shape(), q8) != dg::GgmlType::q8_0) {
      out.emplace_back(name, tensor);
      continue;
    }
    const std::vector<double> v = tensor.to_vector();
    const std::vector<float> f(v.begin(), v.end());
    const std::vector<float> back =
        dg::dequantize_q8_0(dg::quantize_q8_0(f.data(), f.size()).data(), f.size());
    out.emplace_back(name, dg::Tensor::from_vector(std::vector<double>(back.begin(), back.end()),
                                                   tensor.shape()));
  }
  return out;
}

void write_model(dg::HfImport model, std::vector<dg::NamedTensor> weights, const std::string& dir) {
  std::filesystem::create_directories(dir);
  model.weights = std::move(weights);
  dg::write_imported_model(model, dir);
}

void write_case(const std::string& hf_dir, const std::string& arch, const std::string& out) {
  const dg::HfImport hf = dg::read_hf_model(hf_dir + "/" + arch);
  const dg::BpeTokenizer tok = dg::BpeTokenizer::from_json(hf.tokenizer_json, arch);
  std::vector<dg::NamedTensor> base;
  {
    dg::MicroLM model(hf.config.model);
    model.load_state_dict(hf.weights);
    train_on(model, tok, kBaseText);
    base = base_weights(model);
  }
  write_model(hf, base, out + "/base");
  dg::MicroLM model(hf.config.model);
  model.load_state_dict(base);
  dg::PeftLoraConfig lora;
  lora.r = 4;
  lora.lora_alpha = 8;
  lora.target_modules = dg::peft_target_names(hf.config.model);
  lora.base_model_name_or_path = "../base";
  dg::manual_seed(7);
  dg::apply_peft_lora(model, hf.config.model, lora);
  train_on(model, tok, kAdapterText);
  std::filesystem::create_directories(out + "/adapter");
  dg::save_peft_adapter(model, hf.config.model, lora, out + "/adapter");
  dg::lora::merge(model);
  const std::vector<dg::NamedTensor> merged = base_weights(model);
  write_model(hf, merged, out + "/merged");
  write_model(hf, q8_0_round_trip(merged), out + "/merged_q8");
  dg::MicroLM quantized_base(hf.config.model);
  quantized_base.load_state_dict(q8_0_round_trip(base));
  dg::load_peft_adapter(quantized_base, hf.config.model, out + "/adapter");
  dg::lora::merge(quantized_base);
  write_model(hf, base_weights(quantized_base), out + "/base_q8_adapter");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: llama_lora_cases HF_DATA_DIR OUT_DIR\n");
    return 2;
  }
  try {
    for (const char* arch : {"llama", "gpt2"})
      write_case(argv[1], arch, std::string(argv[2]) + "/" + arch);
  } catch (const std::exception& e) {
    fmt::print(stderr, "llama_lora_cases: {}\n", e.what());
    return 1;
  }
  return 0;
}
