// CsvDataset (see csv_dataset.h): a table is read (train/io/csv.h), its encoding learned (fit)
// or given, and every row encoded into a features matrix and a label vector (encode).
#include "train/data/csv_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "train/io/csv.h"

namespace dg {

namespace {

// pandas' default na_values (pandas.io.parsers STR_NA_VALUES, pandas 2), plus the empty field.
constexpr std::array<std::string_view, 19> kMissingValues = {
    "",     "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A",  "NA",       "NULL", "NaN",     "None",     "n/a",  "nan",  "null"};

// `field` as a finite number: spaces and tabs around it allowed, a leading '+' too.
bool parse_number(const std::string& field, double& value) {
  size_t first = field.find_first_not_of(" \t"), last = field.find_last_not_of(" \t");
  if (first == std::string::npos) return false;
  if (field[first] == '+') ++first;
  const char* begin = field.data() + first;
  const char* end = field.data() + last + 1;
  const auto [stop, error] = std::from_chars(begin, end, value);
  return error == std::errc() && stop == end && std::isfinite(value);
}

bool parse_integer(const std::string& field, int64_t& value) {
  const auto [stop, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  return error == std::errc() && stop == field.data() + field.size() && !field.empty();
}

std::string shown(const std::string& field) {
  return field.empty() ? "an empty field" : fmt::format("'{}'", field);
}

// "a, b, c" (at most 12, then "…").
std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 12; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 12) out += fmt::format(", … ({} in all)", names.size());
  return out;
}

[[noreturn]] void refuse_missing(const CsvTable& t, int64_t row, int64_t column, const char* why) {
  throw std::runtime_error(fmt::format("{}: missing value ({}); {}", t.where(row, column),
                                       shown(t.cell(row, column)), why));
}

// Field (row, column) of a numeric column as a number; refuses a value that is not one.
double number_at(const CsvTable& t, int64_t row, int64_t column, const char* what) {
  double value = 0;
  if (!parse_number(t.cell(row, column), value))
    throw std::runtime_error(fmt::format("{}: '{}' is not a finite number ({})",
                                         t.where(row, column), t.cell(row, column), what));
  return value;
}

constexpr const char* kNumericFeature =
    "a numeric feature; name the column in `categorical` to read it as categories";

// The distinct values of a column, sorted: as integers when all are, else by their bytes.
// Missing fields are refused (`what` says which kind of column it is).
std::vector<std::string> sorted_distinct(const CsvTable& t, int64_t column, const char* what) {
  std::vector<std::string> values;
  for (int64_t r = 0; r < t.rows(); ++r) {
    if (is_missing_value(t.cell(r, column)))
      refuse_missing(t, r, column, fmt::format("{} are never filled", what).c_str());
    values.push_back(t.cell(r, column));
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::vector<std::pair<int64_t, std::string>> numbered;
  for (const std::string& v : values) {
    int64_t n = 0;
    if (!parse_integer(v, n)) return values;
    numbered.emplace_back(n, v);
  }
  std::sort(numbered.begin(), numbered.end());
  for (size_t i = 0; i < numbered.size(); ++i) values[i] = numbered[i].second;
  return values;
}

int64_t find_column(const CsvTable& t, const std::string& name, const char* role) {
  const int64_t c = t.column_index(name);
  if (c < 0)
    throw std::runtime_error(fmt::format("{}: no column '{}' ({}); the header has: {}", t.source,
                                         name, role, listed(t.columns)));
  return c;
}

// The feature columns' names: options.features checked against the header, or every column
// but the label.
std::vector<std::string> feature_names_of(const CsvTable& t, const CsvDatasetOptions& options) {
  std::vector<std::string> names = options.features;
  if (names.empty())
    for (const std::string& c : t.columns)
      if (c != options.label) names.push_back(c);
  for (size_t i = 0; i < names.size(); ++i) {
    find_column(t, names[i], "a feature");
    if (names[i] == options.label)
      throw std::invalid_argument(
          fmt::format("CsvDataset: '{}' is the label; it cannot be a feature too", names[i]));
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      throw std::invalid_argument(fmt::format("CsvDataset: feature '{}' is named twice", names[i]));
  }
  for (const std::string& c : options.categorical)
    if (std::find(names.begin(), names.end(), c) == names.end())
      throw std::invalid_argument(
          fmt::format("CsvDataset: '{}' is named categorical but is not a feature (features: {})",
                      c, listed(names)));
  if (names.empty())
    throw std::invalid_argument(fmt::format(
        "CsvDataset: {} has no feature columns (only the label '{}')", t.source, options.label));
  return names;
}

// A numeric column's fill value under options.missing (0 when missing fields are refused).
double fill_value_of(const CsvTable& t, int64_t column, const CsvDatasetOptions& options) {
  if (options.missing == CsvMissing::constant) return options.fill_value;
  if (options.missing == CsvMissing::refuse) return 0;
  double sum = 0;
  int64_t present = 0;
  for (int64_t r = 0; r < t.rows(); ++r) {
    if (is_missing_value(t.cell(r, column))) continue;
    sum += number_at(t, r, column, kNumericFeature);
    ++present;
  }
  if (present == 0)
    throw std::runtime_error(fmt::format(
        "{}: column {} '{}' has no values at all: no mean to fill its missing fields with",
        t.source, column + 1, t.columns[static_cast<size_t>(column)]));
  return sum / static_cast<double>(present);
}

// What reading `t` with `options` learns: columns, categories, classes and fill values (the
// statistics come later: CsvDataset::standardize).
CsvEncoding fit(const CsvTable& t, const CsvDatasetOptions& options) {
  if (options.label.empty())
    throw std::invalid_argument("CsvDataset: no label column given (CsvDatasetOptions::label)");
  if (options.dtype != DType::f32 && options.dtype != DType::f64)
    throw std::invalid_argument(fmt::format(
        "CsvDataset: dtype {} asked; features are float32 or float64", dtype_name(options.dtype)));
  if (options.missing == CsvMissing::constant && !std::isfinite(options.fill_value))
    throw std::invalid_argument(
        fmt::format("CsvDataset: fill_value {} is not a finite number", options.fill_value));
  CsvEncoding e;
  e.label = options.label;
  e.task = options.task;
  e.dtype = options.dtype;
  e.missing = options.missing;
  const int64_t label = find_column(t, options.label, "the label");
  if (t.rows() == 0)
    throw std::runtime_error(fmt::format("{}: no data rows after the header", t.source));
  int64_t first = 0;
  for (const std::string& name : feature_names_of(t, options)) {
    CsvFeatureColumn c;
    c.name = name;
    c.first = first;
    const int64_t column = t.column_index(name);
    c.categorical = std::find(options.categorical.begin(), options.categorical.end(), name) !=
                    options.categorical.end();
    if (c.categorical)
      c.categories = sorted_distinct(t, column, "categorical fields");
    else
      c.fill = fill_value_of(t, column, options);
    first += c.width();
    e.columns.push_back(std::move(c));
  }
  if (e.task == CsvTask::classification) e.classes = sorted_distinct(t, label, "labels");
  return e;
}

// One numeric field's feature value: the number, or the fill for a missing field (when the
// encoding fills), standardised by the column's statistics.
double numeric_feature(const CsvTable& t, int64_t row, int64_t column, const CsvEncoding& e,
                       const CsvFeatureColumn& c) {
  double x = 0;
  if (!is_missing_value(t.cell(row, column)))
    x = number_at(t, row, column, kNumericFeature);
  else if (e.missing == CsvMissing::refuse)
    refuse_missing(t, row, column,
                   "missing values are refused unless CsvDatasetOptions::missing fills numeric "
                   "features (CsvMissing::mean or CsvMissing::constant)");
  else
    x = c.fill;
  // Rounded to the dtype first, as the stored features CsvDataset::standardize reads are: a row
  // standardised at reading and the same row standardised later get the same bits.
  if (e.dtype == DType::f32) x = static_cast<float>(x);
  return (x - c.mean) / c.std;
}

// The index of field (row, column) among `known` (categories or classes); refuses one not there.
int64_t category_index(const CsvTable& t, int64_t row, int64_t column,
                       const std::unordered_map<std::string, int64_t>& index,
                       const std::vector<std::string>& known, const char* what) {
  const std::string& field = t.cell(row, column);
  if (is_missing_value(field))
    refuse_missing(t, row, column, fmt::format("{} are never filled", what).c_str());
  const auto it = index.find(field);
  if (it == index.end())
    throw std::runtime_error(fmt::format("{}: '{}' is not one of the encoding's {} ({})",
                                         t.where(row, column), field, what, listed(known)));
  return it->second;
}

std::unordered_map<std::string, int64_t> index_of(const std::vector<std::string>& values) {
  std::unordered_map<std::string, int64_t> index;
  for (size_t i = 0; i < values.size(); ++i) index.emplace(values[i], static_cast<int64_t>(i));
  return index;
}

// features [n, F] (dtype) from `t`'s columns by the encoding.
Tensor encode_features(const CsvTable& t, const CsvEncoding& e) {
  const int64_t n = t.rows(), width = e.feature_count();
  std::vector<double> values(static_cast<size_t>(n * width), 0.0);
  for (const CsvFeatureColumn& c : e.columns) {
    const int64_t column = find_column(t, c.name, "a feature of the encoding");
    const std::unordered_map<std::string, int64_t> index = index_of(c.categories);
    for (int64_t r = 0; r < n; ++r) {
      double* row = values.data() + r * width + c.first;
      if (c.categorical)
        row[category_index(t, r, column, index, c.categories, "categories")] = 1.0;
      else
        row[0] = numeric_feature(t, r, column, e, c);
    }
  }
  return Tensor::from_vector(values, {n, width}, e.dtype);
}

// labels [n]: class indices (int64), or numbers (dtype) for regression.
Tensor encode_labels(const CsvTable& t, const CsvEncoding& e) {
  const int64_t n = t.rows(), column = find_column(t, e.label, "the label");
  if (e.task == CsvTask::regression) {
    std::vector<double> y(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
      if (is_missing_value(t.cell(r, column)))
        refuse_missing(t, r, column, "labels are never filled");
      y[static_cast<size_t>(r)] = number_at(t, r, column, "the regression label");
    }
    return Tensor::from_vector(y, {n}, e.dtype);
  }
  const std::unordered_map<std::string, int64_t> index = index_of(e.classes);
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r)
    y[static_cast<size_t>(r)] = category_index(t, r, column, index, e.classes, "classes");
  return Tensor::from_ids(y, {n});
}

}  // namespace

bool is_missing_value(const std::string& field) {
  return std::find(kMissingValues.begin(), kMissingValues.end(), field) != kMissingValues.end();
}

int64_t CsvEncoding::feature_count() const {
  int64_t n = 0;
  for (const CsvFeatureColumn& c : columns) n += c.width();
  return n;
}

std::vector<std::string> CsvEncoding::feature_names() const {
  std::vector<std::string> names;
  for (const CsvFeatureColumn& c : columns) {
    if (!c.categorical) names.push_back(c.name);
    for (const std::string& category : c.categories) names.push_back(c.name + "=" + category);
  }
  return names;
}

namespace {
const char* task_name(CsvTask task) {
  return task == CsvTask::classification ? "classification" : "regression";
}
const char* missing_name(CsvMissing missing) {
  return missing == CsvMissing::refuse ? "refuse"
         : missing == CsvMissing::mean ? "mean"
                                       : "constant";
}
std::vector<std::string> strings_of(const json::Value& array) {
  std::vector<std::string> out;
  for (const json::Value& v : array.as_array()) out.push_back(v.as_string());
  return out;
}
json::Value array_of(const std::vector<std::string>& strings) {
  json::Array out;
  for (const std::string& s : strings) out.emplace_back(s);
  return out;
}
}  // namespace

json::Value CsvEncoding::to_json() const {
  json::Value v;
  v["label"] = label;
  v["task"] = task_name(task);
  v["classes"] = array_of(classes);
  v["dtype"] = dtype_name(dtype);
  v["missing"] = missing_name(missing);
  v["standardized"] = standardized;
  json::Array list;
  for (const CsvFeatureColumn& c : columns) {
    json::Value column;
    column["name"] = c.name;
    column["categorical"] = c.categorical;
    if (c.categorical) {
      column["categories"] = array_of(c.categories);
    } else {
      column["fill"] = c.fill;
      column["mean"] = c.mean;
      column["std"] = c.std;
    }
    list.push_back(std::move(column));
  }
  v["columns"] = std::move(list);
  return v;
}

CsvEncoding CsvEncoding::from_json(const json::Value& v) {
  CsvEncoding e;
  try {
    e.label = v.at("label").as_string();
    const std::string task = v.at("task").as_string(), missing = v.at("missing").as_string(),
                      dtype = v.at("dtype").as_string();
    if (task != "classification" && task != "regression")
      throw std::invalid_argument(
          fmt::format("task '{}' is neither classification nor regression", task));
    e.task = task == "classification" ? CsvTask::classification : CsvTask::regression;
    if (missing != "refuse" && missing != "mean" && missing != "constant")
      throw std::invalid_argument(
          fmt::format("missing '{}' is not refuse, mean or constant", missing));
    e.missing = missing == "refuse" ? CsvMissing::refuse
                : missing == "mean" ? CsvMissing::mean
                                    : CsvMissing::constant;
    if (dtype != "float32" && dtype != "float64")
      throw std::invalid_argument(fmt::format("dtype '{}' is not float32 or float64", dtype));
    e.dtype = dtype == "float32" ? DType::f32 : DType::f64;
    e.classes = strings_of(v.at("classes"));
    e.standardized = v.at("standardized").as_bool();
    int64_t first = 0;
    for (const json::Value& item : v.at("columns").as_array()) {
      CsvFeatureColumn c;
      c.name = item.at("name").as_string();
      c.categorical = item.at("categorical").as_bool();
      if (c.categorical) {
        c.categories = strings_of(item.at("categories"));
      } else {
        c.fill = item.at("fill").as_double();
        c.mean = item.at("mean").as_double();
        c.std = item.at("std").as_double();
        if (!(c.std > 0))
          throw std::invalid_argument(
              fmt::format("column '{}': std {} is not positive", c.name, c.std));
      }
      c.first = first;
      first += c.width();
      e.columns.push_back(std::move(c));
    }
  } catch (const std::exception& error) {
    throw std::invalid_argument(fmt::format("CSV encoding (JSON): {}", error.what()));
  }
  if (e.columns.empty()) throw std::invalid_argument("CSV encoding (JSON): no feature columns");
  return e;
}

CsvDataset::CsvDataset(std::string path, CsvEncoding encoding, Tensor features, Tensor labels)
    : path_(std::move(path)),
      encoding_(std::move(encoding)),
      features_(std::move(features)),
      labels_(std::move(labels)),
      rows_({features_, labels_}) {}

CsvDataset CsvDataset::read(const std::string& path, const CsvDatasetOptions& options) {
  const CsvTable table = read_csv(path, options.delimiter);
  CsvEncoding encoding = fit(table, options);
  Tensor features = encode_features(table, encoding);
  Tensor labels = encode_labels(table, encoding);
  CsvDataset data(path, std::move(encoding), std::move(features), std::move(labels));
  if (options.standardize) data.standardize();
  return data;
}

CsvDataset CsvDataset::read(const std::string& path, const CsvEncoding& from_train,
                            char delimiter) {
  const CsvTable table = read_csv(path, delimiter);
  if (table.rows() == 0)
    throw std::runtime_error(fmt::format("{}: no data rows after the header", path));
  Tensor features = encode_features(table, from_train);
  Tensor labels = encode_labels(table, from_train);
  return CsvDataset(path, from_train, std::move(features), std::move(labels));
}

void CsvDataset::standardize(std::span<const int64_t> rows) {
  if (encoding_.standardized)
    throw std::invalid_argument(
        fmt::format("CsvDataset {}: the features are standardised already", path_));
  std::vector<int64_t> all;
  if (rows.empty()) {
    for (int64_t r = 0; r < size(); ++r) all.push_back(r);
    rows = all;
  }
  for (int64_t r : rows)
    if (r < 0 || r >= size())
      throw std::out_of_range(
          fmt::format("CsvDataset {}: standardize: row {} is outside [0, {})", path_, r, size()));
  const int64_t width = encoding_.feature_count(), n = size();
  std::vector<double> x = features_.to_vector();  // [n, width]
  for (CsvFeatureColumn& c : encoding_.columns) {
    if (c.categorical) continue;
    double sum = 0, squares = 0;
    for (int64_t r : rows) sum += x[static_cast<size_t>(r * width + c.first)];
    c.mean = sum / static_cast<double>(rows.size());
    for (int64_t r : rows) {
      const double d = x[static_cast<size_t>(r * width + c.first)] - c.mean;
      squares += d * d;
    }
    const double std = std::sqrt(squares / static_cast<double>(rows.size()));
    c.std = std > 0 ? std : 1.0;  // a constant column: centred, not scaled
    for (int64_t r = 0; r < n; ++r) {
      double& v = x[static_cast<size_t>(r * width + c.first)];
      v = (v - c.mean) / c.std;
    }
  }
  encoding_.standardized = true;
  features_ = Tensor::from_vector(x, {n, width}, encoding_.dtype);
  rows_ = TensorDataset({features_, labels_});
}

}  // namespace dg
