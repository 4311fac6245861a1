// ImageFolder over temporary folders of PNGs written by write_png: classes, torchvision's file
// order (checked against torchvision 0.14's ImageFolder over the same tree), labels, the
// transforms, skip_invalid's counts and report, and the errors of bad roots and classes.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/rng.h"
#include "tests/temp_dir.h"
#include "train/data/image_folder.h"
#include "train/dataset.h"
#include "train/io/files.h"
#include "train/io/image.h"

using dg::ImageFolder;
using dg::ImageReadMode;
using dg::Tensor;
using dg::test::TempDir;

namespace {

// A grey 2 x 3 image whose every pixel is `value`.
Tensor flat_image(int value) { return Tensor::full({1, 2, 3}, value, dg::DType::u8); }

void put(const TempDir& dir, const std::string& relative, const std::string& bytes) {
  const std::filesystem::path path = dir.path / relative;
  dg::make_dirs(path.parent_path().string());
  dg::write_file_atomic(path.string(), bytes);
}

void put_png(const TempDir& dir, const std::string& relative, int value) {
  put(dir, relative, dg::encode_png(flat_image(value)));
}

// The tree torchvision's order was read from (tools: the same files, ImageFolder("root")):
// [a/Z.png, a/b.PNG, a/pic.bmp, a/z.png, a/x/1.png, a/x-y/2.jpeg, a/x/q/3.png, b/.hidden.png,
//  b/z.png, c/deep/er/0.JPG]. Folders sort by their path ("a/x-y" before "a/x/q"), upper case
// before lower; a/pic.bmp is torchvision's but not decoded here, so it is left out.
const std::vector<std::string> kTree = {"b/z.png",     "a/z.png",       "a/b.PNG",
                                        "a/Z.png",     "a/x/1.png",     "a/x-y/2.jpeg",
                                        "a/x/q/3.png", "b/.hidden.png", "c/deep/er/0.JPG"};
const std::vector<std::string> kOrder = {"a/Z.png",       "a/b.PNG",      "a/z.png",
                                         "a/x/1.png",     "a/x-y/2.jpeg", "a/x/q/3.png",
                                         "b/.hidden.png", "b/z.png",      "c/deep/er/0.JPG"};

void make_tree(const TempDir& dir) {
  for (size_t i = 0; i < kTree.size(); ++i) put_png(dir, "root/" + kTree[i], int(i) * 10);
  put(dir, "root/a/notes.txt", "not an image");
  put_png(dir, "root/a/pic.bmp", 0);
  put(dir, "root/README", "files beside the class folders are not examples");
}

int value_of(const std::string& relative) {
  for (size_t i = 0; i < kTree.size(); ++i)
    if (kTree[i] == relative) return int(i) * 10;
  return -1;
}

doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

template <class F>
std::string stderr_of(F&& fn) {
  TempDir dir("folder-stderr");
  const std::string path = dir.file("stderr.txt");
  std::fflush(stderr);
  const int saved = dup(2);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(file, 2);
  close(file);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  return dg::read_file(path);
}

}  // namespace

TEST_CASE("ImageFolder: classes, torchvision's file order, labels and images") {
  TempDir dir("folder");
  make_tree(dir);
  const std::string root = dir.file("root");
  const ImageFolder data(root, {.mode = ImageReadMode::gray});
  CHECK(data.classes() == std::vector<std::string>{"a", "b", "c"});
  CHECK(data.class_to_idx().at("c") == 2);
  REQUIRE(data.size() == int64_t(kOrder.size()));
  for (size_t i = 0; i < kOrder.size(); ++i) {
    CAPTURE(i);
    CHECK(data.samples()[i].path == root + "/" + kOrder[i]);
    const dg::Example example = data.at(int64_t(i));
    REQUIRE(example.size() == 2);
    CHECK(example[0].shape() == dg::Shape{1, 2, 3});
    CHECK(example[0].dtype() == dg::DType::u8);
    CHECK(example[0].to_vector() == std::vector<double>(6, value_of(kOrder[i])));
    CHECK(example[1].dim() == 0);
    CHECK(example[1].dtype() == dg::DType::i64);
    CHECK(example[1].item<int64_t>() == data.class_to_idx().at(kOrder[i].substr(0, 1)));
  }
  // A root given with a trailing slash names the same files.
  CHECK(ImageFolder(root + "/").samples()[0].path == root + "/" + kOrder[0]);
}

TEST_CASE("ImageFolder: rgb by default, the transform and target_transform, batches") {
  TempDir dir("folder-transform");
  make_tree(dir);
  const ImageFolder rgb(dir.file("root"));
  CHECK(rgb.at(0)[0].shape() == dg::Shape{3, 2, 3});  // grey replicated, as PIL's convert("RGB")
  const dg::transforms::Transform to_float("ToTensor()", [](const Tensor& x, dg::ExampleRng&) {
    return dg::scale(x.to(dg::DType::f32), 1.0 / 255.0);
  });
  const ImageFolder data(dir.file("root"),
                         {.mode = ImageReadMode::gray,
                          .transform = to_float,
                          .target_transform = [](int64_t c) { return 10 * c + 1; }});
  const dg::Example last = data.at(data.size() - 1);
  CHECK(last[0].dtype() == dg::DType::f32);
  CHECK(last[0].to_vector()[0] == doctest::Approx(value_of("c/deep/er/0.JPG") / 255.0));
  CHECK(last[1].item<int64_t>() == 21);
  dg::DataLoader loader(data, dg::DataLoaderOptions{.batch_size = 4});
  int64_t batches = 0, examples = 0;
  for (const dg::Batch& batch : loader) {
    CHECK(batch[0].shape() == dg::Shape{batch[1].size(0), 1, 2, 3});
    examples += batch[1].size(0);
    ++batches;
  }
  CHECK(batches == 3);
  CHECK(examples == data.size());
}

TEST_CASE("ImageFolder: an unreadable file throws at get(), or is skipped and reported") {
  TempDir dir("folder-bad");
  make_tree(dir);
  const std::string png = dg::encode_png(flat_image(7));
  put(dir, "root/b/truncated.png", png.substr(0, png.size() / 2));
  put(dir, "root/c/empty.jpg", "");
  const std::string root = dir.file("root");

  const ImageFolder strict(root, {.mode = ImageReadMode::gray});
  CHECK(strict.size() == int64_t(kOrder.size()) + 2);
  CHECK(strict.skipped().empty());
  // b/.hidden.png, b/truncated.png, b/z.png: the truncated one is example 7.
  CHECK(strict.samples()[7].path == root + "/b/truncated.png");
  CHECK_THROWS_WITH_AS(strict.at(7),
                       contains("image '" + root + "/b/truncated.png': corrupt or truncated PNG"),
                       std::runtime_error);
  dg::Batch batch;  // through a loader's fill: the example's index as well
  const std::vector<int64_t> indices = {6, 7};
  CHECK_THROWS_WITH_AS(strict.fill(indices, batch),
                       contains("dataset example 7: image '" + root + "/b/truncated.png'"),
                       std::runtime_error);

  std::string printed;
  std::unique_ptr<ImageFolder> lenient;
  printed = stderr_of([&] {
    lenient = std::make_unique<ImageFolder>(
        root, dg::ImageFolderOptions{.mode = ImageReadMode::gray, .skip_invalid = true});
  });
  CHECK(lenient->size() == int64_t(kOrder.size()));
  REQUIRE(lenient->skipped().size() == 2);
  CHECK(lenient->skipped()[0].path == root + "/b/truncated.png");
  CHECK(lenient->skipped()[0].reason.find("truncated") != std::string::npos);
  CHECK(lenient->skipped()[1].path == root + "/c/empty.jpg");
  CHECK(lenient->skipped()[1].reason.find("empty file") != std::string::npos);
  CHECK(printed.find("ImageFolder '" + root + "': skipped 2 of 11 files") == 0);
  CHECK(std::count(printed.begin(), printed.end(), '\n') == 1);
  for (int64_t i = 0; i < lenient->size(); ++i) CHECK_NOTHROW(lenient->at(i));
}

TEST_CASE("ImageFolder: a clean folder with skip_invalid prints nothing") {
  TempDir dir("folder-clean");
  make_tree(dir);
  const std::string printed = stderr_of([&] {
    const ImageFolder data(dir.file("root"), {.skip_invalid = true});
    CHECK(data.skipped().empty());
    CHECK(data.size() == int64_t(kOrder.size()));
  });
  CHECK(printed.empty());
}

TEST_CASE("ImageFolder: missing root, no class folder, classes without images") {
  TempDir dir("folder-errors");
  CHECK_THROWS_WITH_AS(ImageFolder(dir.file("nowhere")),
                       contains("the root '" + dir.file("nowhere") + "' is not a folder"),
                       std::runtime_error);
  put(dir, "file_root", "x");
  CHECK_THROWS_WITH_AS(ImageFolder(dir.file("file_root")), doctest::Contains("is not a folder"),
                       std::runtime_error);
  put(dir, "flat/image.png", dg::encode_png(flat_image(1)));  // images but no class folder
  CHECK_THROWS_WITH_AS(ImageFolder(dir.file("flat")),
                       contains("couldn't find any class folder in '" + dir.file("flat") + "'"),
                       std::runtime_error);
  put_png(dir, "classes/cat/1.png", 1);
  put(dir, "classes/dog/readme.txt", "no image here");
  put(dir, "classes/emu/photo.gif", "GIF89a");
  std::filesystem::create_directories(dir.path / "classes/ant");
  CHECK_THROWS_WITH_AS(
      ImageFolder(dir.file("classes")),
      doctest::Contains("found no valid file for the classes ant, dog, emu (the extensions read "
                        "are .png, .jpg, .jpeg)"),
      std::runtime_error);
  // A class whose only file is unreadable is empty once skip_invalid leaves it out.
  put(dir, "skipped/cat/1.png", dg::encode_png(flat_image(1)));
  put(dir, "skipped/dog/1.png", "broken");
  stderr_of([&] {
    CHECK_THROWS_WITH_AS(ImageFolder(dir.file("skipped"), {.skip_invalid = true}),
                         doctest::Contains("classes dog after leaving out 1 unreadable files"),
                         std::runtime_error);
  });
  put_png(dir, "one/cat/1.png", 1);
  const ImageFolder one(dir.file("one"));
  CHECK_THROWS_AS(one.at(1), std::out_of_range);
}

TEST_CASE("ImageFolder: loader workers give the batches of none, JPEGs beside PNGs") {
  TempDir dir("folder-workers");
  const std::string images = std::string(DG_SOURCE_DIR) + "/tests/data/images/";
  for (int i = 0; i < 24; ++i) {  // 7 x 5 images, PNG and JPEG, three classes
    const char* source = i % 3 == 0 ? "jpeg_420.jpg" : i % 3 == 1 ? "rgba.png" : "jpeg_grey.jpg";
    put(dir, "root/c" + std::to_string(i % 3) + "/" + std::to_string(i) + "_" + source,
        dg::read_file(images + source));
  }
  const dg::transforms::Transform noisy("AddNoise()", [](const Tensor& x, dg::ExampleRng& rng) {
    return dg::add_scalar(x.to(dg::DType::f32), rng.uniform());  // a draw per example
  });
  const ImageFolder data(dir.file("root"), {.transform = noisy});
  REQUIRE(data.size() == 24);
  CHECK(data.at(0)[0].shape() == dg::Shape{3, 5, 7});
  const auto epochs = [&](int64_t workers) {
    const dg::TorchGenerator generator(3);
    dg::DataLoader loader(
        data, {.batch_size = 5, .shuffle = true, .generator = &generator, .num_workers = workers});
    std::vector<std::vector<double>> seen;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (const dg::Batch& batch : loader) {
        seen.push_back(batch[0].to_vector());
        seen.push_back(batch[1].to_vector());
      }
    return seen;
  };
  const auto none = epochs(0);
  CHECK(none.size() == 2 * 2 * 5);  // 2 epochs of 5 batches (the last one of 4), 2 fields
  CHECK(epochs(2) == none);
}
