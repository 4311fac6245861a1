// GGUF for fine-tuned models: Q8_0 blocks bit for bit as ggml's quantize_row_q8_0_ref writes them
// (ties, zero blocks, ±max, a value where ggml's x·(1/d) and gguf-py's x/d round apart), Q8_0 in
// the reader and writer, --quant's choice of tensor types (llama.cpp's converter's), and
// llama.cpp's LoRA adapter GGUF: names, GGUF dims, metadata, the llama Q/K permutation of B, gpt2's
// fused attn_qkv, the adapter applied in GGUF space equal to the merged model's file, and every
// refusal. llama.cpp itself runs these files in ctest llama_cpp_client (tests/llama/).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "nn/lm/micro_lm.h"
#include "nn/lora.h"
#include "nn/quantize.h"
#include "train/lm/export_gguf.h"
#include "train/lm/gguf.h"
#include "train/lm/text/bpe.h"

using dg::GgmlType;
using dg::GgufFile;
using dg::GgufTensor;

namespace {

// One Q8_0 block's scale bits and quants.
struct Q8Block {
  uint16_t d;
  std::vector<int> q;
};

Q8Block block_of(const std::vector<uint8_t>& bytes, size_t block) {
  Q8Block b;
  std::memcpy(&b.d, bytes.data() + block * 34, 2);
  for (size_t j = 0; j < 32; ++j) b.q.push_back(static_cast<int8_t>(bytes[block * 34 + 2 + j]));
  return b;
}

dg::BpeTokenizer tokenizer() {
  const std::string text = "the river ran by the tower and the tower watched the river run";
  return dg::train_bpe({text}, 280, 0, {"<bos>", "<eos>"}, /*full_byte_alphabet=*/true);
}

dg::MicroLMConfig llama_config(int64_t vocab, int64_t dim, bool tied) {
  dg::MicroLMConfig c;
  c.vocab = vocab;
  c.dim = dim;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_len = 16;
  c.expansion = 2;
  c.mode = dg::residual_mode("standard");
  c.norm_eps = 1e-5;
  c.tied_head = tied;
  return c;
}

dg::MicroLMConfig gpt2_config(int64_t vocab, int64_t dim) {
  dg::MicroLMConfig c = llama_config(vocab, dim, true);
  c.norm = dg::Norm::Kind::layer;
  c.ffn = dg::FeedForward::Kind::gelu_tanh;
  c.rope = false;
  c.bias = true;
  c.learned_positions = true;
  return c;
}

// Every adapter's B set to small random values (lora::apply starts them at zero).
void randomize_b(dg::MicroLM& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (auto& [name, t] : model.named_parameters())
    if (name.ends_with(".lora_B.weight"))
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
}

std::vector<float> floats(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find_tensor(name);
  REQUIRE_MESSAGE(t != nullptr, name);
  return dg::gguf_tensor_floats(*t);
}

// W + scale·B·A in GGUF space: base tensor [out, in] (dims {in, out}), A dims {in, r}, B {r, out}.
std::vector<float> apply_adapter(const GgufFile& base, const GgufFile& adapter,
                                 const std::string& name) {
  const GgufTensor& b = *adapter.find_tensor(name + ".lora_b");
  const uint64_t r = b.dims[0], out = b.dims[1];
  const std::vector<float> w = floats(base, name), A = floats(adapter, name + ".lora_a"),
                           B = floats(adapter, name + ".lora_b");
  const uint64_t in = w.size() / out;
  const double scale = adapter.find("adapter.lora.alpha")->real / static_cast<double>(r);
  std::vector<float> merged(w.size());
  for (uint64_t o = 0; o < out; ++o)
    for (uint64_t i = 0; i < in; ++i) {
      double sum = 0;
      for (uint64_t k = 0; k < r; ++k) sum += double(B[o * r + k]) * double(A[k * in + i]);
      merged[o * in + i] = static_cast<float>(w[o * in + i] + scale * sum);
    }
  return merged;
}

}  // namespace

TEST_CASE("Q8_0 blocks are ggml's quantize_row_q8_0_ref bit for bit on edge values") {
  // Block 0: zeros. ggml: amax 0, d 0, id 0, every q 0.
  // Block 1: ±127 and ties at d = 1: roundf goes half away from zero (2.5 -> 3, -0.5 -> -1),
  //          where round-half-even would give 2 and -0.
  // Block 2: amax 1: d = 1/127 in float32, stored F16 0x2008 (2^-7 · 1.0078125); q = 127 for 1.
  // Block 3: amax 0x1.0ea008p+2 and x = 0x1.dd52b4p-4: x · (1/d) = 3.49999976 -> 3 (ggml), where
  //          gguf-py's x / d = 3.5 would round to 4.
  std::vector<float> x(128, 0.0f);
  const float ties[] = {127.0f, -127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, -1.5f};
  for (size_t j = 0; j < 8; ++j) x[32 + j] = ties[j];
  x[64] = 1.0f;
  x[65] = -1.0f;
  x[96] = 0x1.0ea008p+2f;
  x[97] = 0x1.dd52b4p-4f;
  const std::vector<uint8_t> bytes = dg::quantize_q8_0(x.data(), x.size());
  REQUIRE(bytes.size() == 4 * 34);
  const Q8Block zero = block_of(bytes, 0);
  CHECK(zero.d == 0);
  CHECK(zero.q == std::vector<int>(32, 0));
  const Q8Block edges = block_of(bytes, 1);
  CHECK(edges.d == 0x3C00);  // 1.0
  CHECK(std::vector<int>(edges.q.begin(), edges.q.begin() + 8) ==
        std::vector<int>{127, -127, 3, -3, 1, -1, 127, -2});
  const Q8Block unit = block_of(bytes, 2);
  CHECK(unit.d == 0x2008);
  CHECK(unit.q[0] == 127);
  CHECK(unit.q[1] == -127);
  const Q8Block tie = block_of(bytes, 3);
  CHECK(tie.q[0] == 127);
  CHECK(tie.q[1] == 3);
  // Dequantized: q · F16(d).
  const std::vector<float> back = dg::dequantize_q8_0(bytes.data(), x.size());
  CHECK(back[32 + 2] == 3.0f);
  CHECK(back[64] == 127.0f * dg::f16_to_float(0x2008));
  CHECK(back[0] == 0.0f);
}

TEST_CASE("Q8_0 round trip: within half a step plus the F16 rounding of d, over many blocks") {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 0.3f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = n(rng);
  const std::vector<float> back =
      dg::dequantize_q8_0(dg::quantize_q8_0(x.data(), x.size()).data(), x.size());
  for (size_t b = 0; b < 64; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    for (size_t j = 0; j < 32; ++j) {
      // |q·F16(d) − x| <= d/2 (rounding q) + 127 · |F16(d) − d| (the scale's rounding, ≤ 2^-11 d)
      CHECK(std::fabs(back[b * 32 + j] - x[b * 32 + j]) <= d * (0.5f + 127.0f / 2048.0f) + 1e-9f);
    }
  }
}

TEST_CASE("Q8_0 refusals: counts off the block, values that are not finite, rows off 32") {
  std::vector<float> x(40, 1.0f);
  CHECK_THROWS_WITH_AS(dg::quantize_q8_0(x.data(), 40), doctest::Contains("40 values"),
                       std::invalid_argument);
  std::vector<float> z(64, 1.0f);
  z[33] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(dg::quantize_q8_0(z.data(), 64), doctest::Contains("value 33 (inf)"),
                       std::invalid_argument);
  std::vector<float> y(64, 0.0f);
  y[5] = std::nanf("");
  CHECK_THROWS_WITH_AS(dg::gguf_float_tensor("blk.0.attn_q.weight", {2, 32}, y, GgmlType::q8_0),
                       doctest::Contains("'blk.0.attn_q.weight': Q8_0: value 5"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(
      dg::gguf_float_tensor("blk.0.ffn_down.weight", {4, 24}, std::vector<float>(96),
                            GgmlType::q8_0),
      doctest::Contains("'blk.0.ffn_down.weight': Q8_0 stores rows in blocks of 32"),
      std::runtime_error);
}

TEST_CASE("Q8_0 in the GGUF writer and reader: sizes, round trip, a row off 32 refused") {
  std::vector<float> v(3 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.1f * static_cast<float>(i));
  GgufFile f;
  f.tensors.push_back(dg::gguf_float_tensor("w", {3, 64}, v, GgmlType::q8_0));
  CHECK(f.tensors[0].dims == std::vector<uint64_t>{64, 3});
  CHECK(f.tensors[0].bytes.size() == 6 * 34);
  CHECK(dg::ggml_type_name(GgmlType::q8_0) == std::string("Q8_0"));
  CHECK(dg::ggml_block_size(GgmlType::q8_0) == 32);
  CHECK(dg::ggml_type_size(GgmlType::q8_0) == 34);
  const std::string bytes = dg::serialize_gguf(f);
  const GgufFile back = dg::parse_gguf(bytes, "q8.gguf");
  REQUIRE(back.tensors.size() == 1);
  CHECK(back.tensors[0].type == GgmlType::q8_0);
  CHECK(back.tensors[0].bytes == f.tensors[0].bytes);
  CHECK(dg::gguf_tensor_floats(back.tensors[0]) == dg::gguf_tensor_floats(f.tensors[0]));

  // The writer: dims[0] 48 is one and a half blocks.
  GgufFile odd = f;
  odd.tensors[0].dims = {48, 4};
  CHECK_THROWS_WITH_AS(dg::serialize_gguf(odd), doctest::Contains("'w': dims {48, 4}: Q8_0 stores"),
                       std::runtime_error);
  // The reader: the same file with dims[0] patched from 64 to 48.
  std::string patched = bytes;
  const std::string name_and_dims = std::string("\x01\0\0\0\0\0\0\0w\x02\0\0\0@\0\0\0\0\0\0\0", 21);
  const size_t at = patched.find(name_and_dims);
  REQUIRE(at != std::string::npos);
  patched[at + 13] = '0';  // 0x30 = 48
  CHECK_THROWS_WITH_AS(
      dg::parse_gguf(patched, "q8.gguf"),
      doctest::Contains("q8.gguf: GGUF tensor_infos[0] 'w' dimensions: dims {48, 3}"),
      std::runtime_error);
}

TEST_CASE("--quant q8_0 stores tensors as llama.cpp's converter does") {
  const dg::BpeTokenizer tok = tokenizer();
  dg::GgufExportOptions q8;
  q8.type = GgmlType::f16;
  q8.quant = GgmlType::q8_0;
  SUBCASE("llama, dim 64: every matrix Q8_0, norms F32; file type 7 and quantization version") {
    const dg::MicroLMConfig c = llama_config(tok.vocab_size(), 64, false);
    dg::MicroLM model(c);
    model.init_identical(1);
    const GgufFile f = dg::micro_lm_gguf(model, c, tok, q8);
    CHECK(f.find("general.file_type")->uint == 7);
    CHECK(f.find("general.quantization_version")->uint == 2);
    for (const GgufTensor& t : f.tensors) {
      CAPTURE(t.name);
      CHECK(t.type == (t.dims.size() == 1 ? GgmlType::f32 : GgmlType::q8_0));
    }
    // Values: the Q8_0 of the (permuted) float tensor.
    const dg::GgufFile plain = dg::micro_lm_gguf(model, c, tok, GgmlType::f32);
    const std::vector<float> w = floats(plain, "blk.1.attn_q.weight");
    CHECK(floats(f, "blk.1.attn_q.weight") ==
          dg::dequantize_q8_0(dg::quantize_q8_0(w.data(), w.size()).data(), w.size()));
  }
  SUBCASE("gpt2, dim 48: rows of 48 fall back to --type, ffn_down's rows of 96 quantize") {
    const dg::MicroLMConfig c = gpt2_config(tok.vocab_size(), 48);
    dg::MicroLM model(c);
    model.init_identical(2);
    const GgufFile f = dg::micro_lm_gguf(model, c, tok, q8);
    CHECK(f.find_tensor("blk.0.attn_qkv.weight")->type == GgmlType::f16);
    CHECK(f.find_tensor("blk.0.ffn_down.weight")->type == GgmlType::q8_0);  // row = 2 · 48
    CHECK(f.find_tensor("blk.0.attn_qkv.bias")->type == GgmlType::f32);
    CHECK(f.find_tensor("position_embd.weight")->type == GgmlType::f32);  // always F32
    CHECK(f.find_tensor("token_embd.weight")->type == GgmlType::f16);
  }
  CHECK(dg::parse_gguf_quant_type("q8_0") == GgmlType::q8_0);
  CHECK_THROWS_WITH_AS(dg::parse_gguf_quant_type("q4_0"), doctest::Contains("'q4_0' is not q8_0"),
                       std::invalid_argument);
}

TEST_CASE("llama adapter GGUF: metadata, names, GGUF dims, Q/K rows of B permuted, A not") {
  const dg::BpeTokenizer tok = tokenizer();
  const dg::MicroLMConfig c = llama_config(tok.vocab_size(), 32, false);
  dg::MicroLM model(c);
  model.init_identical(4);
  dg::lora::apply(
      model,
      {.targets = {"q", "k", "v", "output", "gate", "up", "down", "head"}, .r = 3, .alpha = 6});
  randomize_b(model, 5);
  const std::vector<dg::LoraFactors> factors = dg::lora_factors_of(model);
  REQUIRE(factors.size() == 2 * 7 + 1);
  const GgufFile f = dg::lora_adapter_gguf(model, c, factors, dg::GgufExportOptions{});
  CHECK(f.find("general.architecture")->text == "llama");
  CHECK(f.find("general.type")->text == "adapter");
  CHECK(f.find("adapter.type")->text == "lora");
  CHECK(f.find("adapter.lora.alpha")->type == dg::GgufType::f32);
  CHECK(f.find("adapter.lora.alpha")->real == 6.0);
  CHECK(f.find("general.file_type")->uint == 0);
  CHECK(f.tensors.size() == 2 * factors.size());
  const uint64_t D = 32, F = 64, kv = 16, V = static_cast<uint64_t>(c.vocab), r = 3;
  const std::map<std::string, std::pair<uint64_t, uint64_t>> in_out = {
      {"attn_q", {D, D}},   {"attn_k", {D, kv}}, {"attn_v", {D, kv}}, {"attn_output", {D, D}},
      {"ffn_gate", {D, F}}, {"ffn_up", {D, F}},  {"ffn_down", {F, D}}};
  for (int l = 0; l < 2; ++l)
    for (const auto& [part, dims] : in_out) {
      const std::string name = "blk." + std::to_string(l) + "." + part + ".weight";
      CAPTURE(name);
      // llama.cpp: a.ne = {in, r}, b.ne = {r, out} (its checks in llama_adapter_lora_init_impl).
      CHECK(f.find_tensor(name + ".lora_a")->dims == std::vector<uint64_t>{dims.first, r});
      CHECK(f.find_tensor(name + ".lora_b")->dims == std::vector<uint64_t>{r, dims.second});
      CHECK(f.find_tensor(name + ".lora_a")->type == GgmlType::f32);
    }
  CHECK(f.find_tensor("output.weight.lora_b")->dims == std::vector<uint64_t>{r, V});
  // Q's B rows permuted per head (4 heads of 8), K's per K/V head (2 heads of 8); A as is.
  const dg::LoraFactors& q = factors[0];
  REQUIRE(q.linear == "blocks.0.attention.q");
  CHECK(floats(f, "blk.0.attn_q.weight.lora_b") == dg::permute_rows_for_llama_rope(q.b, 4, 8, r));
  CHECK(floats(f, "blk.0.attn_q.weight.lora_a") == q.a);
  const dg::LoraFactors& k = factors[1];
  REQUIRE(k.linear == "blocks.0.attention.k");
  CHECK(floats(f, "blk.0.attn_k.weight.lora_b") == dg::permute_rows_for_llama_rope(k.b, 2, 8, r));
  CHECK(floats(f, "blk.0.attn_v.weight.lora_b") == factors[2].b);  // V is not rotated
  CHECK(floats(f, "blk.0.attn_q.weight.lora_b") != q.b);
}

TEST_CASE("the adapter applied in GGUF space is the merged model's GGUF (llama and gpt2)") {
  const dg::BpeTokenizer tok = tokenizer();
  for (const bool gpt2 : {false, true}) {
    CAPTURE(gpt2);
    const dg::MicroLMConfig c =
        gpt2 ? gpt2_config(tok.vocab_size(), 32) : llama_config(tok.vocab_size(), 32, true);
    dg::MicroLM model(c);
    model.init_identical(6);
    if (gpt2) {
      for (int l = 0; l < 2; ++l) {
        const std::string a = "blocks." + std::to_string(l) + ".attention.";
        dg::lora::apply_shared(model, {a + "q", a + "k", a + "v"},
                               {.targets = {}, .r = 2, .alpha = 5});
      }
      dg::lora::apply(model, {.targets = {"output", "up", "down"}, .r = 2, .alpha = 5});
    } else {
      dg::lora::apply(model, {.targets = {"q", "k", "v", "output", "down"}, .r = 2, .alpha = 5});
    }
    randomize_b(model, 8);
    const GgufFile base = dg::micro_lm_gguf(model, c, tok, GgmlType::f32);  // adapters left out
    const GgufFile adapter =
        dg::lora_adapter_gguf(model, c, dg::lora_factors_of(model), dg::GgufExportOptions{});
    dg::lora::merge(model);
    const GgufFile merged = dg::micro_lm_gguf(model, c, tok, GgmlType::f32);
    CHECK(base.tensors.size() == merged.tensors.size());
    size_t checked = 0;
    for (const GgufTensor& t : adapter.tensors) {
      if (!t.name.ends_with(".lora_a")) continue;
      const std::string name = t.name.substr(0, t.name.size() - 7);
      CAPTURE(name);
      const std::vector<float> applied = apply_adapter(base, adapter, name),
                               want = floats(merged, name);
      REQUIRE(applied.size() == want.size());
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::fabs(double(applied[i]) - double(want[i])));
      CHECK(worst < 1e-6);
      CHECK(floats(base, name) != want);  // the adapter changes the tensor
      ++checked;
    }
    CHECK(checked == (gpt2 ? 2 * 4u : 2 * 5u));  // gpt2: attn_qkv, attn_output, ffn_up, ffn_down
    if (gpt2)
      CHECK(adapter.find_tensor("blk.0.attn_qkv.weight.lora_b")->dims ==
            std::vector<uint64_t>{2, 32 + 2 * 16});
  }
}

TEST_CASE("gpt2's fused attn_qkv: one adapted member gets zero rows for the others") {
  const dg::BpeTokenizer tok = tokenizer();
  const dg::MicroLMConfig c = gpt2_config(tok.vocab_size(), 32);
  dg::MicroLM model(c);
  model.init_identical(9);
  dg::lora::apply(model, {.targets = {"v"}, .r = 2, .alpha = 4});
  randomize_b(model, 10);
  const std::vector<dg::LoraFactors> factors = dg::lora_factors_of(model);
  const GgufFile f = dg::lora_adapter_gguf(model, c, factors, dg::GgufExportOptions{});
  const std::vector<float> b = floats(f, "blk.1.attn_qkv.weight.lora_b");
  REQUIRE(b.size() == (32 + 16 + 16) * 2u);
  CHECK(std::vector<float>(b.begin(), b.begin() + 48 * 2) == std::vector<float>(96, 0.0f));
  CHECK(std::vector<float>(b.begin() + 48 * 2, b.end()) == factors[1].b);
}

TEST_CASE("adapter GGUF refusals name the Linear and what llama.cpp would do instead") {
  const dg::BpeTokenizer tok = tokenizer();
  const dg::GgufExportOptions options;
  SUBCASE("gpt2 q and k with their own A: the fused attn_qkv has one") {
    const dg::MicroLMConfig c = gpt2_config(tok.vocab_size(), 32);
    dg::MicroLM model(c);
    model.init_identical(11);
    dg::lora::apply(model, {.targets = {"q", "k"}, .r = 2, .alpha = 4});
    CHECK_THROWS_WITH_AS(
        dg::lora_adapter_gguf(model, c, dg::lora_factors_of(model), options),
        doctest::Contains("'blocks.0.attention.q' and 'blocks.0.attention.k': llama.cpp's gpt2 "
                          "computes q, k and v in one fused attn_qkv, so their adapters must "
                          "share one A"),
        std::invalid_argument);
  }
  const dg::MicroLMConfig c = llama_config(tok.vocab_size(), 32, false);
  dg::MicroLM model(c);
  model.init_identical(12);
  CHECK_THROWS_WITH_AS(dg::lora_factors_of(model), doctest::Contains("no adapter"),
                       std::invalid_argument);
  dg::lora::apply(model, {.targets = {"q"}, .r = 2, .alpha = 4});
  dg::lora::apply(model, {.targets = {"v"}, .r = 4, .alpha = 4});  // scale · rank 4 as q's
  CHECK_NOTHROW(dg::lora_adapter_gguf(model, c, dg::lora_factors_of(model), options));
  dg::lora::apply(model, {.targets = {"gate"}, .r = 2, .alpha = 8});
  std::vector<dg::LoraFactors> factors = dg::lora_factors_of(model);
  CHECK_THROWS_WITH_AS(
      dg::lora_adapter_gguf(model, c, factors, options),
      doctest::Contains("'blocks.0.ffn.gate': scale · rank = 8 but 'blocks.0.attention.q' has 4; "
                        "llama.cpp reads one adapter.lora.alpha"),
      std::invalid_argument);
  std::erase_if(factors, [](const dg::LoraFactors& f) { return !f.linear.ends_with(".q"); });
  REQUIRE(factors.size() == 2);  // blocks.0.attention.q and blocks.1.attention.q
  std::vector<dg::LoraFactors> bad = factors;
  bad[0].linear = "blocks.0.attention.route";
  CHECK_THROWS_WITH_AS(dg::lora_adapter_gguf(model, c, bad, options),
                       doctest::Contains("'blocks.0.attention.route': the model has no Linear"),
                       std::invalid_argument);
  bad = factors;
  bad[0].linear = "token";
  bad[0].in = c.vocab;
  CHECK_THROWS(dg::lora_adapter_gguf(model, c, bad, options));
  bad = factors;
  bad[1].out = 16;
  bad[1].b.resize(16 * 2);
  CHECK_THROWS_WITH_AS(dg::lora_adapter_gguf(model, c, bad, options),
                       doctest::Contains("adapts [16, 32] but the Linear's weight is [32, 32]"),
                       std::invalid_argument);
  bad = factors;
  bad[0].a.pop_back();
  CHECK_THROWS_WITH_AS(dg::lora_adapter_gguf(model, c, bad, options),
                       doctest::Contains("A has 63 values"), std::invalid_argument);
  bad = factors;
  bad[0].scale = bad[1].scale = 0;
  CHECK_THROWS_WITH_AS(dg::lora_adapter_gguf(model, c, bad, options),
                       doctest::Contains("alpha (scale · rank) is 0"), std::invalid_argument);
  bad = factors;
  bad[1] = bad[0];
  CHECK_THROWS_WITH_AS(dg::lora_adapter_gguf(model, c, bad, options),
                       doctest::Contains("given twice"), std::invalid_argument);
  dg::lora::merge(model);
  CHECK_THROWS_WITH_AS(dg::lora_factors_of(model), doctest::Contains("is merged"),
                       std::invalid_argument);
}

TEST_CASE("a model whose Linears hold quantized frozen weights is refused, naming the Linear") {
  const dg::BpeTokenizer tok = tokenizer();
  const dg::MicroLMConfig c = llama_config(tok.vocab_size(), 32, false);
  dg::MicroLM model(c);
  model.init_identical(13);
  dg::quantize_frozen(model, dg::QuantFormat::int8);
  CHECK_THROWS_WITH_AS(dg::micro_lm_gguf(model, c, tok, GgmlType::f32),
                       doctest::Contains("Linear 'blocks.0.attention.q' holds a quantized frozen "
                                         "weight"),
                       std::invalid_argument);
}
