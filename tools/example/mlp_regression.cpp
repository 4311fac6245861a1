// MLP regression: learn z = sin(x)·cos(y) on [-2, 2]² from noisy samples with a three-layer MLP
// trained by the generic loop (dg::Trainer over a TensorDataset in shuffled epochs: AdamW, cosine
// schedule with warm-up, gradient clipping), with a checkpoint saved half-way that a freshly built
// model and Trainer resume from to the same bits as the run never stopped. The same loop then
// trains the same MLP with another optimiser and schedule (SGD with Nesterov momentum, a step
// schedule) for comparison: the optimiser is the caller's choice, not the loop's.
// Exits non-zero unless both held-out errors are small and the resumed run is bit-identical.
// Over ranks: `mpirun -np N mlp_regression` (built with the package's component mpi) trains each
// step's global batch of N × accum × 64 examples on N processes, with the bits of one process at
// --accum N; rank 0 alone prints. --log-steps 1 prints every step's loss (17 digits) and both runs
// end with their weights' checksums, to compare runs bit for bit.
//   mlp_regression [--steps 1200] [--accum 1] [--max-mse 0.002] [--log-steps 0]
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
                                  "' (flags: --steps N --accum K --max-mse X --log-steps 0|1)");
    flags[name.substr(2)] = std::stod(argv[i + 1]);
  }
  return flags;
}

// n samples: inputs [n, 2] uniform on [-2, 2]², targets [n, 1] = sin(x)·cos(y) + noise.
dg::TensorDataset samples(int64_t n, double noise, dg::TorchGenerator& gen) {
  const dg::Tensor inputs = dg::rand({n, 2}, dg::DType::f32, &gen) * 4.0 - 2.0;
  const dg::Tensor eps = dg::randn({n}, dg::DType::f32, &gen);
  std::vector<float> z(n);
  const float* xy = inputs.data<float>();
  for (int64_t i = 0; i < n; ++i)
    z[i] = std::sin(xy[2 * i]) * std::cos(xy[2 * i + 1]) +
           static_cast<float>(noise) * eps.data<float>()[i];
  return dg::TensorDataset({inputs, dg::Tensor::from_vector(z, {n, 1})});
}

std::unique_ptr<dg::Sequential> make_model() {
  return std::make_unique<dg::Sequential>(std::make_unique<dg::Linear>(2, 64), dg::tanh,
                                          std::make_unique<dg::Linear>(64, 64), dg::tanh,
                                          std::make_unique<dg::Linear>(64, 1));
}

// The loss of a batch (fields: inputs, targets): the mean over its examples, as the loop needs.
dg::Tensor mse(dg::Sequential& model, const dg::Batch& batch) {
  return dg::mse_loss(model(batch[0]), batch[1]);
}

// The same MLP from the same initial weights, trained by the same loop with SGD (Nesterov
// momentum), a step schedule and clipping. Returns the held-out mse and the weights' checksum.
std::pair<double, std::string> sgd_baseline(const dg::TensorDataset& train,
                                            const dg::TensorDataset& test,
                                            const dg::TrainingConfig& settings,
                                            dg::Collectives& world) {
  dg::manual_seed(0);
  std::unique_ptr<dg::Sequential> net = make_model();
  dg::SGD optimizer(*net, {.lr = 0.05, .momentum = 0.9, .nesterov = true});
  dg::StepLR schedule(optimizer, /*step_size=*/std::max<int64_t>(1, settings.steps / 3),
                      /*gamma=*/0.5);
  dg::Trainer trainer(*net, train, dg::Sampler::shuffled(train.size(), settings.seed), mse,
                      settings, optimizer, &schedule, {}, &world);
  trainer.run();
  return {dg::evaluate_loss(*net, test, mse), dg::parameter_checksum(trainer.parameters())};
}

int run(int argc, char** argv, dg::Collectives& world) {
  const auto flags = parse_flags(
      argc, argv, {{"steps", 1200}, {"accum", 1}, {"max-mse", 0.002}, {"log-steps", 0}});
  const bool root = world.rank() == 0;
  dg::TorchGenerator data_gen(1);
  const dg::TensorDataset train = samples(2048, 0.05, data_gen), test = samples(512, 0.0, data_gen);

  // The loop's settings: 1200 steps of 64 examples (about 37 epochs), gradients clipped at norm 1.
  // The seed names the sampler's stream; checkpoints record it and a resume checks it. The
  // optimiser and its schedule are objects of their own (below): AdamW at a peak rate of 1e-2, 60
  // warm-up steps (a twentieth) then cosine decay to a tenth. With accum K (or ranks) a step
  // takes K micro-batches of 64.
  const dg::TrainingConfig settings{.steps = static_cast<int64_t>(flags.at("steps")),
                                    .batch = 64,
                                    .accum = static_cast<int64_t>(flags.at("accum")),
                                    .clip = 1.0,
                                    .seed = 1};
  const int64_t warmup = std::max<int64_t>(1, settings.steps / 20);
  const dg::AdamWConfig adamw{.lr = 1e-2, .weight_decay = 0};
  dg::json::Value model_config;  // the model's description, stored in checkpoints and compared
  model_config["hidden"] = 64;
  const auto sampler = [&] { return dg::Sampler::shuffled(train.size(), settings.seed); };

  dg::manual_seed(0);
  std::unique_ptr<dg::Sequential> net = make_model();
  dg::AdamW optimizer(*net, adamw);
  dg::CosineAnnealingLR schedule(optimizer, settings.steps, warmup, /*min_lr_ratio=*/0.1);
  dg::Trainer trainer(*net, train, sampler(), mse, settings, optimizer, &schedule, model_config,
                      &world);
  const bool every_step = flags.at("log-steps") != 0;
  const auto progress = [&](const dg::StepLog& log) {
    if (root && every_step)
      std::printf("step %lld loss %.17g\n", static_cast<long long>(log.step), log.loss);
    else if (root && log.step % 200 == 0)
      std::printf("step %4lld  train mse %.5f  lr %.5f\n", static_cast<long long>(log.step),
                  log.loss, log.lr);
  };
  if (root)
    std::printf("%d rank(s) x accum %lld x batch 64 = %lld examples per step\n", world.size(),
                static_cast<long long>(settings.accum),
                static_cast<long long>(trainer.global_batch()));
  // Half-way, a training checkpoint: weights, AdamW's moments, the step, the sampler's position.
  // In the temporary folder, under a name of its own (rank 0's: every rank reads the one file):
  // two runs at once must not share the file.
  const std::string name =
      "depthgrad_mlp_regression_" + std::to_string(std::random_device{}()) + ".safetensors";
  const std::string path =
      world.all_gather((std::filesystem::temp_directory_path() / name).string())[0];
  trainer.run(settings.steps / 2, progress);
  trainer.save_checkpoint(path);
  trainer.run(settings.steps, progress);
  const double test_mse = dg::evaluate_loss(*net, test, mse);
  const dg::Tensor centred = test.tensors()[1] - dg::mean(test.tensors()[1]);
  if (root)
    std::printf("held-out mse %.5f (the loop: AdamW, cosine; the targets' variance is %.3f)\n",
                test_mse, dg::mean(centred * centred).item());

  // Resume: a freshly built model (other weights) and Trainer load the checkpoint and finish.
  dg::manual_seed(7);
  std::unique_ptr<dg::Sequential> fresh = make_model();
  dg::AdamW fresh_optimizer(*fresh, adamw);
  dg::CosineAnnealingLR fresh_schedule(fresh_optimizer, settings.steps, warmup, 0.1);
  dg::Trainer resumed(*fresh, train, sampler(), mse, settings, fresh_optimizer, &fresh_schedule,
                      model_config, &world);
  resumed.load_checkpoint(path);
  world.barrier();  // every rank has read the file
  if (root) std::filesystem::remove(path);
  resumed.run();
  const bool same =
      resumed.losses() == trainer.losses() &&
      resumed.parameters().values.to_floats() == trainer.parameters().values.to_floats();
  const auto [sgd_mse, sgd_checksum] = sgd_baseline(train, test, settings, world);
  const double max_mse = flags.at("max-mse");
  if (!root) return test_mse < max_mse && sgd_mse < max_mse && same ? 0 : 1;
  std::printf("resumed from step %lld: the same losses and weights bit for bit: %s\n",
              static_cast<long long>(settings.steps / 2), same ? "yes" : "NO");
  std::printf("held-out mse %.5f (the same loop with SGD, Nesterov momentum and StepLR)\n",
              sgd_mse);
  std::printf("weights checksum %s (AdamW), %s (SGD)\n",
              dg::parameter_checksum(trainer.parameters()).c_str(), sgd_checksum.c_str());
  if (!(test_mse < max_mse) || !(sgd_mse < max_mse) || !same) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("example passed\n");
  return 0;
}

int main(int argc, char** argv) {
  std::unique_ptr<dg::World> world;
  try {
    // MPI when built with depthgrad::mpi and started by mpirun or srun, else one process. Made
    // here, not before the try: a launch MPI cannot serve (srun without PMI) is refused by a throw.
    world = std::make_unique<dg::World>();
    return run(argc, argv, world->collectives());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_regression: error on rank %d: %s\n", world ? world->rank() : 0,
                 e.what());
    if (world && world->size() > 1) world->abort(1);  // the other ranks may be waiting for this one
    return 1;
  }
}
