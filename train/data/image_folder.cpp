// torchvision.datasets.ImageFolder over PNG and JPEG files (see image_folder.h).
#include "train/data/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <system_error>

#include "train/io/files.h"

namespace dg {

namespace fs = std::filesystem;

namespace {

std::string join(const std::string& folder, const std::string& name) {
  return !folder.empty() && folder.back() == '/' ? folder + name : folder + "/" + name;
}

bool has_image_extension(const std::string& filename) {
  std::string lower = filename;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const std::string& extension : ImageFolder::extensions())
    if (lower.ends_with(extension)) return true;
  return false;
}

// The names in `folder`, split into folders (symbolic links to folders included, as os.walk's
// is_dir) and everything else, each sorted as Python sorts strings (by code point: UTF-8's byte
// order).
void list_folder(const std::string& folder, std::vector<std::string>& folders,
                 std::vector<std::string>& files) {
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    std::error_code kind_error;
    const std::string name = it->path().filename().string();
    (it->is_directory(kind_error) ? folders : files).push_back(name);
  }
  if (error)
    throw std::runtime_error(
        fmt::format("ImageFolder: cannot list the folder '{}': {}", folder, error.message()));
  std::sort(folders.begin(), folders.end());
  std::sort(files.begin(), files.end());
}

// Every folder under `top` (itself included) as os.walk(top, followlinks=True) visits them; a
// folder reached twice through links is walked once (os.walk would loop for ever).
void walk(const std::string& top, std::set<std::string>& seen, std::vector<std::string>& out) {
  std::error_code error;
  const std::string canonical = fs::canonical(top, error).string();
  if (!error && !seen.insert(canonical).second) return;
  out.push_back(top);
  std::vector<std::string> folders, files;
  list_folder(top, folders, files);
  for (const std::string& name : folders) walk(join(top, name), seen, out);
}

std::string extension_list() {
  std::string list;
  for (const std::string& extension : ImageFolder::extensions())
    list += (list.empty() ? "" : ", ") + extension;
  return list;
}

// torchvision's FileNotFoundError for classes without a file, with our words.
void refuse_empty_classes(const std::string& root, const std::vector<std::string>& classes,
                          const std::vector<int64_t>& counts, const std::string& after) {
  std::string empty;
  for (size_t c = 0; c < classes.size(); ++c)
    if (counts[c] == 0) empty += (empty.empty() ? "" : ", ") + classes[c];
  if (!empty.empty())
    throw std::runtime_error(fmt::format(
        "ImageFolder '{}': found no valid file for the classes {}{} (the extensions read are {})",
        root, empty, after, extension_list()));
}

}  // namespace

const std::vector<std::string>& ImageFolder::extensions() {
  static const std::vector<std::string> list{".png", ".jpg", ".jpeg"};
  return list;
}

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options)
    : root_(std::move(root)), options_(std::move(options)) {
  if (!dir_exists(root_))
    throw std::runtime_error(fmt::format(
        "ImageFolder: the root '{}' is not a folder (it does not exist, or is a file)", root_));
  std::vector<std::string> files;
  list_folder(root_, classes_, files);
  if (classes_.empty())
    throw std::runtime_error(fmt::format(
        "ImageFolder: couldn't find any class folder in '{}' (it should hold one folder per "
        "class, the images inside)",
        root_));
  for (size_t c = 0; c < classes_.size(); ++c) class_to_idx_[classes_[c]] = int64_t(c);

  std::vector<int64_t> counts(classes_.size(), 0);
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::set<std::string> seen;
    std::vector<std::string> folders;
    walk(join(root_, classes_[c]), seen, folders);
    std::sort(folders.begin(), folders.end());  // sorted(os.walk(...)): by the folder's path
    for (const std::string& folder : folders) {
      std::vector<std::string> subfolders, names;
      list_folder(folder, subfolders, names);
      for (const std::string& name : names)
        if (has_image_extension(name)) {
          samples_.push_back({join(folder, name), int64_t(c)});
          ++counts[c];
        }
    }
  }
  refuse_empty_classes(root_, classes_, counts, "");
  if (options_.skip_invalid) leave_out_unreadable(counts);
}

// skip_invalid: every file decoded once; the ones that fail are left out and reported.
void ImageFolder::leave_out_unreadable(std::vector<int64_t>& counts) {
  std::vector<Sample> readable;
  for (Sample& sample : samples_) {
    try {
      read_image(sample.path, options_.mode);
      readable.push_back(std::move(sample));
    } catch (const std::runtime_error& e) {
      skipped_.push_back({sample.path, e.what()});
      --counts[size_t(sample.class_index)];
    }
  }
  samples_ = std::move(readable);
  if (!skipped_.empty())
    std::fprintf(stderr,
                 "ImageFolder '%s': skipped %zu of %zu files that could not be decoded (first: "
                 "%s)\n",
                 root_.c_str(), skipped_.size(), skipped_.size() + samples_.size(),
                 skipped_.front().reason.c_str());
  refuse_empty_classes(root_, classes_, counts,
                       fmt::format(" after leaving out {} unreadable files", skipped_.size()));
}

Example ImageFolder::get(int64_t index, ExampleRng& rng) const {
  if (index < 0 || index >= size())
    throw std::out_of_range(
        fmt::format("ImageFolder '{}': example {} is outside [0, {})", root_, index, size()));
  const Sample& sample = samples_[size_t(index)];
  const Tensor image = read_image(sample.path, options_.mode);  // its errors name the file
  const int64_t label = options_.target_transform ? options_.target_transform(sample.class_index)
                                                  : sample.class_index;
  return {options_.transform(image, rng), Tensor::from_ids({label}, {})};
}

}  // namespace dg
