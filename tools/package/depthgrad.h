// depthgrad: the framework's public API in one include. Installed as <depthgrad/depthgrad.h>;
// each header below can also be included alone (<depthgrad/tensor/tensor.h>: installed, the
// includes below read "depthgrad/tensor/tensor.h"). It names no model: the language model built
// on the framework (MicroLM, generation, tokenizer, HF and GGUF interop) is <depthgrad/lm.h> and
// the target depthgrad::lm. The experiments and the CLI are not part of the library.
//
// A program that builds on depthgrad (see tools/example/ for a whole one), in one of three ways:
//   find_package(depthgrad CONFIG REQUIRED)    # the installed package (cmake --install)
//   FetchContent_MakeAvailable(depthgrad)      # or add_subdirectory: the source tree, built inside
//   target_link_libraries(app PRIVATE depthgrad::depthgrad)
// or without CMake: c++ app.cpp $(pkg-config --cflags --libs depthgrad).
#pragma once

// Tensors: dtypes f32/f64/i32/i64, shapes, strided views over shared storage.
//   dg::Tensor x = dg::Tensor::from_vector({1, 2, 3, 4}, {2, 2}, dg::DType::f64);
#include "tensor/tensor.h"
// Factories and printing, as torch's: dg::manual_seed(0); std::cout << dg::randn({2, 3});
#include "tensor/factory.h"
#include "tensor/print.h"
// Thread control (one setting drives OpenMP and OpenBLAS): dg::set_threads(2);
#include "tensor/threads.h"

// Autograd: the tape and its one backward contract (a backward accumulates into, or writes all
// of, each input's gradient), and every differentiable op (add, matmul, linear, softmax,
// cross_entropy, rms_norm, attention_heads, ...).
//   dg::Tensor loss = dg::sum(dg::mul(x, x)); dg::backward(loss); x.grad();
#include "autograd/ops.h"
#include "autograd/tape.h"
// The public gradient checker: float64 inputs, random-weighted loss, central differences.
//   auto r = dg::gradcheck("my_op", [](const std::vector<dg::Tensor>& in) { return my_op(in[0]); },
//   {x});
#include "autograd/gradcheck.h"

// Modules: a named parameter registry with flat parameter/gradient buffers, and layers.
//   dg::Linear layer(4, 2); layer.init_default(); dg::Tensor y = layer.forward(x);
#include "nn/layers.h"
// Recurrent layers, torch.nn's: dg::LSTM lstm({.input_size = 8, .hidden_size = 16}); auto r =
// lstm.forward(x);
#include "nn/recurrent.h"
// torch.nn.init's initialisers, and containers: dg::init::xavier_uniform_(w);
//   dg::Sequential net(std::make_unique<dg::Linear>(2, 16), dg::silu,
//   std::make_unique<dg::Linear>(16, 1));
#include "nn/containers.h"
#include "nn/init.h"
#include "nn/module.h"
// Convolutional networks: Conv1d, Conv2d, ConvTranspose2d, the pools, Flatten, BatchNorm1d/2d
// (running statistics as module buffers) and GroupNorm, named as torch.nn's.
#include "nn/vision_layers.h"
// torch.nn's transformer encoder: MultiheadAttention, TransformerEncoderLayer, TransformerEncoder
//   dg::TransformerEncoderLayer layer({.d_model = 256, .nhead = 8, .batch_first = true});
#include "nn/transformer.h"
// A Linear's frozen weight stored in bf16 or int8 (a LoRA base, an inference model):
//   dg::quantize_frozen(model, dg::QuantFormat::int8);
#include "nn/quantize.h"

// Training: AdamW, Adam and SGD over a module or parameter groups, clipping, schedule objects;
// datasets, samplers and loaders; the training loop of any module with any optimiser (resume,
// accumulation, ranks).
//   dg::AdamW opt(model, dg::AdamWConfig{.lr = 1e-3}); opt.zero_grad(); ...; opt.step();
//   dg::Trainer trainer(model, dataset, dg::Sampler::shuffled(dataset.size(), 1), loss, settings,
//   opt);
#include "train/dataset.h"
// Examples made on request (torch's map-style Dataset; each example's random draws keyed by seed,
// epoch and index), the loader's worker threads, and torchvision's transforms.
//   namespace T = dg::transforms;
//   dg::FashionMNIST train(data.train, T::Compose({T::RandomCrop(28, {.padding = 2}),
//                                                   T::RandomHorizontalFlip(), T::ToTensor()}));
//   dg::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .num_workers = 2});
#include "train/data/example.h"
#include "train/data/prefetch.h"
#include "train/data/transform.h"
#include "train/data/transforms.h"
// Data sets read from files: IDX (raw or gzip'd) and Fashion-MNIST from Debian's package; PNG and
// JPEG images to uint8 [C, H, W] (torchvision.io.read_image), write_png, and torchvision's
// ImageFolder (a class per subfolder).
//   dg::FashionMnist data = dg::load_fashion_mnist();  // data.train.images [60000, 1, 28, 28]
//   dg::ImageFolder pets("pets/train", {.mode = dg::ImageReadMode::rgb});  // {image, label}
#include "train/data/fashion_mnist.h"
#include "train/data/image_folder.h"
#include "train/io/idx.h"
#include "train/io/image.h"
// Tables from CSV/TSV files (one-hot categories, class indices, missing values refused or filled,
// standardisation), and parts of a dataset (Subset; random_split, torch's split for a seed).
//   dg::CsvDataset data = dg::CsvDataset::read("t.csv", {.label = "y", .categorical = {"c"}});
//   std::vector<dg::Subset> parts = dg::random_split(data, {0.8, 0.2}, &generator);
#include "train/data/csv_dataset.h"
#include "train/data/subset.h"
#include "train/io/csv.h"
#include "train/optim.h"
#include "train/trainer.h"
#include "train/training_config.h"
// Ctrl-C and SIGTERM as a flag the loop's step callback checks (stop_if_requested), so a run
// stops at a step boundary, saves its checkpoint and resumes later.
#include "train/stop.h"
// Checkpoints (safetensors): weights, training checkpoints, and any named set of tensors.
//   dg::save_weights("m.safetensors", model); dg::load_weights("m.safetensors", model);
//   dg::save_tensors("t.safetensors", {{"x", x}}); auto tensors =
//   dg::load_tensors("t.safetensors");
#include "train/checkpoint.h"
// The process group (data parallelism): dg::World world; then Trainer(..., &world.collectives())
// trains over MPI ranks when the program links depthgrad::mpi (find_package(depthgrad COMPONENTS
// mpi), pkg-config depthgrad-mpi) and is started by mpirun or srun; otherwise, from the same
// source, it is the group of one process.
#include "train/dist/world.h"
