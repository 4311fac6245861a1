// The library as another program uses it: any named set of tensors to safetensors and back in
// one call each, and a model loaded from a checkpoint that trains with no further calls.
// It does not test the installed package (tools/example/ and tests/package_consumer.sh do).
#include <doctest/doctest.h>

#include <map>

#include "autograd/tape.h"
#include "nn/lm/micro_lm.h"
#include "tests/temp_dir.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace {

dg::MicroLMConfig tiny_config() {
  dg::MicroLMConfig c;
  c.vocab = 32;
  c.dim = 16;
  c.layers = 2;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_len = 8;
  c.expansion = 2;
  return c;
}

}  // namespace

TEST_CASE("save_tensors / load_tensors: every dtype, views included, exact values and order") {
  dg::test::TempDir dir("tensors");
  const std::string path = dir.file("set.safetensors");
  dg::Tensor f32 =
      dg::Tensor::from_vector({1.5, -2.25, 3.0, 4.0, 5.5, -6.0}, {2, 3}, dg::DType::f32);
  dg::Tensor f64 = dg::Tensor::from_vector({0.1, 0.2, 0.3}, {3}, dg::DType::f64);
  dg::Tensor i64 = dg::Tensor::from_vector({-7, 8, 9, 10}, {2, 2}, dg::DType::i64);
  dg::Tensor i32 = dg::Tensor::from_ids({1, 2, 3}, {3});
  dg::Tensor view =
      dg::raw::view_transpose(f32, 0, 1);  // [3, 2], not contiguous: saved as its values
  dg::save_tensors(
      path, {{"a.f32", f32}, {"b.f64", f64}, {"c.i64", i64}, {"d.i32", i32}, {"e.view", view}},
      {{"note", "hello"}});
  auto back = dg::load_tensors(path);
  REQUIRE(back.size() == 5);
  std::map<std::string, dg::Tensor> by_name(back.begin(), back.end());
  auto same = [](const dg::Tensor& a, const dg::Tensor& b) {
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
    return a.to_vector() == b.to_vector();
  };
  CHECK(same(by_name.at("a.f32"), f32));
  CHECK(same(by_name.at("b.f64"), f64));
  CHECK(same(by_name.at("c.i64"), i64));
  CHECK(same(by_name.at("d.i32"), i32));
  CHECK(same(by_name.at("e.view"), view));
  CHECK(by_name.at("e.view").shape() == dg::Shape{3, 2});
  // names must be unique; an undefined tensor is refused with its name
  CHECK_THROWS_WITH_AS(dg::save_tensors(path, {{"x", f32}, {"x", f64}}),
                       doctest::Contains("duplicate"), std::runtime_error);
  CHECK_THROWS_WITH_AS(dg::save_tensors(path, {{"ghost", dg::Tensor()}}),
                       doctest::Contains("ghost"), std::invalid_argument);
  // the refused writes left the earlier file whole
  CHECK(dg::load_tensors(path).size() == 5);
}

TEST_CASE("a model loaded from a checkpoint trains with no other call") {
  dg::test::TempDir dir("loaded");
  const std::string path = dir.file("model.safetensors");
  {
    dg::MicroLM source(tiny_config());
    source.init_identical(7);
    dg::save_weights(path, source);
  }
  dg::MicroLM model(tiny_config());
  dg::load_weights(path, model);
  dg::AdamW optimizer(model, dg::AdamWConfig{});  // builds the module's flat buffers itself
  CHECK(&model.flat_parameters() == &model.flat_parameters());
  // parameters are views into the flat buffer now: a second flatten shares it, not copies it
  CHECK(dg::flatten_parameters(model).values.storage() == model.flat_parameters().values.storage());

  std::vector<int32_t> ids(2 * 8), targets(2 * 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 5) % 32);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % 32);
  }
  dg::Tensor x = dg::Tensor::from_ids(ids, {2, 8}), y = dg::Tensor::from_ids(targets, {2, 8});
  const std::vector<double> before = model.parameter("token.weight").to_vector();
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    model.zero_grad();
    dg::Tensor loss = model.loss(x, y);
    dg::backward(loss);
    dg::clip_grad_norm(model, 1.0);
    optimizer.step(1e-2);
    (step == 0 ? first : last) = loss.item();
  }
  CHECK(last < first * 0.8);  // it learns the fixed batch
  CHECK(model.parameter("token.weight").to_vector() != before);
}
