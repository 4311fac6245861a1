// Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/seed-*): a few small
// valid files made with the library's own writers and a few invalid ones made from them (cut
// short, a field broken). Run by `make fuzz-corpus`; its output is committed. It does not write
// crash regressions (crash-* files are kept by hand, each named after the defect it found).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "tests/fuzz/fuzz_checkpoint_model.h"
#include "train/checkpoint.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/onnx/proto.h"
#include "train/io/onnx/tensors.h"
#include "train/io/safetensors.h"
#include "train/lm/data/corpus.h"
#include "train/lm/text/bpe.h"

namespace {

namespace fs = std::filesystem;
fs::path root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(root / target);
  dg::write_file_atomic((root / target / ("seed-" + name)).string(), bytes);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("make_corpus: '" + from + "' not found");
  return text.replace(at, from.size(), to);
}

// Little-endian bytes of a few values, for the targets that read their input as numbers.
std::string bytes_of(std::initializer_list<uint32_t> values) {
  std::string out;
  for (uint32_t v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

void json_seeds() {
  seed("json", "object",
       R"({"a": [1, 2.5, -0.0, "\u00e9\ud83d\ude00", true, false, null], "b": {}})");
  seed("json", "numbers", "[1e308, -9223372036854775808, 9223372036854775807, 0.1, 5e-324, 1E+2]");
  seed("json", "nested", "[[[[{\"x\": [[{}]]}]]]]");
  seed("json", "bad-trailing-comma", R"({"a": 1,})");
  seed("json", "bad-duplicate-key", R"({"a": 1, "a": 2})");
  seed("json", "bad-lone-surrogate", R"(["\ud800"])");
  seed("json", "bad-too-deep", std::string(600, '[') + std::string(600, ']'));
  seed("json", "bad-utf8", "[\"\xC3\x28\"]");
}

std::vector<dg::TensorEntry> sample_tensors() {
  std::vector<dg::TensorEntry> tensors(3);
  tensors[0] = {"weight", "F32", {2, 3}, std::vector<uint8_t>(24, 0x3F)};
  tensors[1] = {"ids", "I64", {2}, std::vector<uint8_t>(16, 1)};
  tensors[2] = {"flag", "BOOL", {0}, {}};
  return tensors;
}

void safetensors_seeds() {
  const std::string good = dg::serialize_safetensors(sample_tensors(), {{"format", "pt"}});
  seed("safetensors", "three-tensors", good);
  seed("safetensors", "empty", dg::serialize_safetensors({}, {}));
  seed("safetensors", "bad-truncated", good.substr(0, good.size() - 5));
  seed("safetensors", "bad-header-length",
       std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}");
  seed("safetensors", "bad-overlap", replaced(good, "[16,40]", "[8,32]"));
  seed("safetensors", "bad-dtype", replaced(good, "\"F32\"", "\"F4X\""));

  // safetensors_roundtrip: tensor count (4 bytes), then per tensor a name (length byte +
  // bytes), a dtype index (1 byte, 12 = F32, 0 = BOOL), a rank and dims (4 bytes each) and the
  // data bytes; then a metadata count (4 bytes) and key/value strings.
  seed("safetensors_roundtrip", "empty", "");
  seed("safetensors_roundtrip", "two-tensors",
       bytes_of({2}) + "\x01w\x0c" + bytes_of({2, 2, 3}) + std::string(24, '\x41') + "\x01b" +
           std::string(1, '\0') + bytes_of({1, 4}) + std::string("\x01\x00\x01\x01", 4) +
           bytes_of({1}) + "\x01k\x01v");
  seed("safetensors_roundtrip", "metadata-only", bytes_of({0, 2}) + "\x01k\x01v\x02k2\x00");
}

void checkpoint_seeds() {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dg-make-corpus-{}", ::getpid());
  fs::create_directories(dir);
  dg::MicroLMTrainer trainer(dg::fuzz::tiny_config(), dg::fuzz::tiny_train_ids());
  trainer.run(2);
  const std::string checkpoint = (dir / "checkpoint.safetensors").string();
  const std::string weights = (dir / "weights.safetensors").string();
  trainer.save_checkpoint(checkpoint);
  dg::save_weights(weights, trainer.model());
  const std::string good = dg::read_file(checkpoint);
  seed("checkpoint", "training-checkpoint", good);
  seed("checkpoint", "weights", dg::read_file(weights));
  seed("checkpoint", "bad-truncated", good.substr(0, good.size() / 2));
  seed("checkpoint", "bad-step",
       replaced(good, "\"depthgrad.step\":\"2\"", "\"depthgrad.step\":\"x\""));
  fs::remove_all(dir);
}

void config_seeds() {
  dg::RunConfig config = dg::fuzz::tiny_config();
  seed("train_config", "tiny", dg::json::dump(dg::to_json(config), 2));
  config.model.mode = dg::residual_mode("paper_block_attnres");
  config.training.schedule = dg::Schedule::parse("cosine", 1e-3, 2, config.training.steps);
  seed("train_config", "paper-cosine", dg::json::dump(dg::to_json(config)));
  seed("train_config", "empty-object", "{}");
  seed("train_config", "bad-model-kind", R"({"model": 3})");
  seed("train_config", "bad-steps", R"({"steps": 0, "batch": 2})");
  seed("train_config", "bad-heads", R"({"model": {"dim": 6, "heads": 4}})");
}

void ids_seeds() {
  const std::string good = dg::serialize_ids({1, 2, 3, 500, 0, -1});
  seed("ids_cache", "six-ids", good);
  seed("ids_cache", "empty", dg::serialize_ids({}));
  seed("ids_cache", "bad-truncated", good.substr(0, good.size() - 1));
  std::string wrong_count = good;
  wrong_count[8] = 7;
  seed("ids_cache", "bad-count", wrong_count);
  seed("ids_cache", "bad-magic", replaced(good, "DGIDS001", "DGIDS002"));
}

void tokenizer_seeds() {
  const std::string text =
      "the cat sat on the mat; the dog sat on the log. caf\xC3\xA9 \xE4\xB8\xAD";
  const dg::BpeTokenizer trained =
      dg::train_bpe({text}, 280, 1, {"<pad>", "<unk>", "<bos>", "<eos>"});
  const std::string good = trained.to_json();
  seed("tokenizer_json", "trained", good);
  const dg::BpeTokenizer no_specials = dg::train_bpe({"aaab abab"}, 0, 0, {});
  seed("tokenizer_json", "no-specials", no_specials.to_json());
  seed("tokenizer_json", "legacy-merges",
       replaced(good, "\"merges\": [\n      [\n        \"a\",\n        \"t\"\n      ]",
                "\"merges\": [\n      \"a t\""));
  seed("tokenizer_json", "bad-normalizer",
       replaced(good, "\"normalizer\": null", "\"normalizer\": {}"));
  seed("tokenizer_json", "bad-vocab-id", replaced(good, "\"<pad>\": 0", "\"<pad>\": 9999"));
  seed("tokenizer_json", "bad-truncated", good.substr(0, good.size() / 2));

  seed("bpe_encode", "english", "The cat sat on the mat. It's 12:30, isn't it?");
  seed("bpe_encode", "unicode",
       "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 \xCE\xB1\xCE\xB2");
  seed("bpe_encode", "invalid-utf8", "ab\xFF\xFE\x80 c\xC3 \xE4\xB8 z");
  seed("bpe_encode", "specials", "<bos>hello<eos><unk><pad><bos<eos>>");
  seed("bpe_encode", "whitespace", "  \t\n\r\n   x  \xC2\x85 \xE2\x80\xA8 y ");

  // bpe_train: vocab size (4 bytes), min frequency (4), specials count (4), specials, texts count
  // (4), texts (length byte + bytes).
  seed("bpe_train", "one-text", bytes_of({300, 1, 0, 0}) + "\x20the cat sat on the mat the end.");
  seed("bpe_train", "specials",
       bytes_of({280, 0, 2}) + "\x05<unk>\x05<bos>" + bytes_of({0}) + "\x0d<bos>a b<unk>");
  seed("bpe_train", "bytes",
       bytes_of({259, 2, 0, 1}) + std::string("\x08\x00\x01\xff\xfe\x80\x81\x00\x01", 9) +
           "\x06\xc3\xa9\xc3\xa9\xc3\xa9");
}

}  // namespace

// onnx: a small graph (Gemm, Relu, a Constant shape and a Reshape) that loads, and broken
// copies of it (cut short, an unknown op, an old opset, a node out of order).
void onnx_seeds() {
  using namespace dg::onnx;
  ModelProto m;
  m.ir_version = 8;
  m.opset_import = {{"", 17}};
  m.has_graph = true;
  ValueInfo x{"x", 1, true, {{false, 0, "batch"}, {true, 3, ""}}};
  ValueInfo y{"y", 1, true, {{false, 0, "batch"}, {true, 2, ""}}};
  m.graph.input = {x};
  m.graph.output = {y};
  m.graph.initializer = {
      to_tensor_proto("fc.weight", dg::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3})),
      to_tensor_proto("fc.bias", dg::Tensor::from_vector({0.5, -0.5}, {2}))};
  AttributeProto trans_b, shape;
  trans_b.name = "transB";
  trans_b.type = AttributeProto::i;
  trans_b.i_value = 1;
  shape.name = "value";
  shape.type = AttributeProto::t;
  shape.t_value = {to_tensor_proto("", dg::Tensor::from_ids({-1, 2}, {2}))};
  m.graph.node = {NodeProto{{"x", "fc.weight", "fc.bias"}, {"h"}, "gemm", "Gemm", "", {trans_b}},
                  NodeProto{{"h"}, {"r"}, "relu", "Relu", "", {}},
                  NodeProto{{}, {"s"}, "shape", "Constant", "", {shape}},
                  NodeProto{{"r", "s"}, {"y"}, "reshape", "Reshape", "", {}}};
  const std::string good = encode_model(m);
  seed("onnx", "gemm-relu-reshape", good);
  seed("onnx", "bad-truncated", good.substr(0, good.size() - 9));
  ModelProto changed = m;
  changed.graph.node[1].op_type = "Mish";
  seed("onnx", "bad-unknown-op", encode_model(changed));
  changed = m;
  changed.opset_import = {{"", 9}};
  seed("onnx", "bad-opset-9", encode_model(changed));
  changed = m;
  std::swap(changed.graph.node[0], changed.graph.node[1]);
  seed("onnx", "bad-out-of-order", encode_model(changed));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: {} CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  try {
    root = argv[1];
    json_seeds();
    safetensors_seeds();
    checkpoint_seeds();
    config_seeds();
    ids_seeds();
    tokenizer_seeds();
    onnx_seeds();
  } catch (const std::exception& e) {
    fmt::print(stderr, "make_corpus: {}\n", e.what());
    return 1;
  }
  return 0;
}
