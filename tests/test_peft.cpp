// PEFT's adapter folders (train/lm/peft.h) against tests/data/peft/, written by
// tools/torch_goldens_peft.py (PEFT's merge in float64, PEFT's file layout): each adapter loaded
// onto the imported tiny Llama and GPT-2 and merged gives the float64 merged weights to 1e-6 (as
// their outputs on two probe rows, so every element counts); save then load round-trips bit for
// bit, the saved files are PEFT's (the same adapter_config.json text, keys, shapes, dtype and
// metadata), and every refusal fires with its message.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>

#include "nn/lm/micro_lm.h"
#include "nn/lora.h"
#include "nn/quantize.h"
#include "nn_test_helpers.h"
#include "temp_dir.h"
#include "tensor/quantized_matrix.h"
#include "test_helpers.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/lm/hf_model.h"
#include "train/lm/peft.h"

using namespace dg;
using dg::test::contains;
using dg::test::error_of;
using dg::test::TempDir;

namespace {
const std::string kData = std::string(DG_SOURCE_DIR) + "/tests/data";

// An imported tiny model ("llama" or "gpt2") with its HF weights.
struct Imported {
  HfImport hf;
  std::unique_ptr<MicroLM> model;
  explicit Imported(const std::string& which) : hf(read_hf_model(kData + "/hf/" + which)) {
    model = std::make_unique<MicroLM>(hf.config.model);
    model->load_state_dict(hf.weights);
  }
  const MicroLMConfig& config() const { return hf.config.model; }
};

// The rows of `linears`' weights stacked: [Σ out, in] (c_attn's q, k, v; one Linear otherwise).
std::vector<std::vector<float>> stacked_rows(const Module& model,
                                             const std::vector<std::string>& linears) {
  std::vector<std::vector<float>> rows;
  for (const std::string& name : linears) {
    const Tensor w = model.parameter(name + ".weight");
    const std::vector<float> values = w.to_floats();
    const int64_t in = w.shape()[1];
    for (int64_t o = 0; o < w.shape()[0]; ++o)
      rows.emplace_back(values.begin() + o * in, values.begin() + (o + 1) * in);
  }
  return rows;
}

// Largest |probe @ Wᵀ − golden| over the golden's modules, W the merged depthgrad weights;
// `modules` counts the golden's modules.
double merged_error(const Imported& m, const std::string& which, int& modules) {
  const std::vector<NamedTensor> golden =
      load_tensors(kData + "/peft/" + which + "-merged.safetensors");
  auto find = [&](const std::string& name) {
    for (const auto& [n, t] : golden)
      if (n == name) return t;
    FAIL("no golden tensor " << name);
    return Tensor();
  };
  double worst = 0;
  modules = 0;
  for (const PeftModule& module : peft_modules(m.config())) {
    bool present = false;
    for (const auto& [n, t] : golden) present = present || n == module.name + ".probe";
    if (!present) continue;
    ++modules;
    const Tensor probe = find(module.name + ".probe"), want = find(module.name + ".merged_output");
    const std::vector<std::vector<float>> w = stacked_rows(*m.model, module.linears);
    const std::vector<float> x = probe.to_floats(), y = want.to_floats();
    const int64_t in = probe.shape()[1], out = want.shape()[1];
    REQUIRE(static_cast<int64_t>(w.size()) == out);
    for (int64_t p = 0; p < probe.shape()[0]; ++p)
      for (int64_t o = 0; o < out; ++o) {
        double sum = 0;
        for (int64_t i = 0; i < in; ++i) sum += static_cast<double>(x[p * in + i]) * w[o][i];
        worst = std::max(worst, std::abs(sum - y[p * out + o]));
      }
  }
  return worst;
}

std::string adapter_dir(const std::string& which) { return kData + "/peft/" + which; }

// The tensors of a safetensors file as (name, dtype, shape, bytes), sorted by name.
std::vector<TensorEntry> entries_of(const std::string& path) {
  std::vector<TensorEntry> e = load_safetensors(path).tensors;
  std::sort(e.begin(), e.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return e;
}
}  // namespace

TEST_CASE("a PEFT adapter merged onto the imported model gives PyTorch's float64 merge") {
  for (const std::string which : {"llama", "gpt2"}) {
    CAPTURE(which);
    Imported m(which);
    const PeftLoraConfig config = load_peft_adapter(*m.model, m.config(), adapter_dir(which));
    const int64_t expected_modules = which == "llama" ? 5 : 6;  // the script's targets
    // Before the merge the adapters run beside the base; after it, the plain linears: the same
    // function (float32 rounding apart).
    m.model->eval();  // the adapters' dropout (0.05) off
    const Tensor ids = Tensor::from_ids(std::vector<int64_t>{5, 71, 200, 3, 256, 9}, {1, 6});
    const Tensor unmerged = m.model->forward(ids);
    lora::merge(*m.model);
    int modules = 0;
    const double error = merged_error(m, which, modules);
    CHECK(modules == expected_modules);
    MESSAGE(which << ": merged weights' largest difference on the probes " << error);
    CHECK(error < 1e-6);
    const Tensor merged = m.model->forward(ids);
    CHECK(dg::nn_test::max_abs_diff(unmerged, merged) < 1e-4);
    // The scale is PEFT's: rsLoRA's alpha / sqrt(r) for the GPT-2 adapter, alpha / r for Llama.
    CHECK(config.use_rslora == (which == "gpt2"));
    for (const auto& [name, linear] : lora::adapted_linears(*m.model))
      CHECK(linear->lora->scale ==
            doctest::Approx(config.use_rslora ? config.lora_alpha / std::sqrt(double(config.r))
                                              : config.lora_alpha / double(config.r)));
  }
}

TEST_CASE("PEFT adapters: save then load round-trips bit for bit, in PEFT's files") {
  for (const std::string which : {"llama", "gpt2"}) {
    CAPTURE(which);
    Imported m(which);
    const PeftLoraConfig config = load_peft_adapter(*m.model, m.config(), adapter_dir(which));
    TempDir dir("peft");
    save_peft_adapter(*m.model, m.config(), config, dir.path.string());
    // adapter_config.json: PEFT's text, byte for byte (the script writes it as PEFT 0.15 does).
    CHECK(read_file(dir.file("adapter_config.json")) ==
          read_file(adapter_dir(which) + "/adapter_config.json"));
    // adapter_model.safetensors: PEFT's keys, shapes, dtype (F32), bytes and metadata.
    const std::vector<TensorEntry> ours = entries_of(dir.file("adapter_model.safetensors")),
                                   theirs = entries_of(adapter_dir(which) +
                                                       "/adapter_model.safetensors");
    REQUIRE(ours.size() == theirs.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      CAPTURE(ours[i].name);
      CHECK(ours[i].name == theirs[i].name);
      CHECK(ours[i].dtype == "F32");
      CHECK(ours[i].shape == theirs[i].shape);
      CHECK(ours[i].bytes == theirs[i].bytes);
    }
    CHECK(load_safetensors(dir.file("adapter_model.safetensors")).metadata ==
          std::map<std::string, std::string>{{"format", "pt"}});
    // Loaded again onto a fresh import: every adapter parameter the same bits.
    Imported again(which);
    load_peft_adapter(*again.model, again.config(), dir.path.string());
    for (const auto& named : m.model->named_parameters()) {
      const std::string& name = named.first;
      if (name.find("lora_") == std::string::npos) continue;
      CAPTURE(name);
      CHECK(again.model->parameter(name).to_floats() == named.second.to_floats());
    }
  }
}

// The Linear at dotted path `name` below `m`.
const Linear& linear_at(const Module& m, const std::string& name) {
  const size_t dot = name.find('.');
  for (const auto& [child, module] : m.named_children())
    if (child == name.substr(0, dot))
      return dot == std::string::npos ? dynamic_cast<const Linear&>(*module)
                                      : linear_at(*module, name.substr(dot + 1));
  throw std::invalid_argument("no module " + name);
}

TEST_CASE("PEFT adapters: loaded onto an int8 base, they compute (Ŵ + scale·B·A)·x") {
  // The reference: a float32 model whose blocks' weights are the int8 model's dequantised Ŵ.
  Imported reference("llama"), int8("llama");
  quantize_frozen(*int8.model, QuantFormat::int8, [](const std::string& path, const Linear&) {
    return path.starts_with("blocks.");
  });
  for (const PeftModule& m : peft_modules(int8.config()))
    for (const std::string& name : m.linears)
      reference.model->parameter(name + ".weight")
          .copy_from(dequantize(*linear_at(*int8.model, name).quantized_weight));
  load_peft_adapter(*reference.model, reference.config(), adapter_dir("llama"));
  load_peft_adapter(*int8.model, int8.config(), adapter_dir("llama"));
  for (const auto& [name, t] : reference.model->named_parameters())
    if (name.find("lora_") != std::string::npos)
      CHECK(int8.model->parameter(name).to_floats() == t.to_floats());
  reference.model->eval();
  int8.model->eval();
  lora::merge(*reference.model);
  const Tensor ids = Tensor::from_ids(std::vector<int64_t>{5, 71, 200, 3, 256, 9}, {1, 6});
  const double difference =
      dg::nn_test::max_abs_diff(reference.model->forward(ids), int8.model->forward(ids));
  MESSAGE("int8 base + adapter against (dequantised base + ΔW) in float32: " << difference);
  CHECK(difference < 1e-4);
}

TEST_CASE("PEFT adapters: a fresh adapter's files have PEFT's keys and shapes") {
  Imported gpt2("gpt2");
  PeftLoraConfig config{.r = 3,
                        .lora_alpha = 16,
                        .target_modules = {"c_attn", "h.1.mlp.c_fc"},
                        .base_model_name_or_path = "tests/data/hf/gpt2"};
  const lora::Summary s = apply_peft_lora(*gpt2.model, gpt2.config(), config);
  // c_attn's q, k, v in both layers and layer 1's c_fc; A is shared within c_attn.
  CHECK(s.adapted.size() == 7);
  CHECK(s.trainable == 2 * (3 * 64 + 3 * 192) + (3 * 64 + 256 * 3));
  const std::vector<NamedTensor> tensors = peft_adapter_tensors(*gpt2.model, gpt2.config(), config);
  REQUIRE(tensors.size() == 6);
  CHECK(tensors[0].first == "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  CHECK(tensors[0].second.shape() == Shape{3, 64});
  CHECK(tensors[1].first == "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  CHECK(tensors[1].second.shape() == Shape{192, 3});
  CHECK(tensors[4].first == "base_model.model.transformer.h.1.mlp.c_fc.lora_A.weight");
  CHECK(tensors[5].second.shape() == Shape{256, 3});
  const json::Value written =
      json::parse(peft_adapter_config_json(gpt2.config(), config), "adapter_config.json");
  CHECK(written.find("fan_in_fan_out")->as_bool());  // GPT-2's Conv1D, as PEFT sets it
  CHECK(written.find("lora_alpha")->is_integer());

  Imported llama("llama");
  PeftLoraConfig lconfig{.r = 2,
                         .lora_alpha = 4,
                         .target_modules = {"k_proj", "mlp.up_proj"},
                         .base_model_name_or_path = "tests/data/hf/llama"};
  const lora::Summary ls = apply_peft_lora(*llama.model, llama.config(), lconfig);
  CHECK(ls.adapted == std::vector<std::string>{"blocks.0.attention.k", "blocks.0.ffn.up",
                                               "blocks.1.attention.k", "blocks.1.ffn.up"});
  const std::vector<NamedTensor> lt = peft_adapter_tensors(*llama.model, llama.config(), lconfig);
  CHECK(lt[0].first == "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  CHECK(lt[1].second.shape() == Shape{32, 2});  // k_proj: 2 K/V heads of 16
  CHECK_FALSE(json::parse(peft_adapter_config_json(llama.config(), lconfig), "c")
                  .find("fan_in_fan_out")
                  ->as_bool());
}

TEST_CASE("PEFT adapters: a target PEFT would not match here is refused, naming it") {
  Imported llama("llama"), gpt2("gpt2");
  auto refusal = [](Imported& m, std::vector<std::string> targets) {
    return error_of([&] {
      apply_peft_lora(*m.model, m.config(),
                      PeftLoraConfig{.target_modules = targets, .base_model_name_or_path = ""});
    });
  };
  const std::string q = refusal(llama, {"q_proj", "q"});
  CHECK(contains(q, "'q' matches no module of LlamaForCausalLM"));
  CHECK(contains(q, "valid: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"));
  CHECK(contains(refusal(llama, {"c_attn"}), "'c_attn' matches no module"));
  CHECK(contains(refusal(llama, {"lm_head"}), "'lm_head' matches no module"));
  CHECK(contains(refusal(llama, {"layers.7.self_attn.q_proj"}), "matches no module"));
  CHECK(contains(refusal(gpt2, {"q_proj"}), "valid: c_attn, c_proj, c_fc"));
  CHECK(contains(refusal(gpt2, {"attn.c"}), "'attn.c' matches no module"));  // a suffix by dots
  CHECK(contains(refusal(gpt2, {}), "no target modules"));
  CHECK(lora::adapted_linears(*llama.model).empty());  // nothing was changed
}

namespace {
// `which`'s golden adapter copied into `dir` with adapter_config.json's field `key` set to
// `value` (JSON text), then loaded: the error, or "".
std::string config_refusal(const std::string& which, const std::string& key,
                           const std::string& value) {
  TempDir dir("peft-bad");
  json::Value config =
      json::parse(read_file(adapter_dir(which) + "/adapter_config.json"), "adapter_config.json");
  config[key] = json::parse(value, "value");
  write_file_atomic(dir.file("adapter_config.json"), json::dump(config, 2));
  std::filesystem::copy_file(adapter_dir(which) + "/adapter_model.safetensors",
                             dir.file("adapter_model.safetensors"));
  Imported m(which);
  const std::string error = error_of([&] { load_peft_adapter(*m.model, m.config(), dir.path); });
  if (!error.empty()) CHECK(lora::adapted_linears(*m.model).empty());  // nothing changed
  return error;
}

// The golden adapter's tensors changed by `edit`, then loaded: the error, or "".
std::string tensor_refusal(const std::string& which,
                           const std::function<void(std::vector<TensorEntry>&)>& edit) {
  TempDir dir("peft-bad");
  std::filesystem::copy_file(adapter_dir(which) + "/adapter_config.json",
                             dir.file("adapter_config.json"));
  std::vector<TensorEntry> entries =
      load_safetensors(adapter_dir(which) + "/adapter_model.safetensors").tensors;
  edit(entries);
  save_safetensors(dir.file("adapter_model.safetensors"), entries, {{"format", "pt"}});
  Imported m(which);
  const std::string error = error_of([&] { load_peft_adapter(*m.model, m.config(), dir.path); });
  if (!error.empty()) CHECK(lora::adapted_linears(*m.model).empty());
  return error;
}
}  // namespace

TEST_CASE("PEFT adapters: what depthgrad does not compute is refused, naming the field") {
  CHECK(config_refusal("llama", "lora_dropout", "0.1") == "");  // the control: accepted
  CHECK(config_refusal("llama", "use_rslora", "true") == "");
  CHECK(config_refusal("llama", "peft_version", "\"0.17.0\"") == "");  // a later PEFT's fields
  CHECK(config_refusal("llama", "target_parameters", "null") == "");
  const std::vector<std::array<std::string, 3>> cases = {
      {"use_dora", "true", "field 'use_dora': true is not supported (DoRA"},
      {"bias", "\"all\"", "field 'bias': \"all\" is not supported"},
      {"lora_bias", "true", "field 'lora_bias'"},
      {"modules_to_save", "[\"lm_head\"]", "field 'modules_to_save': [\"lm_head\"] is not"},
      {"rank_pattern", "{\"q_proj\":8}", "field 'rank_pattern'"},
      {"alpha_pattern", "{\"q_proj\":8}", "field 'alpha_pattern'"},
      {"layers_to_transform", "[0]", "field 'layers_to_transform': [0] is not supported"},
      {"layers_to_transform", "1", "field 'layers_to_transform'"},
      {"exclude_modules", "[\"v_proj\"]", "field 'exclude_modules'"},
      {"peft_type", "\"IA3\"", "field 'peft_type': \"IA3\" is not supported"},
      {"task_type", "\"SEQ_CLS\"", "field 'task_type'"},
      {"init_lora_weights", "\"pissa\"", "field 'init_lora_weights'"},
      {"target_modules", "\".*q_proj\"", "is a regular expression"},
      {"target_modules", "[\"q_proj\",\"q\"]", "'q' matches no module of LlamaForCausalLM"},
      {"target_modules", "[]", "field 'target_modules': expected a non-empty list"},
      {"r", "0", "field 'r': expected a positive integer"},
      {"lora_dropout", "1", "field 'lora_dropout'"},
      {"lora_magic", "1", "field 'lora_magic': 1: not a field depthgrad knows"},
  };
  for (const auto& row : cases) {
    const auto& [key_binding, value_binding, message] = row;
    const std::string key = key_binding, value = value_binding;
    CAPTURE(key);
    CAPTURE(value);
    const std::string error = config_refusal("llama", key, value);
    CHECK(contains(error, "adapter_config.json"));
    CHECK(contains(error, message));
  }
}

TEST_CASE("PEFT adapters: a key, shape or dtype that does not fit is refused, naming the tensor") {
  const std::string a0 = "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight";
  CHECK(tensor_refusal("gpt2", [](auto&) {}) == "");  // the control
  CHECK(contains(tensor_refusal("gpt2",
                                [&](std::vector<TensorEntry>& e) {
                                  TensorEntry extra = e[0];
                                  extra.name =
                                      "base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight";
                                  e.push_back(extra);
                                }),
                 "tensor 'base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight' is no adapted "
                 "module's"));
  CHECK(contains(tensor_refusal("gpt2",
                                [&](std::vector<TensorEntry>& e) {
                                  std::erase_if(e,
                                                [&](const TensorEntry& t) { return t.name == a0; });
                                }),
                 "tensor '" + a0 + "' is missing"));
  CHECK(contains(tensor_refusal("gpt2",
                                [&](std::vector<TensorEntry>& e) {
                                  for (TensorEntry& t : e)
                                    if (t.name == a0) t.shape = {t.shape[1], t.shape[0]};
                                }),
                 "tensor '" + a0 + "' is [64, 2], expected [2, 64]"));
  CHECK(contains(tensor_refusal("gpt2",
                                [&](std::vector<TensorEntry>& e) {
                                  for (TensorEntry& t : e)
                                    if (t.name == a0) t.dtype = "I32";
                                }),
                 "tensor '" + a0 + "' has dtype I32"));
  TempDir dir("peft-bin");
  write_file_atomic(dir.file("adapter_model.bin"), "pickle");
  Imported m("llama");
  CHECK(contains(error_of([&] { load_peft_adapter(*m.model, m.config(), dir.path); }),
                 "adapter_model.bin (pickle) is not read"));
}
