// A folder of images, one subfolder per class, as torchvision.datasets.ImageFolder:
//   root/<class>/**/<file>.png|.jpg|.jpeg  ->  example {image, label}
// classes are the subfolders' names sorted (class_to_idx maps each to its label), and the files
// are in torchvision's make_dataset order: class by class, the class's folders (walked
// recursively, symbolic links followed) sorted by their path, each folder's files by name.
// Example i is {image uint8 [C, H, W] through `transform`, label int64 0-dim}; the image is
// decoded by dg::read_image (train/io/image.h) in `mode`: rgb by default, equal to torchvision's
// default loader (PIL's .convert("RGB")) on every 8-bit PNG and every JPEG; gray is read_image's
// grey (see image.h for how it differs from PIL's .convert("L")).
//
// Only .png, .jpg and .jpeg (any case) are decoded; torchvision's other extensions (.ppm .bmp
// .pgm .tif .tiff .webp) are left out as torchvision leaves out files of unknown extensions.
// Not here: a loader of one's own (is_valid_file, loader=), caching of decoded images.
//   dg::ImageFolder data("pets/train", {.mode = dg::ImageReadMode::rgb, .transform = to_float});
//   data.classes();                      // {"cat", "dog"}
//   dg::Example e = data.at(0);           // e[0] [3, H, W] (after the transform), e[1] label
//
// Errors (std::runtime_error naming the folder or file): a missing root, a root with no class
// folder, a class folder with no .png/.jpg/.jpeg file (torchvision's FileNotFoundError "Found no
// valid file for the classes ..."). An image that cannot be decoded: get() throws naming it (a
// loader adds the example's index); with skip_invalid the constructor decodes every file once
// (fully, so a truncated tail is caught too), leaves out the ones that fail, keeps their paths and
// reasons (skipped()) and prints one line on stderr saying how many.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "train/data/example.h"
#include "train/data/transform.h"
#include "train/io/image.h"

namespace dg {

struct ImageFolderOptions {
  ImageReadMode mode = ImageReadMode::rgb;  // unchanged is allowed only if all files agree
  transforms::Transform transform = {};     // applied to the uint8 [C, H, W] image
  // The label from the class index (torchvision's target_transform); empty: the index itself.
  std::function<int64_t(int64_t)> target_transform = {};
  bool skip_invalid = false;  // decode every file in the constructor and leave out bad ones
};

class ImageFolder final : public MapDataset {
 public:
  struct Sample {
    std::string path;
    int64_t class_index = 0;
  };
  struct SkippedFile {
    std::string path;
    std::string reason;  // the decoder's message
  };

  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // {transform(image), label}. Throws read_image's error (naming the file) when the image cannot
  // be read; a loader adds the example's index ("dataset example I: ...").
  Example get(int64_t index, ExampleRng& rng) const override;

  const std::string& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  const std::vector<Sample>& samples() const { return samples_; }       // torchvision's .samples
  const std::vector<SkippedFile>& skipped() const { return skipped_; }  // skip_invalid only
  const ImageFolderOptions& options() const { return options_; }

  // The extensions decoded (lower case, with the dot): ".png", ".jpg", ".jpeg".
  static const std::vector<std::string>& extensions();

 private:
  void leave_out_unreadable(std::vector<int64_t>& counts);

  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<Sample> samples_;
  std::vector<SkippedFile> skipped_;
};

}  // namespace dg
