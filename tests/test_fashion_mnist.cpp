// IDX files (raw and gzip'd) and the Fashion-MNIST loader: parsing, every refusal naming the file,
// and the real data set from Debian's package (tools/install-deps.sh installs it): shapes, the
// first labels, class counts, pixel statistics, and refusal of a changed or missing file.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "temp_dir.h"
#include "train/data/fashion_mnist.h"
#include "train/data/transforms.h"
#include "train/io/files.h"
#include "train/io/idx.h"

using namespace dg;

namespace {
// An IDX file of bytes: 0, 0, type, rank, sizes (big-endian), then `elements`.
std::string idx_bytes(uint8_t type, std::vector<uint32_t> sizes, const std::string& elements) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(sizes.size())};
  for (uint32_t s : sizes)
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((s >> shift) & 0xff));
  return out + elements;
}

std::string gzip(const std::string& bytes) {
  z_stream s{};
  REQUIRE(deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&s, bytes.size()) + 32, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  s.avail_in = static_cast<uInt>(bytes.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("IDX: bytes and int32 elements, raw and gzip'd, read to the same tensors") {
  test::TempDir dir("idx");
  const std::string bytes = idx_bytes(0x08, {2, 3}, std::string("\x00\x01\x7f\x80\xfe\xff", 6));
  write_file_atomic(dir.file("a.idx"), bytes);
  write_file_atomic(dir.file("a.idx.gz"), gzip(bytes));
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    const IdxFile f = read_idx_file(dir.file(name));
    CHECK(f.shape == std::vector<int64_t>{2, 3});
    CHECK(idx_to_int64(f).to_vector() == std::vector<double>{0, 1, 127, 128, 254, 255});
    const std::vector<double> unit = idx_bytes_to_unit_float(f).to_vector();
    CHECK(unit.front() == 0.0f);
    CHECK(unit.back() == 1.0f);
    CHECK(unit[2] == static_cast<double>(127.0f / 255.0f));
  }
  const IdxFile ints =
      parse_idx(idx_bytes(0x0C, {2}, std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8)), "ints");
  CHECK(idx_to_int64(ints).to_vector() == std::vector<double>{258, -2});
  CHECK(error_of([&] { idx_bytes_to_unit_float(ints); }).find("not bytes") != std::string::npos);
}

TEST_CASE(
    "IDX: a wrong magic, type, truncation, extra bytes or corrupt gzip is refused naming it") {
  const std::string good = idx_bytes(0x08, {4}, "abcd");
  CHECK(error_of([&] { parse_idx("\x01\x00\x08\x01", "f.idx"); }).find("f.idx: not an IDX") == 0);
  CHECK(error_of([&] {
          parse_idx(idx_bytes(0x0D, {1}, "abcd"), "f.idx");
        }).find("element type 0x0D") != std::string::npos);
  CHECK(error_of([&] { parse_idx(good.substr(0, 6), "f.idx"); }).find("truncated") !=
        std::string::npos);
  CHECK(error_of([&] {
          parse_idx(good.substr(0, good.size() - 1), "f.idx");
        }).find("has 11 bytes; its header (4) says 12") != std::string::npos);
  CHECK(error_of([&] { parse_idx(good + "x", "f.idx"); }).find("has 13 bytes") !=
        std::string::npos);
  CHECK(error_of([&] {
          parse_idx(idx_bytes(0x08, {1u << 30, 1u << 30}, ""), "f.idx");
        }).find("2^40") != std::string::npos);
  std::string zipped = gzip(good);
  CHECK(error_of([&] {
          gunzip_if_compressed(zipped.substr(0, zipped.size() / 2), "f.gz");
        }).find("f.gz: corrupt or truncated gzip") == 0);
  zipped[zipped.size() - 6] ^= 0x55;  // the CRC no longer matches
  CHECK(error_of([&] { gunzip_if_compressed(zipped, "f.gz"); }).find("f.gz: corrupt") == 0);
}

TEST_CASE("Fashion-MNIST: the installed data set, checked and converted") {
  const FashionMnist data = load_fashion_mnist();
  CHECK(data.train.images.shape() == Shape{60000, 1, 28, 28});
  CHECK(data.train.images.dtype() == DType::f32);
  CHECK(data.train.labels.shape() == Shape{60000});
  CHECK(data.test.images.shape() == Shape{10000, 1, 28, 28});
  const int64_t* train_labels = data.train.labels.data<int64_t>();
  const int64_t* test_labels = data.test.labels.data<int64_t>();
  const std::vector<int64_t> train(train_labels, train_labels + 60000);
  const std::vector<int64_t> test(test_labels, test_labels + 10000);
  CHECK(std::vector<int64_t>(train.begin(), train.begin() + 10) ==
        std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  CHECK(std::vector<int64_t>(test.begin(), test.begin() + 10) ==
        std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  std::vector<int64_t> counts(10, 0);
  for (int64_t label : train) ++counts.at(static_cast<size_t>(label));
  CHECK(counts == std::vector<int64_t>(10, 6000));
  // Pixel mean over the training images, 0.2860 as commonly quoted, and image 0's sum (76,247/255).
  const float* px = data.train.images.data<float>();
  double sum = 0, first = 0;
  for (int64_t i = 0; i < data.train.images.numel(); ++i) sum += px[i];
  for (int64_t i = 0; i < 784; ++i) first += px[i];
  CHECK(sum / static_cast<double>(data.train.images.numel()) ==
        doctest::Approx(0.28604).epsilon(1e-4));
  CHECK(first * 255.0 == doctest::Approx(76247.0).epsilon(1e-6));
  CHECK(std::string(FashionMnist::class_names()[9]) == "Ankle boot");
}

TEST_CASE("FashionMNIST: torchvision's dataset, uint8 images through a transform") {
  namespace T = dg::transforms;
  const FashionMnist data = load_fashion_mnist();
  CHECK(data.test.pixels.dtype() == DType::u8);
  CHECK(data.test.pixels.shape() == Shape{10000, 1, 28, 28});
  const FashionMNIST raw(data.test);
  CHECK(raw.size() == 10000);
  const Example first = raw.at(0);
  CHECK(first[0].dtype() == DType::u8);
  CHECK(first[0].shape() == Shape{1, 28, 28});
  CHECK(first[1].dim() == 0);
  CHECK(first[1].item() == 9);
  // ToTensor gives the split's float images bit for bit.
  const FashionMNIST scaled(data.test, T::ToTensor(), 50);
  CHECK(scaled.size() == 50);
  Batch batch;
  const std::vector<int64_t> indices = {3, 17, 49};
  scaled.fill(indices, batch);
  CHECK(batch[0].narrow(0, 0, 1).to_vector() == data.test.images.narrow(0, 3, 1).to_vector());
  CHECK(batch[0].narrow(0, 2, 1).to_vector() == data.test.images.narrow(0, 49, 1).to_vector());
  const int64_t* labels = data.test.labels.data<int64_t>();
  CHECK(batch[1].to_vector() == std::vector<double>{static_cast<double>(labels[3]),
                                                    static_cast<double>(labels[17]),
                                                    static_cast<double>(labels[49])});
  // Augmented: a flip and a crop from the padding change the image, the same (seed, epoch) gives
  // the same batch, another epoch another one.
  const FashionMNIST augmented(
      data.test,
      T::Compose({T::RandomCrop(28, {.padding = 2}), T::RandomHorizontalFlip(), T::ToTensor()}),
      50);
  Batch a, b, c;
  augmented.fill_epoch(indices, {.seed = 1, .epoch = 1}, a);
  augmented.fill_epoch(indices, {.seed = 1, .epoch = 1}, b);
  augmented.fill_epoch(indices, {.seed = 1, .epoch = 2}, c);
  CHECK(a[0].to_vector() == b[0].to_vector());
  CHECK(a[0].to_vector() != c[0].to_vector());
  CHECK(a[0].to_vector() != batch[0].to_vector());
  CHECK_THROWS_WITH_AS(FashionMNIST(data.test, {}, 10001),
                       "FashionMNIST: count 10001 is outside [0, 10000] (or -1 for all)",
                       std::invalid_argument);
}

TEST_CASE("Fashion-MNIST: a missing folder or file, or a changed file, is refused naming it") {
  CHECK(error_of([] {
          load_fashion_mnist("/nonexistent-fashion");
        }).find("folder /nonexistent-fashion does not exist. Install") != std::string::npos);
  test::TempDir dir("fashion");
  CHECK(error_of([&] {
          load_fashion_mnist(dir.path.string());
        }).find("train-images-idx3-ubyte(.gz) is missing") != std::string::npos);
  // A raw file that parses as IDX but is not the published one: refused by its hash.
  write_file_atomic(dir.file("train-images-idx3-ubyte"),
                    idx_bytes(0x08, {1, 28, 28}, std::string(784, '\0')));
  const std::string message = error_of([&] { load_fashion_mnist(dir.path.string()); });
  CHECK(message.find("train-images-idx3-ubyte is not the published file") != std::string::npos);
  CHECK(message.find("expected c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888") !=
        std::string::npos);
  // The environment variable names the default folder.
  ::setenv("DEPTHGRAD_FASHION_MNIST", dir.path.string().c_str(), 1);
  CHECK(fashion_mnist_default_directory() == dir.path.string());
  ::unsetenv("DEPTHGRAD_FASHION_MNIST");
}
