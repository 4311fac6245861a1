// A classifier on a synthetic dataset: three interleaved spirals in the plane, an MLP with dropout
// trained on cross-entropy by the generic loop (dg::Trainer over a TensorDataset in shuffled
// epochs, AdamW with a cosine schedule), then accuracy and held-out loss in eval mode (dropout
// off). Half-way it saves a training checkpoint; a freshly built model and Trainer resume from it
// to the same bits as the run never stopped, dropout's random masks included.
// Exits non-zero unless the held-out accuracy passes 90% and the resumed run is bit-identical.
// Data, model and training all in one file; no hand-written loop (quickstart.cpp has one).
// Over ranks: `mpirun -np N classifier` (built with the package's component mpi) trains each step's
// global batch of N × accum × 64 examples on N processes; rank 0 alone prints. Without dropout
// (--dropout 0) that gives the bits of one process at --accum N; with dropout each rank draws its
// masks from its own generator, so the bits follow the layout (as the Trainer documents).
// --log-steps 1 prints every step's loss (17 digits); the run ends with its weights' checksum.
//   classifier [--steps 1500] [--accum 1] [--dropout 0.1] [--min-accuracy 0.9] [--log-steps 0]
#include <depthgrad/depthgrad.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

// --name value pairs over `flags` (the defaults); refuses an unknown name or a missing value.
std::map<std::string, double> parse_flags(int argc, char** argv,
                                          std::map<std::string, double> flags) {
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || !flags.count(name.substr(2)) || i + 1 >= argc)
      throw std::invalid_argument("unknown flag or missing value: '" + name +
                                  "' (flags: --steps N --accum K --dropout P --min-accuracy A "
                                  "--log-steps 0|1)");
    flags[name.substr(2)] = std::stod(argv[i + 1]);
  }
  return flags;
}

// n points per class on `classes` spiral arms with a little noise: fields x [n·classes, 2]
// float32 and labels [n·classes] int64 (what cross_entropy takes, as torch).
dg::TensorDataset spirals(int64_t n, int64_t classes, dg::TorchGenerator& gen) {
  std::vector<float> xs;
  std::vector<int64_t> ys;
  const dg::Tensor noise = dg::randn({n * classes, 2}, dg::DType::f32, &gen);
  for (int64_t c = 0; c < classes; ++c)
    for (int64_t i = 0; i < n; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(n);
      const double angle = 4.0 * r + 2.0 * M_PI * static_cast<double>(c) / classes;
      const float* e = noise.data<float>() + 2 * (c * n + i);
      xs.push_back(static_cast<float>(r * std::cos(angle) + 0.02 * e[0]));
      xs.push_back(static_cast<float>(r * std::sin(angle) + 0.02 * e[1]));
      ys.push_back(c);
    }
  return dg::TensorDataset(
      {dg::Tensor::from_vector(xs, {n * classes, 2}), dg::Tensor::from_ids(ys, {n * classes})});
}

std::unique_ptr<dg::Sequential> make_model(double dropout) {
  return std::make_unique<dg::Sequential>(
      std::make_unique<dg::Linear>(2, 64), dg::relu, std::make_unique<dg::Dropout>(dropout),
      std::make_unique<dg::Linear>(64, 64), dg::relu, std::make_unique<dg::Dropout>(dropout),
      std::make_unique<dg::Linear>(64, 3));
}

// The mean cross-entropy of a batch (fields: x, labels).
dg::Tensor loss(dg::Sequential& model, const dg::Batch& batch) {
  return dg::cross_entropy(model(batch[0]), batch[1]);
}

// The share of rows whose largest logit is the label (argmax gives int64 indices), in eval mode.
double accuracy(dg::Sequential& net, const dg::TensorDataset& data) {
  dg::NoGradGuard no_grad;
  net.eval();  // dropout off
  const dg::Tensor predicted = dg::argmax(net(data.tensors()[0]), 1);
  // (predicted == labels).float().mean()
  const dg::Tensor hits = dg::eq(predicted, dg::to_dtype(data.tensors()[1], dg::DType::i64));
  return dg::mean(dg::to_dtype(hits, dg::DType::f32)).item();
}

int run(int argc, char** argv, dg::Collectives& world) {
  const auto flags = parse_flags(
      argc, argv,
      {{"steps", 1500}, {"accum", 1}, {"dropout", 0.1}, {"min-accuracy", 0.9}, {"log-steps", 0}});
  const bool root = world.rank() == 0;
  dg::TorchGenerator data_gen(1);
  const dg::TensorDataset train = spirals(300, 3, data_gen), test = spirals(100, 3, data_gen);

  const double dropout = flags.at("dropout");
  // The loop's settings: 1500 steps of 64 examples, no clipping (clip = 0). The seed names the
  // sampler's stream; checkpoints record it and a resume checks it. The optimiser (AdamW with a
  // little weight decay) and its schedule (75 warm-up steps, a twentieth, then cosine decay to a
  // tenth) are the caller's objects, made for each model below. With accum K (or ranks) a step
  // takes K micro-batches of 64.
  const dg::TrainingConfig settings{.steps = static_cast<int64_t>(flags.at("steps")),
                                    .batch = 64,
                                    .accum = static_cast<int64_t>(flags.at("accum")),
                                    .clip = 0,
                                    .seed = 1};
  const int64_t warmup = std::max<int64_t>(1, settings.steps / 20);
  const dg::AdamWConfig adamw{.lr = 1e-2, .weight_decay = 1e-4};
  dg::json::Value model_config;  // the model's description, stored in checkpoints and compared
  model_config["dropout"] = dropout;
  // 900 examples in shuffled epochs of 14 batches (the tail of 4 dropped, as drop_last=True).
  const auto sampler = [&] { return dg::Sampler::shuffled(train.size(), settings.seed); };

  dg::manual_seed(0);  // the weights' draws, then dropout's masks: the default generator
  std::unique_ptr<dg::Sequential> net = make_model(dropout);
  dg::AdamW optimizer(*net, adamw);
  dg::CosineAnnealingLR schedule(optimizer, settings.steps, warmup, /*min_lr_ratio=*/0.1);
  dg::Trainer trainer(*net, train, sampler(), loss, settings, optimizer, &schedule, model_config,
                      &world);
  const bool every_step = flags.at("log-steps") != 0;
  const auto progress = [&](const dg::StepLog& log) {
    if (root && every_step)
      std::printf("step %lld loss %.17g\n", static_cast<long long>(log.step), log.loss);
    else if (root && log.step % 300 == 0)
      std::printf("step %4lld  loss %.4f  lr %.5f\n", static_cast<long long>(log.step), log.loss,
                  log.lr);
  };
  if (root)
    std::printf("%d rank(s) x accum %lld x batch 64 = %lld examples per step\n", world.size(),
                static_cast<long long>(settings.accum),
                static_cast<long long>(trainer.global_batch()));
  // Half-way, a training checkpoint: weights, AdamW's moments and step count, the step, the
  // sampler's position and the default generator (the dropout masks still to come). In the
  // temporary folder, under a name of its own (rank 0's: every rank reads the one file): two runs
  // at once must not share the file.
  const std::string name =
      "depthgrad_classifier_" + std::to_string(std::random_device{}()) + ".safetensors";
  const std::string path =
      world.all_gather((std::filesystem::temp_directory_path() / name).string())[0];
  trainer.run(settings.steps / 2, progress);
  trainer.save_checkpoint(path);
  trainer.run(settings.steps, progress);

  const double train_accuracy = accuracy(*net, train), test_accuracy = accuracy(*net, test);
  const double test_loss = dg::evaluate_loss(*net, test, loss);
  if (root)
    std::printf("accuracy: train %.3f, held out %.3f; held-out cross-entropy %.4f\n",
                train_accuracy, test_accuracy, test_loss);

  // Resume: a freshly built model (other weights) and Trainer load the checkpoint and finish.
  dg::manual_seed(7);
  std::unique_ptr<dg::Sequential> fresh = make_model(dropout);
  dg::AdamW fresh_optimizer(*fresh, adamw);
  dg::CosineAnnealingLR fresh_schedule(fresh_optimizer, settings.steps, warmup, 0.1);
  dg::Trainer resumed(*fresh, train, sampler(), loss, settings, fresh_optimizer, &fresh_schedule,
                      model_config, &world);
  resumed.load_checkpoint(path);
  world.barrier();  // every rank has read the file
  if (root) std::filesystem::remove(path);
  resumed.run();
  const bool same =
      resumed.losses() == trainer.losses() &&
      resumed.parameters().values.to_floats() == trainer.parameters().values.to_floats();
  const bool passed = test_accuracy > flags.at("min-accuracy") && same;
  if (!root) return passed ? 0 : 1;
  std::printf("resumed from step %lld: the same losses and weights bit for bit: %s\n",
              static_cast<long long>(settings.steps / 2), same ? "yes" : "NO");
  std::printf("weights checksum %s\n", dg::parameter_checksum(trainer.parameters()).c_str());
  std::printf(passed ? "example passed\n" : "FAILED\n");
  return passed ? 0 : 1;
}

int main(int argc, char** argv) {
  std::unique_ptr<dg::World> world;
  try {
    // MPI when built with depthgrad::mpi and started by mpirun or srun, else one process. Made
    // here, not before the try: a launch MPI cannot serve (srun without PMI) is refused by a throw.
    world = std::make_unique<dg::World>();
    return run(argc, argv, world->collectives());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classifier: error on rank %d: %s\n", world ? world->rank() : 0, e.what());
    if (world && world->size() > 1) world->abort(1);  // the other ranks may be waiting for this one
    return 1;
  }
}
