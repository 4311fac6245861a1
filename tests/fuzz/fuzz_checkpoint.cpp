// Fuzz target: weights and training checkpoints (train/checkpoint.h, Trainer::load_checkpoint)
// on arbitrary bytes, for a tiny micro-LM (vocab 8, dim 4, one layer). Every input is written to
// a temporary file and loaded by a fresh Trainer (sequential data, so the data position is
// used); a load that succeeds is followed by one training step, which must not read out of
// bounds whatever step, position or RNG state the file held. load_weights gets the same bytes.
// It does not compare loaded values (tests/test_trainer.cpp checks resume bit for bit).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/fuzz_checkpoint_model.h"
#include "tests/fuzz/fuzz_common.h"
#include "train/checkpoint.h"
#include "train/lm/micro_lm_training.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dg;
  static const std::string path =
      (std::filesystem::temp_directory_path() /
       ("dg-fuzz-checkpoint-" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  const std::string_view bytes = fuzz::as_text(data, size);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  struct RemoveAtEnd {
    const std::string& path;
    ~RemoveAtEnd() { std::filesystem::remove(path); }
  } remove_at_end{path};

  MicroLMTrainer trainer(fuzz::tiny_config(), fuzz::tiny_train_ids());
  if (fuzz::accepted(path, [&] { trainer.load_checkpoint(path); })) {
    try {
      trainer.train_step();
    } catch (const std::exception&) {
      // A loaded checkpoint may hold weights that diverge; that is the run's problem, not the
      // reader's. Out-of-bounds reads are what ASan watches for here.
    }
  }

  SafetensorsFile file;
  if (!fuzz::accepted(path, [&] { file = parse_safetensors(bytes, path); })) return 0;
  MicroLM model(fuzz::tiny_config().model, DType::f32);
  fuzz::accepted(path, [&] { load_weights(file, path, model); });
  return 0;
}
