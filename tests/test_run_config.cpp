// The run configuration (train/lm/run_config.h): its JSON round trip, every kind of refusal with
// the key named, the presets, and the reproduction's resume key, which must change when any setting
// of the run changes (checked against every key the JSON mapping writes, so a new setting without
// a test here fails).
#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tests/test_helpers.h"
#include "tools/attnres/reproduce.h"
#include "tools/cli/run_config_flags.h"
#include "train/io/files.h"
#include "train/lm/memory_budget.h"
#include "train/lm/run_config.h"
#include "train/trainer.h"

using namespace dg;
using dg::test::contains;
using dg::test::error_of;

namespace {

// A config with every setting away from its default (and still valid).
RunConfig unusual_config() {
  RunConfig c;
  c.preset = "mini";  // a label of where the sizes came from; the sizes below are what count
  c.model.vocab = 300;
  c.model.dim = 48;
  c.model.layers = 3;
  c.model.heads = 6;
  c.model.kv_heads = 2;
  c.model.seq_len = 32;
  c.model.expansion = 2;
  c.model.mode = residual_mode("paper_block_attnres");
  c.model.norm = Norm::Kind::layer;
  c.model.norm_eps = 1e-5;
  c.model.ffn = FeedForward::Kind::gelu;
  c.model.rope = false;
  c.model.bias = true;
  c.model.learned_positions = true;
  c.model.tied_head = false;
  c.model.attnres_block_size = 1;
  c.model.ffn_hidden = 100;
  c.model.rope_theta = 500000.0;
  c.training.steps = 77;
  c.training.batch = 5;
  c.training.clip = 0.5;
  c.training.adamw.lr = 1e-3;
  c.training.adamw.beta1 = 0.8;
  c.training.adamw.beta2 = 0.95;
  c.training.adamw.eps = 1e-7;
  c.training.adamw.weight_decay = 0.1;
  c.training.adamw.decay = DecayPolicy::matrices_only;
  c.training.schedule.kind = Schedule::Kind::warmup_cosine;
  c.training.schedule.warmup_steps = 7;
  c.training.schedule.min_lr_ratio = 0.2;
  c.training.init = InitScheme::identical;
  c.training.seed = 9;
  c.training.sequential = true;
  c.training.accum = 3;
  c.training.zero = 1;
  c.training.precision = MatmulPrecision::bf16;
  c.training.detect_anomaly = true;
  c.training.overlap = false;
  c.data.dataset = "tiny-shakespeare";
  c.data.validation_fraction = 0.25;
  c.data.full_byte_alphabet = false;
  c.data.train_limit = 1000;
  c.data.eval_limit = 500;
  c.data.eval_windows = 0;
  c.data.eval_full = true;
  return c;
}

// "model.dim", "training.lr", ... for every leaf of a JSON object.
void leaf_paths(const json::Value& v, const std::string& prefix, std::set<std::string>& out) {
  if (!v.is_object()) {
    out.insert(prefix);
    return;
  }
  for (const auto& [key, child] : v.as_object())
    leaf_paths(child, prefix.empty() ? key : prefix + "." + key, out);
}
const json::Value* at_path(const json::Value& v, const std::string& path) {
  const json::Value* x = &v;
  size_t start = 0;
  while (x) {
    const size_t dot = path.find('.', start);
    x = x->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return x;
}

// A parse of `text` (a JSON document) as a run config; returns the error ("" when it is accepted).
std::string refusal(const std::string& text) {
  return error_of([&] { run_config_from_json(json::parse(text, "test"), "cfg.json"); });
}

}  // namespace

TEST_CASE("a run config round-trips through its JSON, every setting included") {
  const RunConfig c = unusual_config();
  const json::Value v = to_json(c);
  const RunConfig back = run_config_from_json(json::parse(json::dump(v, 2), "dumped"), "dumped");
  CHECK(to_json(back) == v);
  CHECK(back.model.mode == residual_mode("paper_block_attnres"));
  CHECK(back.model.kv_heads == 2);
  CHECK(back.model.norm == Norm::Kind::layer);
  CHECK(back.training.adamw.decay == DecayPolicy::matrices_only);
  CHECK(back.training.schedule.kind == Schedule::Kind::warmup_cosine);
  CHECK(back.training.schedule.warmup_steps == 7);
  CHECK(back.training.schedule.total_steps == 77);  // derived: the schedule's length is the run's
  CHECK(back.training.schedule.lr == 1e-3);
  CHECK(back.training.seed == 9);
  CHECK(back.training.accum == 3);
  CHECK(back.training.zero == 1);
  CHECK(back.data.dataset == "tiny-shakespeare");
  CHECK(back.data.eval_full);
  CHECK(back.preset == "mini");
  // The default config too, and the sections appear in the documented order.
  CHECK(to_json(run_config_from_json(to_json(RunConfig{}))) == to_json(RunConfig{}));
  const json::Object& top = v.as_object();
  REQUIRE(top.size() == 4);
  CHECK(top[0].first == "preset");
  CHECK(top[1].first == "model");
  CHECK(top[2].first == "training");
  CHECK(top[3].first == "data");
  CHECK(to_json(RunConfig{}).find("preset") == nullptr);  // written only when a preset was used
}

// Checkpoints, config.json and result files store to_json's bytes: the writer derived from the
// settings table must give exactly the bytes of the hand-written writer it replaced (recorded
// here from that writer). Rows added since are written only when they differ from their default
// (omitted_at_default), so only the unusual config shows them, appended to their section.
TEST_CASE("to_json gives the same bytes as the writer before the settings table") {
  std::vector<std::pair<std::string, RunConfig>> configs{{"default", RunConfig{}},
                                                         {"unusual", unusual_config()},
                                                         {"parity", protocol_run_config("parity")},
                                                         {"paired", protocol_run_config("paired")}};
  for (const std::string& name : run_preset_names()) configs.emplace_back(name, run_preset(name));
  const std::vector<std::string> expected{
      "{\"model\":{\"vocab\":512,\"dim\":64,\"layers\":2,\"heads\":4,\"kv_heads\":4,\"seq_len\":64,"
      "\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_eps\":1e-06,\"ffn\":"
      "\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,\"tied_head\":true,"
      "\"attnres_block_size\":2},\"training\":{\"steps\":30,\"batch\":4,\"clip\":1.0,\"lr\":0.0006,"
      "\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0.01,\"decay\":\"all\","
      "\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":\"parity\",\"seed\":42,"
      "\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":\"wikitext-2\","
      "\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_limit\":0,\"eval_limit\":0,"
      "\"eval_windows\":32,\"eval_full\":false}}",
      "{\"preset\":\"mini\",\"model\":{\"vocab\":300,\"dim\":48,\"layers\":3,\"heads\":6,\"kv_"
      "heads\":2,\"seq_len\":32,\"expansion\":2,\"mode\":\"paper_block_attnres\",\"norm\":"
      "\"layer\",\"norm_eps\":1e-05,\"ffn\":\"gelu\",\"rope\":false,\"bias\":true,\"learned_"
      "positions\":true,\"tied_head\":false,\"attnres_block_size\":1,\"ffn_hidden\":100,\"rope_"
      "theta\":500000.0},\"training\":{\"steps\":77,"
      "\"batch\":5,\"clip\":0.5,\"lr\":0.001,\"beta1\":0.8,\"beta2\":0.95,\"eps\":1e-07,\"weight_"
      "decay\":0.1,\"decay\":\"matrices\",\"schedule\":\"cosine\",\"warmup\":7,\"min_lr_ratio\":0."
      "2,\"init\":\"identical\",\"seed\":9,\"sequential\":true,\"accum\":3,\"zero\":1,"
      "\"overlap\":false,\"precision\":\"bf16\",\"detect_anomaly\":true},\"data\":{"
      "\"dataset\":\"tiny-shakespeare\",\"validation_fraction\":0.25,\"full_byte_alphabet\":false,"
      "\"train_limit\":1000,\"eval_limit\":500,\"eval_windows\":0,\"eval_full\":true}}",
      "{\"model\":{\"vocab\":512,\"dim\":64,\"layers\":2,\"heads\":4,\"kv_heads\":4,\"seq_len\":64,"
      "\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_eps\":1e-06,\"ffn\":"
      "\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,\"tied_head\":true,"
      "\"attnres_block_size\":2},\"training\":{\"steps\":30,\"batch\":4,\"clip\":1.0,\"lr\":0.0006,"
      "\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0.01,\"decay\":\"all\","
      "\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":\"parity\",\"seed\":42,"
      "\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":\"wikitext-2\","
      "\"validation_fraction\":0.1,\"full_byte_alphabet\":false,\"train_limit\":120000,\"eval_"
      "limit\":8000,\"eval_windows\":32,\"eval_full\":false}}",
      "{\"model\":{\"vocab\":512,\"dim\":64,\"layers\":2,\"heads\":4,\"kv_heads\":4,\"seq_len\":64,"
      "\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_eps\":1e-06,\"ffn\":"
      "\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,\"tied_head\":true,"
      "\"attnres_block_size\":2},\"training\":{\"steps\":1000,\"batch\":4,\"clip\":1.0,\"lr\":0."
      "0006,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0.01,\"decay\":"
      "\"matrices\",\"schedule\":\"cosine\",\"warmup\":50,\"min_lr_ratio\":0.1,\"init\":"
      "\"identical\",\"seed\":42,\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{"
      "\"dataset\":\"wikitext-2\",\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_"
      "limit\":0,\"eval_limit\":0,\"eval_windows\":32,\"eval_full\":true}}",
      "{\"preset\":\"micro\",\"model\":{\"vocab\":512,\"dim\":64,\"layers\":2,\"heads\":4,\"kv_"
      "heads\":4,\"seq_len\":64,\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_"
      "eps\":1e-06,\"ffn\":\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,"
      "\"tied_head\":true,\"attnres_block_size\":2},"
      "\"training\":{\"steps\":30,\"batch\":4,"
      "\"clip\":1.0,\"lr\":0.0006,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0."
      "01,\"decay\":\"all\",\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":"
      "\"parity\",\"seed\":42,\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":"
      "\"wikitext-2\",\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_limit\":0,"
      "\"eval_limit\":0,\"eval_windows\":32,\"eval_full\":false}}",
      "{\"preset\":\"mini\",\"model\":{\"vocab\":512,\"dim\":128,\"layers\":4,\"heads\":4,\"kv_"
      "heads\":4,\"seq_len\":128,\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_"
      "eps\":1e-06,\"ffn\":\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,"
      "\"tied_head\":true,\"attnres_block_size\":2},"
      "\"training\":{\"steps\":30,\"batch\":8,"
      "\"clip\":1.0,\"lr\":0.0006,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0."
      "01,\"decay\":\"all\",\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":"
      "\"parity\",\"seed\":42,\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":"
      "\"wikitext-2\",\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_limit\":0,"
      "\"eval_limit\":0,\"eval_windows\":32,\"eval_full\":false}}",
      "{\"preset\":\"small\",\"model\":{\"vocab\":512,\"dim\":256,\"layers\":8,\"heads\":8,\"kv_"
      "heads\":8,\"seq_len\":256,\"expansion\":3,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_"
      "eps\":1e-06,\"ffn\":\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,"
      "\"tied_head\":true,\"attnres_block_size\":2},"
      "\"training\":{\"steps\":30,\"batch\":8,"
      "\"clip\":1.0,\"lr\":0.0006,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0."
      "01,\"decay\":\"all\",\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":"
      "\"parity\",\"seed\":42,\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":"
      "\"wikitext-2\",\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_limit\":0,"
      "\"eval_limit\":0,\"eval_windows\":32,\"eval_full\":false}}",
      "{\"preset\":\"base\",\"model\":{\"vocab\":50304,\"dim\":768,\"layers\":12,\"heads\":12,\"kv_"
      "heads\":12,\"seq_len\":256,\"expansion\":4,\"mode\":\"rd_attnres\",\"norm\":\"rms\",\"norm_"
      "eps\":1e-06,\"ffn\":\"swiglu\",\"rope\":true,\"bias\":false,\"learned_positions\":false,"
      "\"tied_head\":true,\"attnres_block_size\":2},"
      "\"training\":{\"steps\":30,\"batch\":4,"
      "\"clip\":1.0,\"lr\":0.0006,\"beta1\":0.9,\"beta2\":0.999,\"eps\":1e-08,\"weight_decay\":0."
      "01,\"decay\":\"all\",\"schedule\":\"constant\",\"warmup\":0,\"min_lr_ratio\":0.1,\"init\":"
      "\"parity\",\"seed\":42,\"sequential\":false,\"accum\":1,\"zero\":0},\"data\":{\"dataset\":"
      "\"wikitext-2\",\"validation_fraction\":0.1,\"full_byte_alphabet\":true,\"train_limit\":0,"
      "\"eval_limit\":0,\"eval_windows\":32,\"eval_full\":false}}",
  };
  REQUIRE(configs.size() == expected.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    INFO(configs[i].first);
    CHECK(json::dump(to_json(configs[i].second)) == expected[i]);
  }
}

TEST_CASE("absent keys keep their defaults; kv_heads follows heads") {
  const RunConfig c =
      run_config_from_json(json::parse(R"({"model": {"dim": 96, "heads": 6}})", "t"));
  CHECK(c.model.dim == 96);
  CHECK(c.model.kv_heads == 6);
  CHECK(to_json(c).at("training") == to_json(RunConfig{}).at("training"));
  CHECK(to_json(c).at("data") == to_json(RunConfig{}).at("data"));
  CHECK(to_json(run_config_from_json(json::parse("{}", "t"))) == to_json(RunConfig{}));
}

TEST_CASE("unknown keys are refused, naming the key and the known ones") {
  std::string e = refusal(R"({"stepz": 3})");
  CHECK(contains(e, "cfg.json"));
  CHECK(contains(e, "stepz"));
  CHECK(contains(e, "preset, model, training, data"));
  e = refusal(R"({"model": {"widht": 64}})");
  CHECK(contains(e, "model.widht"));
  CHECK(contains(e, "unknown key"));
  CHECK(contains(refusal(R"({"training": {"steps": 3, "learning_rate": 1}})"),
                 "training.learning_rate"));
  CHECK(contains(refusal(R"({"data": {"vocab_size": 512}})"), "data.vocab_size"));
  // The flat layout of older config files is refused at its first key, with the sections named.
  e = refusal(R"({"model": {}, "steps": 30})");
  CHECK(contains(e, "steps"));
  CHECK(contains(e, "model, training, data"));
  e = refusal(R"({"preset": "huge"})");
  CHECK(contains(e, "preset"));
  CHECK(contains(e, "unknown preset 'huge'"));
}

TEST_CASE("wrong types are refused, naming the key") {
  std::string e = refusal(R"({"training": {"steps": "30"}})");
  CHECK(contains(e, "training.steps"));
  CHECK(contains(e, "expected an integer"));
  CHECK(contains(refusal(R"({"training": {"steps": 2.5}})"), "training.steps"));
  CHECK(contains(refusal(R"({"model": {"rope": 1}})"), "model.rope"));
  CHECK(contains(refusal(R"({"training": {"lr": "fast"}})"), "training.lr"));
  CHECK(contains(refusal(R"({"data": {"eval_full": "yes"}})"), "data.eval_full"));
  CHECK(contains(refusal(R"({"data": {"dataset": 2}})"), "data.dataset"));
  e = refusal(R"({"model": {"mode": "sideways"}})");
  CHECK(contains(e, "model.mode"));
  CHECK(contains(e, "sideways"));
  CHECK(contains(refusal(R"({"model": {"norm": "batch"}})"), "model.norm"));
  CHECK(contains(refusal(R"({"training": {"schedule": "linear"}})"), "training.schedule"));
  CHECK(contains(refusal(R"({"training": {"decay": "some"}})"), "training.decay"));
  CHECK(contains(refusal(R"({"training": {"init": "random"}})"), "training.init"));
  CHECK(contains(refusal(R"({"model": 3})"), "model"));
  CHECK(contains(refusal("[1, 2]"), "expected an object"));
}

TEST_CASE("inconsistent and non-positive sizes are refused, naming the key") {
  // width not divisible by heads
  std::string e = refusal(R"({"model": {"dim": 64, "heads": 5}})");
  CHECK(contains(e, "cfg.json"));
  CHECK(contains(e, "heads 5 must divide dim 64"));
  // heads not divisible by kv_heads
  e = refusal(R"({"model": {"heads": 4, "kv_heads": 3}})");
  CHECK(contains(e, "kv_heads 3 must divide heads 4"));
  CHECK(contains(refusal(R"({"model": {"layers": 0}})"), "layers"));
  CHECK(contains(refusal(R"({"model": {"vocab": -1}})"), "vocab"));
  CHECK(contains(refusal(R"({"training": {"steps": 0}})"),
                 "cfg.json: training.steps: must be >= 1, got 0"));
  CHECK(contains(refusal(R"({"training": {"batch": -2}})"), "training.batch"));
  CHECK(contains(refusal(R"({"training": {"accum": 0}})"), "training.accum: must be >= 1"));
  CHECK(contains(refusal(R"({"training": {"zero": 3}})"),
                 "training.zero: must be >= 0 and <= 2, got 3"));
  CHECK(contains(refusal(R"({"training": {"accum": 1.5}})"), "training.accum"));
  CHECK(contains(refusal(R"({"training": {"lr": 0}})"), "training.lr: must be > 0, got 0"));
  CHECK(contains(refusal(R"({"training": {"seed": -1}})"), "training.seed"));
  CHECK(contains(refusal(R"({"training": {"warmup": -1}})"), "training.warmup"));
  CHECK(contains(refusal(R"({"training": {"beta2": 1.0}})"), "training.beta2"));
  CHECK(contains(refusal(R"({"data": {"train_limit": -5}})"), "data.train_limit"));
  CHECK(contains(refusal(R"({"data": {"eval_windows": -1}})"), "data.eval_windows"));
  CHECK(contains(refusal(R"({"data": {"dataset": ""}})"), "data.dataset"));
  CHECK(contains(refusal(R"({"data": {"validation_fraction": 0.7}})"), "data.validation_fraction"));
  CHECK(contains(refusal(R"({"data": {"validation_fraction": 0}})"), "data.validation_fraction"));

  // validate() on a value built in code says the same before any data is read.
  RunConfig c;
  c.model.heads = 5;
  CHECK(contains(error_of([&] { c.validate(); }), "heads 5 must divide dim 64"));
  c = RunConfig{};
  c.training.steps = 0;
  CHECK(contains(error_of([&] { c.validate(); }), "training.steps"));
  CHECK(error_of([] { RunConfig{}.validate(); }).empty());
  CHECK(error_of([] { unusual_config().validate(); }).empty());
}

TEST_CASE("parameter count from the config = the built model's, every registered mode and preset") {
  for (const std::string& preset : run_preset_names())
    for (ResidualMode mode : all_residual_modes()) {
      CAPTURE(preset);
      CAPTURE(residual_mode_name(mode));
      MicroLMConfig c = run_preset(preset).model;
      c.mode = mode;
      const int64_t built = MicroLM(c).parameter_count();
      CHECK(c.parameter_count() == built);
      CHECK(estimate_memory(c, 0).parameters == 4.0 * static_cast<double>(built));  // float32
    }
}

TEST_CASE("presets: micro is the reference run, small and base are the benchmark's models") {
  CHECK(run_preset_names() == std::vector<std::string>{"micro", "mini", "small", "base"});
  RunConfig micro = run_preset("micro");
  CHECK(micro.preset == "micro");
  micro.preset.clear();  // the name is a label; the numbers are the reference run's
  CHECK(to_json(micro) == to_json(RunConfig{}));
  CHECK(MicroLM(run_preset("micro").model).parameter_count() ==
        140096);  // the reference's rd_attnres count
  const RunConfig small = run_preset("small");
  CHECK((small.model.vocab == 512 && small.model.dim == 256 && small.model.layers == 8 &&
         small.model.heads == 8 && small.model.kv_heads == 8 && small.model.seq_len == 256 &&
         small.model.expansion == 3));
  CHECK(small.training.batch == 8);
  const RunConfig base = run_preset("base");
  CHECK((base.model.vocab == 50304 && base.model.dim == 768 && base.model.layers == 12 &&
         base.model.heads == 12 && base.model.kv_heads == 12 && base.model.seq_len == 256 &&
         base.model.expansion == 4));
  CHECK(base.training.batch == 4);
  for (const std::string& name : run_preset_names())
    CHECK(error_of([&] { run_preset(name).validate(); }).empty());
  const std::string e = error_of([] { run_preset("huge"); });
  CHECK(contains(e, "huge"));
  CHECK(contains(e, "micro, mini, small or base"));
}

TEST_CASE("checkpoint metadata (model + training) reads back as a run config") {
  // What a training checkpoint of a MicroLM stores (Trainer::config_json): no data section.
  json::Value v;
  v["model"] = model_json(unusual_config().model);
  v["training"] = training_json(unusual_config().training);
  const RunConfig back = run_config_from_json(v, "ckpt");
  CHECK(model_json(back.model) == model_json(unusual_config().model));
  CHECK(training_json(back.training) == training_json(unusual_config().training));
}

TEST_CASE("protocol defaults and the arms' configs") {
  const RunConfig parity = protocol_run_config("parity");
  CHECK(parity.training.steps == 30);
  CHECK(parity.data.train_limit == 120000);
  CHECK(parity.data.eval_limit == 8000);
  CHECK(!parity.data.eval_full);
  CHECK(!parity.data.full_byte_alphabet);  // the reference's tokenizer, byte for byte
  const RunConfig paired = protocol_run_config("paired");
  CHECK(paired.training.steps == 1000);
  CHECK(paired.training.schedule.kind == Schedule::Kind::warmup_cosine);
  CHECK(paired.training.schedule.warmup_steps == 50);
  CHECK(paired.training.adamw.decay == DecayPolicy::matrices_only);
  CHECK(paired.training.init == InitScheme::identical);
  CHECK((paired.data.train_limit == 0 && paired.data.eval_limit == 0 && paired.data.eval_full));
  CHECK(paired.data.full_byte_alphabet);  // any other tokenizer holds every byte
  CHECK(contains(error_of([] { protocol_run_config("sideways"); }), "sideways"));
  const RunConfig arm = arm_run_config(paired, residual_mode("block_attnres"), 7);
  CHECK(arm.model.mode == residual_mode("block_attnres"));
  CHECK(arm.training.seed == 7);

  ReproduceOptions o;
  o.config.model.heads = 5;
  CHECK(contains(error_of([&] { check_reproduce_options(o); }), "heads 5"));
  o = ReproduceOptions{};
  o.config.data.dataset = "tiny-shakespeare";
  CHECK(contains(error_of([&] { check_reproduce_options(o); }), "data.dataset"));
  o = ReproduceOptions{};
  o.seeds.clear();
  CHECK(contains(error_of([&] { check_reproduce_options(o); }), "--seeds"));
}

TEST_CASE("the resume key changes when any setting of the run changes") {
  ReproduceOptions base;
  base.config = unusual_config();
  base.config.data.dataset = "wikitext-2";
  const std::string sha = "abc";
  const json::Value key = reproduce_resume_key(base, sha);

  // One change per setting the JSON mapping writes.
  using Change = std::function<void(RunConfig&)>;
  const std::vector<Change> changes{
      [](RunConfig& c) { c.preset = "small"; },
      [](RunConfig& c) { c.model.vocab = 301; },
      [](RunConfig& c) { c.model.dim = 96; },
      [](RunConfig& c) { c.model.layers = 4; },
      [](RunConfig& c) { c.model.heads = 3; },
      [](RunConfig& c) { c.model.kv_heads = 1; },
      [](RunConfig& c) { c.model.seq_len = 48; },
      [](RunConfig& c) { c.model.expansion = 3; },
      [](RunConfig& c) { c.model.norm = Norm::Kind::rms; },
      [](RunConfig& c) { c.model.norm_eps = 1e-6; },
      [](RunConfig& c) { c.model.ffn = FeedForward::Kind::swiglu; },
      [](RunConfig& c) { c.model.rope = true; },
      [](RunConfig& c) { c.model.bias = false; },
      [](RunConfig& c) { c.model.learned_positions = false; },
      [](RunConfig& c) { c.model.tied_head = true; },
      [](RunConfig& c) { c.model.attnres_block_size = 2; },
      [](RunConfig& c) { c.model.ffn_hidden = 0; },
      [](RunConfig& c) { c.model.rope_theta = 10000.0; },
      [](RunConfig& c) { c.training.precision = MatmulPrecision::float32; },
      [](RunConfig& c) { c.training.steps = 78; },
      [](RunConfig& c) { c.training.batch = 6; },
      [](RunConfig& c) { c.training.clip = 0.0; },
      [](RunConfig& c) { c.training.adamw.lr = 2e-3; },
      [](RunConfig& c) { c.training.adamw.beta1 = 0.9; },
      [](RunConfig& c) { c.training.adamw.beta2 = 0.999; },
      [](RunConfig& c) { c.training.adamw.eps = 1e-8; },
      [](RunConfig& c) { c.training.adamw.weight_decay = 0.0; },
      [](RunConfig& c) { c.training.adamw.decay = DecayPolicy::all; },
      [](RunConfig& c) { c.training.schedule.kind = Schedule::Kind::constant; },
      [](RunConfig& c) { c.training.schedule.warmup_steps = 8; },
      [](RunConfig& c) { c.training.schedule.min_lr_ratio = 0.0; },
      [](RunConfig& c) { c.training.init = InitScheme::parity; },
      [](RunConfig& c) { c.training.sequential = false; },
      // accum changes which windows make up a step (the global batch is ranks x accum x batch)
      [](RunConfig& c) { c.training.accum = 1; },
      [](RunConfig& c) { c.data.dataset = "tiny-shakespeare"; },
      [](RunConfig& c) { c.data.validation_fraction = 0.1; },
      [](RunConfig& c) { c.data.full_byte_alphabet = true; },
      [](RunConfig& c) { c.data.train_limit = 0; },
      [](RunConfig& c) { c.data.eval_limit = 0; },
      [](RunConfig& c) { c.data.eval_windows = 32; },
      [](RunConfig& c) { c.data.eval_full = false; },
  };
  std::set<std::string> all, covered;
  leaf_paths(to_json(base.config), "", all);
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    ReproduceOptions o = base;
    changes[i](o.config);
    const json::Value changed = reproduce_resume_key(o, sha);
    CHECK(!(changed == key));
    // A key written only when it differs from its default (omitted_at_default) may be absent.
    const json::Value mine = to_json(o.config), theirs = to_json(base.config);
    for (const std::string& path : all) {
      const json::Value *a = at_path(mine, path), *b = at_path(theirs, path);
      if ((a == nullptr) != (b == nullptr) || (a && !(*a == *b))) covered.insert(path);
    }
  }
  // Every setting but the two the arms set themselves (the mode per arm, the seed per seed) is
  // covered above: a setting added to the mapping without a change here fails this check.
  std::set<std::string> expected = all;
  expected.erase("model.mode");
  expected.erase("training.seed");
  expected.erase("training.zero");            // below: it changes no bit, so not the key either
  expected.erase("training.detect_anomaly");  // below: nor does anomaly mode
  expected.erase("training.overlap");         // below: nor does overlap
  CHECK(covered == expected);

  // The arm's mode and the seed do not change the key: the state records results per arm and seed.
  ReproduceOptions o = base;
  o.config.model.mode = residual_mode("standard");
  o.config.training.seed = 1234;
  CHECK(reproduce_resume_key(o, sha) == key);
  // Nor does ZeRO-1 (where AdamW's moments live; the same bits: tests/mpi_train.sh).
  o = base;
  o.config.training.zero = 0;
  CHECK(!(to_json(o.config) == to_json(base.config)));
  CHECK(reproduce_resume_key(o, sha) == key);
  // Nor does overlap (when the sum over ranks runs; the same bits: tests/mpi_train.sh).
  o = base;
  o.config.training.overlap = true;
  CHECK(!(to_json(o.config) == to_json(base.config)));
  CHECK(reproduce_resume_key(o, sha) == key);
  // Nor does anomaly mode (it changes no value, only what a failure says).
  o = base;
  o.config.training.detect_anomaly = false;
  CHECK(!(to_json(o.config) == to_json(base.config)));
  CHECK(reproduce_resume_key(o, sha) == key);
  // The run's identity beyond the config does.
  o = base;
  o.protocol = "paired";
  CHECK(!(reproduce_resume_key(o, sha) == key));
  CHECK(!(reproduce_resume_key(base, "abd") == key));
}

// Each setting is one row of run_config_settings(); everything else about it is derived. For
// every row: its key in to_json and in the keys the reader accepts, a flag of `train` (in --help,
// with the doc), and a value away from its default that reaches the config through that flag and
// comes back from the JSON. A row added to the table is checked here without a line of this test.
TEST_CASE("every setting appears in the JSON, the reader's keys, train's flags and --help") {
  const RunConfig away = unusual_config();
  dg::cli::Flags f("train", "test");
  dg::cli::add_run_config_flags(f, {{"", RunConfig{}}});
  const std::string help = f.help();
  std::vector<std::string> words{"depthgrad", "train"};
  std::set<std::string> names;
  for (const Setting<RunConfig>& row : run_config_settings()) {
    INFO(row.name());
    CHECK(names.insert(row.name()).second);  // one row per setting
    // In the JSON: at its default too, unless it is written only away from it.
    CHECK((to_json(RunConfig{}).at(row.section).find(row.key) != nullptr) != row.omit_default);
    REQUIRE(to_json(away).at(row.section).find(row.key) != nullptr);
    const auto& keys = run_config_keys();
    bool listed = false;
    for (const auto& [section, section_keys] : keys)
      for (const std::string& key : section_keys)
        listed = listed || section + "." + key == row.name();
    CHECK(listed);
    CHECK(contains(help, "--" + row.flag_name()));
    REQUIRE(!(row.get(away) == row.get(RunConfig{})));  // unusual_config() changes every setting
    words.push_back("--" + row.flag_name() + "=" + dg::cli::setting_text(row, away));
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  REQUIRE(f.parse(static_cast<int>(argv.size()), argv.data(), 2));
  RunConfig through_flags;
  dg::cli::apply_run_config_flags(f, through_flags);
  through_flags.preset = away.preset;
  CHECK(json::dump(to_json(through_flags)) == json::dump(to_json(away)));
  CHECK(to_json(run_config_from_json(to_json(through_flags))) == to_json(away));
}

#ifdef DG_SOURCE_DIR
// The "Run configuration" table of train/lm/README.md is checked against the settings table: for
// each row the line "| `section.key` | type | `default` | doc |", the default being what
// to_json(RunConfig{}) writes and the doc the row's, word for word; and no README row for a key
// that is not a setting. A row added to run_config_settings() fails here until the README has
// its line (the failure prints it).
TEST_CASE("train/lm/README.md has each setting's row: type, default and doc from the table") {
  const std::string readme = dg::read_file(std::string(DG_SOURCE_DIR) + "/train/lm/README.md");
  std::set<std::string> settings;
  for (const Setting<RunConfig>& row : run_config_settings()) {
    settings.insert(row.name());
    const std::string line = "| `" + row.name() + "` | " + setting_type_name(row.type) + " | `" +
                             json::dump(row.get(RunConfig{})) + "` | " + row.doc + " |";
    INFO("train/lm/README.md needs the line\n" << line);
    CHECK(contains(readme, "\n" + line + "\n"));
  }
  for (size_t at = readme.find("\n| `"); at != std::string::npos;
       at = readme.find("\n| `", at + 1)) {
    const size_t end = readme.find('`', at + 4);
    const std::string name = readme.substr(at + 4, end - at - 4);
    if (name.rfind("model.", 0) == 0 || name.rfind("training.", 0) == 0 ||
        name.rfind("data.", 0) == 0) {
      INFO("README row " << name);
      CHECK(settings.count(name) == 1);
    }
  }
}
#endif
