// A table from a CSV or TSV file as a dataset of features and labels (torch's usual tabular
// road: pandas.read_csv, one-hot categories, a StandardScaler, a TensorDataset).
//   dg::CsvDataset train = dg::CsvDataset::read("train.csv", {.label = "species",
//       .categorical = {"island"}, .standardize = true});
//   dg::CsvDataset test = dg::CsvDataset::read("test.csv", train.encoding());  // train's encoding
//   // fields: features float32 [n, F], label int64 [n] (class indices; float [n] for regression)
// Columns: the features are the columns named in `features` (default: every column but the
// label, in file order); those also named in `categorical` are categories, the others numbers.
//  - A categorical column is one-hot encoded into the feature vector (one feature per category,
//    in the column's place), not given as a separate int64 field: the dataset stays two fields,
//    so any model that takes a feature matrix (an MLP: Linear first) and any loss over b[0], b[1]
//    work unchanged. (A column of thousands of categories, for an embedding, is better read as a
//    numeric integer column and embedded by the model.)
//  - Categories and classes are the column's distinct values in sorted order: numerically when
//    every value is an integer (so labels 0…K−1 keep their numbers and 10 comes after 9), else by
//    their bytes; as pandas' Categorical and sklearn's LabelEncoder order them.
//  - A file read with another file's encoding (CsvDataset::read(path, encoding)) refuses a
//    category or class that file did not have (naming file, line, column and the known values)
//    rather than mapping it to zeros: a silent all-zero one-hot is a wrong answer nobody sees.
// Missing values: an empty field or one of pandas' default na_values, case as pandas ("",
// "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
// "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"; pandas 2's list) are refused naming
// file, line and column, unless `missing` asks to fill numeric features (with the column's mean
// over this file, or a constant); categorical and label fields are never filled. A numeric field
// that is not a finite number names file, line, column and the value.
// Standardisation: numeric features become (x − mean) / std with the mean and the population
// std (ddof 0, as sklearn's StandardScaler; a constant column's std is taken as 1) of this file
// (options.standardize) or of chosen rows (standardize(rows): the training part of a
// random_split). The statistics, categories, classes and fill values are the CsvEncoding, which
// reads a test file the same way.
// It holds every row as tensors (fill is a copy of rows, as TensorDataset's), does not stream
// files larger than memory, and has no random transforms.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "train/dataset.h"

namespace dg {

enum class CsvTask { classification, regression };
enum class CsvMissing { refuse, mean, constant };

struct CsvDatasetOptions {
  std::string label = {};  // the label column (required)
  CsvTask task = CsvTask::classification;
  std::vector<std::string> features = {};     // empty: every column but the label, in file order
  std::vector<std::string> categorical = {};  // features read as categories (one-hot)
  DType dtype = DType::f32;                 // the features' (and a regression label's): f32 or f64
  bool standardize = false;                 // numeric features, with this file's mean and std
  CsvMissing missing = CsvMissing::refuse;  // numeric features only
  double fill_value = 0;                    // CsvMissing::constant: the value a missing field takes
  char delimiter = 0;                       // 0: '\t' for a .tsv file, ',' otherwise
};

// How one feature column becomes features.
struct CsvFeatureColumn {
  std::string name;
  bool categorical = false;
  std::vector<std::string> categories;  // categorical: one feature per category, in this order
  double fill = 0;                      // numeric, when filling: a missing field's raw value
  double mean = 0, std = 1;             // numeric: feature = (x − mean) / std (0, 1: unchanged)
  int64_t first = 0;                    // its first feature's index in the feature vector
  int64_t width() const { return categorical ? static_cast<int64_t>(categories.size()) : 1; }
};

// Everything a file's reading learned, to read another file the same way. Made by
// CsvDataset::read, not by hand (its constructor keeps it from being mistaken for the options in
// read(path, {.label = ...})).
struct CsvEncoding {
  CsvEncoding() = default;
  std::vector<CsvFeatureColumn> columns;  // in feature order
  std::string label;
  CsvTask task = CsvTask::classification;
  std::vector<std::string> classes;  // classification: class index -> label value
  DType dtype = DType::f32;
  CsvMissing missing = CsvMissing::refuse;
  bool standardized = false;

  int64_t feature_count() const;
  // One name per feature: the column's name, "column=category" for a category's one-hot feature.
  std::vector<std::string> feature_names() const;
  // As JSON, to keep beside a model's weights and read new files later in another program:
  //   dg::write_file_atomic("encoding.json", dg::json::dump(train.encoding().to_json(), 2));
  //   auto e = dg::CsvEncoding::from_json(dg::json::parse(dg::read_file("encoding.json"), "…"));
  // Numbers round-trip exactly; from_json throws std::invalid_argument naming what is wrong.
  json::Value to_json() const;
  static CsvEncoding from_json(const json::Value& value);
};

// True for an empty field and pandas' default na_values (the list above), compared exactly.
bool is_missing_value(const std::string& field);

class CsvDataset final : public Dataset {
 public:
  // Reads `path` and learns its encoding (categories, classes, fill values, statistics).
  static CsvDataset read(const std::string& path, const CsvDatasetOptions& options);
  // Reads `path` with an encoding learned from another file (the training file's, with its
  // statistics): columns are found by name (other columns are ignored); a category or class
  // the encoding lacks is refused. delimiter 0: by the extension.
  static CsvDataset read(const std::string& path, const CsvEncoding& from_train,
                         char delimiter = 0);

  int64_t size() const override { return rows_.size(); }
  void fill(std::span<const int64_t> indices, Batch& out) const override {
    rows_.fill(indices, out);
  }

  // Standardises the numeric features with the mean and std over `rows` (all rows when empty),
  // and records them in the encoding: a test file read with encoding() is standardised the same
  // way. Refused when the features are standardised already. Call it before loaders use the
  // dataset (it changes the features; its subsets see the change).
  void standardize(std::span<const int64_t> rows = {});

  const CsvEncoding& encoding() const { return encoding_; }
  const Tensor& features() const { return features_; }  // [n, F]
  const Tensor& labels() const { return labels_; }      // [n]: int64, or dtype for regression
  const std::string& path() const { return path_; }

 private:
  CsvDataset(std::string path, CsvEncoding encoding, Tensor features, Tensor labels);
  std::string path_;
  CsvEncoding encoding_;
  Tensor features_, labels_;
  TensorDataset rows_;
};

}  // namespace dg
