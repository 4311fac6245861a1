// The ONNX test cases' writer (tests/onnx/onnx_cases.h), which the real clients read: the
// manifest's fields, each tensor's bytes for every dtype, a second run, a case written again
// replacing its entry, and every refusal with its message. The clients themselves run under
// ctest onnx_runtime (tests/onnx/onnx_runtime.sh).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "tests/onnx/onnx_cases.h"
#include "tests/temp_dir.h"
#include "train/io/files.h"
#include "train/io/json.h"

using dg::Tensor;
using dg::onnx_cases::write_onnx_case;
using dg::test::TempDir;

namespace {

dg::json::Value manifest_of(const TempDir& dir) {
  return dg::json::parse(dg::read_file(dir.file("manifest.json")), "manifest.json");
}

// The values of a .bin file as T.
template <class T>
std::vector<T> values_of(const TempDir& dir, const std::string& file) {
  const std::string bytes = dg::read_file(dir.file(file));
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  REQUIRE(values.size() * sizeof(T) == bytes.size());
  return values;
}

}  // namespace

TEST_CASE("write_onnx_case writes the manifest and each tensor's little-endian bytes") {
  TempDir dir("onnx-cases");
  dg::write_file_atomic(dir.file("m.onnx"), "model");
  const Tensor x = Tensor::from_vector(std::vector<double>{1.5, -2, 3, 4.25, 5, 6}, {2, 3});
  const Tensor ids = Tensor::from_ids({7, -1, 1LL << 40}, {3});
  const Tensor mask = Tensor::from_vector(std::vector<bool>{true, false, true}, {3});
  const Tensor k = Tensor::from_ids({-5, 9}, {2}, dg::DType::i32);
  const Tensor u = Tensor::from_ids({0, 255}, {1, 2}, dg::DType::u8);
  const Tensor d = Tensor::from_vector(std::vector<double>{0.1}, {1}, dg::DType::f64);
  // A transposed view: written in C order of its own shape, not of its storage.
  write_onnx_case(dir.path.string(), "case-1", "m.onnx", {{"x", x.transpose(0, 1)}, {"ids", ids}},
                  {{"mask", mask}, {"k", k}, {"u", u}, {"d", d}}, 1e-5);
  const dg::json::Value m = manifest_of(dir);
  CHECK(m.at("format").as_string() == "depthgrad-onnx-cases");
  CHECK(m.at("version").as_int() == 1);
  REQUIRE(m.at("cases").size() == 1);
  const dg::json::Value& c = m.at("cases").at(0);
  CHECK(c.at("name").as_string() == "case-1");
  CHECK(c.at("model").as_string() == "m.onnx");
  CHECK(c.at("tolerance").as_double() == 1e-5);
  REQUIRE(c.at("runs").size() == 1);
  const dg::json::Value& in0 = c.at("runs").at(0).at("inputs").at(0);
  CHECK(in0.at("name").as_string() == "x");
  CHECK(in0.at("dtype").as_string() == "float32");
  CHECK(dg::json::dump(in0.at("shape")) == "[3,2]");
  CHECK(in0.at("file").as_string() == "case-1.r0.in0.bin");
  CHECK(values_of<float>(dir, "case-1.r0.in0.bin") == std::vector<float>{1.5, 4.25, -2, 5, 3, 6});
  CHECK(values_of<int64_t>(dir, "case-1.r0.in1.bin") == std::vector<int64_t>{7, -1, 1LL << 40});
  const dg::json::Value& outputs = c.at("runs").at(0).at("outputs");
  const std::vector<std::string> dtypes{"bool", "int32", "uint8", "float64"};
  for (size_t i = 0; i < dtypes.size(); ++i)
    CHECK(outputs.at(i).at("dtype").as_string() == dtypes[i]);
  CHECK(values_of<uint8_t>(dir, "case-1.r0.out0.bin") == std::vector<uint8_t>{1, 0, 1});
  CHECK(values_of<int32_t>(dir, "case-1.r0.out1.bin") == std::vector<int32_t>{-5, 9});
  CHECK(values_of<uint8_t>(dir, "case-1.r0.out2.bin") == std::vector<uint8_t>{0, 255});
  CHECK(values_of<double>(dir, "case-1.r0.out3.bin") == std::vector<double>{0.1});
}

TEST_CASE("write_onnx_case: a second run, another case appended, the same name replaced") {
  TempDir dir("onnx-cases");
  dg::write_file_atomic(dir.file("m.onnx"), "model");
  const Tensor a = Tensor::ones({2, 4}), b = Tensor::ones({5, 4});
  write_onnx_case(dir.path.string(), "mlp", "m.onnx", {{"x", a}}, {{"y", a}}, 1e-5,
                  {{.inputs = {{"x", b}}, .outputs = {{"y", b}}}});
  write_onnx_case(dir.path.string(), "other", "m.onnx", {}, {{"y", a}}, 1e-4);
  dg::json::Value m = manifest_of(dir);
  REQUIRE(m.at("cases").size() == 2);
  const dg::json::Value& runs = m.at("cases").at(0).at("runs");
  REQUIRE(runs.size() == 2);
  CHECK(dg::json::dump(runs.at(1).at("inputs").at(0).at("shape")) == "[5,4]");
  CHECK(runs.at(1).at("outputs").at(0).at("file").as_string() == "mlp.r1.out0.bin");
  CHECK(dg::read_file(dir.file("mlp.r1.out0.bin")).size() == 5 * 4 * sizeof(float));
  // Written again: one run now, in the first place still, the other case kept.
  write_onnx_case(dir.path.string(), "mlp", "m.onnx", {{"x", a}}, {{"y", a}}, 2e-5);
  m = manifest_of(dir);
  REQUIRE(m.at("cases").size() == 2);
  CHECK(m.at("cases").at(0).at("name").as_string() == "mlp");
  CHECK(m.at("cases").at(0).at("runs").size() == 1);
  CHECK(m.at("cases").at(0).at("tolerance").as_double() == 2e-5);
  CHECK(m.at("cases").at(1).at("name").as_string() == "other");
}

TEST_CASE("write_onnx_case refuses what a client could not run, naming it") {
  TempDir dir("onnx-cases");
  const std::string d = dir.path.string();
  dg::write_file_atomic(dir.file("m.onnx"), "model");
  const Tensor a = Tensor::ones({2});
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "a/b", "m.onnx", {}, {{"y", a}}, 1e-5),
                       doctest::Contains("case name 'a/b' must be letters"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, ".hidden", "m.onnx", {}, {{"y", a}}, 1e-5),
                       doctest::Contains("'.hidden'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {}, {{"y", a}}, 0),
                       doctest::Contains("tolerance must be positive and finite"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "missing.onnx", {}, {{"y", a}}, 1e-5),
                       doctest::Contains("no model file"), std::runtime_error);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {{"x", a}}, {}, 1e-5),
                       doctest::Contains("case 'c' run 0 has no outputs"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {{"x", a}, {"x", a}}, {{"y", a}}, 1e-5),
                       doctest::Contains("names 'x' twice"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {{"", a}}, {{"y", a}}, 1e-5),
                       doctest::Contains("input 0 has no name"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {}, {{"y", Tensor()}}, 1e-5),
                       doctest::Contains("output 0 ('y') is an undefined tensor"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      write_onnx_case(d, "c", "m.onnx", {}, {{"y", a}}, 1e-5, {{.inputs = {}, .outputs = {}}}),
      doctest::Contains("case 'c' run 1 has no outputs"), std::invalid_argument);
  // Nothing refused was written.
  CHECK(std::filesystem::directory_iterator(dir.path)->path().filename() == "m.onnx");
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path),
                      std::filesystem::directory_iterator()) == 1);
  // A manifest.json that is not one is never overwritten.
  dg::write_file_atomic(dir.file("manifest.json"), "{\"cases\": 3}");
  CHECK_THROWS_WITH_AS(write_onnx_case(d, "c", "m.onnx", {}, {{"y", a}}, 1e-5),
                       doctest::Contains("not a manifest of ONNX cases"), std::runtime_error);
  CHECK(dg::read_file(dir.file("manifest.json")) == "{\"cases\": 3}");
}
