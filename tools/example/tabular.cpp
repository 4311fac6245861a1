// Tabular classification from a CSV file: which plan (basic, plus, premium) a customer takes,
// from their age, income, months as a customer and region. The tables are synthetic and
// deterministic (--write-data DIR writes DIR/customers.csv, 2000 rows, and DIR/customers_test.csv,
// 500 more: a few incomes missing as "NA", the regions quoted, one with a comma in its name); the
// program reads the first with dg::CsvDataset (region one-hot, missing incomes filled with the
// column's mean), cuts it 80/20 with dg::random_split (torch's split for the seed), standardises
// the numeric columns with the training part's mean and std only, trains an MLP by dg::Trainer
// (AdamW, cosine schedule) on the training part, and prints the validation accuracy beside the
// majority-class baseline; --test FILE also reads another file with the training file's encoding
// (categories, classes, fill values, statistics) and prints its accuracy.
// Exits non-zero when an accuracy is below --min-accuracy.
//   tabular --write-data DIR [--rows 2000] [--seed 0]
//   tabular --data DIR/customers.csv [--test DIR/customers_test.csv] [--steps 800] [--seed 0]
//           [--min-accuracy 0.8]
#include <depthgrad/depthgrad.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

// --name value pairs over `flags` (the defaults, as strings); refuses an unknown name or a
// missing value.
std::map<std::string, std::string> parse_flags(int argc, char** argv,
                                               std::map<std::string, std::string> flags) {
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || !flags.count(name.substr(2)) || i + 1 >= argc)
      throw std::invalid_argument("unknown flag or missing value: '" + name +
                                  "' (flags: --write-data DIR --rows N | --data FILE --test FILE "
                                  "--steps N --min-accuracy A; --seed S)");
    flags[name.substr(2)] = argv[i + 1];
  }
  return flags;
}

// The table: age (18-80), income in k$ (20-150; 3% "NA"), tenure in months (0-120), region (4
// values) and plan, the class with the largest score (linear in the columns, plus noise).
std::string customers_csv(int64_t rows, uint64_t seed) {
  const char* regions[] = {"north", "south", "east", "west, coastal"};
  const double plus_region[] = {0.5, -0.5, 0.0, 1.0}, premium_region[] = {-1.0, 1.0, 0.0, 0.5};
  const char* plans[] = {"basic", "plus", "premium"};
  dg::TorchGenerator gen(seed);
  std::vector<double> u(static_cast<size_t>(rows * 5)), noise(static_cast<size_t>(rows * 2));
  gen.uniform_(u.data(), rows * 5, 0.0, 1.0);
  gen.normal_(noise.data(), rows * 2, 0.0, 0.7);
  std::string csv = "age,income,tenure,region,plan\n";
  for (int64_t i = 0; i < rows; ++i) {
    const double* r = u.data() + 5 * i;
    const int age = 18 + static_cast<int>(r[0] * 63), tenure = static_cast<int>(r[2] * 121);
    const double income = std::round((20 + 130 * r[1]) * 10) / 10;
    const int region = std::min(3, static_cast<int>(r[3] * 4));
    const double scores[] = {
        0.0, 0.05 * (income - 92) + 0.04 * (tenure - 55) + plus_region[region] + noise[2 * i],
        0.08 * (income - 95) + 0.06 * (age - 47) - 0.02 * (tenure - 60) + premium_region[region] +
            noise[2 * i + 1]};
    const int64_t plan = std::max_element(scores, scores + 3) - scores;
    char income_field[16] = "NA", line[160];
    if (r[4] >= 0.03) std::snprintf(income_field, sizeof income_field, "%.1f", income);
    std::snprintf(line, sizeof line, "%d,%s,%d,\"%s\",%s\n", age, income_field, tenure,
                  regions[region], plans[plan]);
    csv += line;
  }
  return csv;
}

std::unique_ptr<dg::Sequential> make_model(int64_t features, int64_t classes) {
  return std::make_unique<dg::Sequential>(std::make_unique<dg::Linear>(features, 32), dg::relu,
                                          std::make_unique<dg::Linear>(32, 32), dg::relu,
                                          std::make_unique<dg::Linear>(32, classes));
}

dg::Tensor loss(dg::Sequential& model, const dg::Batch& batch) {
  return dg::cross_entropy(model(batch[0]), batch[1]);
}

// The share of `data`'s examples whose largest logit is the label, and of the commonest label.
std::pair<double, double> accuracy_and_baseline(dg::Sequential& net, const dg::Dataset& data,
                                                int64_t classes) {
  dg::NoGradGuard no_grad;
  net.eval();
  int64_t hits = 0;
  std::vector<int64_t> counts(static_cast<size_t>(classes), 0);
  dg::for_each_batch(data, 512, [&](const dg::Batch& batch) {
    const dg::Tensor predicted = dg::argmax(net(batch[0]), 1);
    const int64_t* p = predicted.data<int64_t>();
    const int64_t* y = batch[1].data<int64_t>();
    for (int64_t k = 0; k < batch.size(); ++k) {
      hits += p[k] == y[k];
      ++counts[static_cast<size_t>(y[k])];
    }
  });
  const double n = static_cast<double>(data.size());
  return {static_cast<double>(hits) / n,
          static_cast<double>(*std::max_element(counts.begin(), counts.end())) / n};
}

int train(const std::map<std::string, std::string>& flags) {
  const uint64_t seed = std::stoull(flags.at("seed"));
  // Region one-hot, missing incomes filled with the mean, label "plan" as class indices
  // (basic 0, plus 1, premium 2: its values sorted).
  dg::CsvDataset table = dg::CsvDataset::read(
      flags.at("data"),
      {.label = "plan", .categorical = {"region"}, .missing = dg::CsvMissing::mean});
  const dg::CsvEncoding& encoding = table.encoding();
  const int64_t classes = static_cast<int64_t>(encoding.classes.size());
  dg::TorchGenerator split_gen(seed);
  const std::vector<dg::Subset> parts = dg::random_split(table, {0.8, 0.2}, &split_gen);
  const dg::Subset &train_part = parts[0], &validation = parts[1];
  table.standardize(train_part.indices());  // the training part's statistics, for every row
  std::printf("%lld rows, %lld features (", static_cast<long long>(table.size()),
              static_cast<long long>(encoding.feature_count()));
  for (const std::string& name : encoding.feature_names()) std::printf(" %s", name.c_str());
  std::printf(" ), %lld classes; train %lld, validation %lld\n", static_cast<long long>(classes),
              static_cast<long long>(train_part.size()), static_cast<long long>(validation.size()));
  for (const dg::CsvFeatureColumn& c : encoding.columns)
    if (!c.categorical)
      std::printf("  %-7s mean %8.3f  std %8.3f (training part)\n", c.name.c_str(), c.mean, c.std);

  const dg::TrainingConfig settings{
      .steps = std::stoll(flags.at("steps")), .batch = 64, .seed = seed};
  dg::manual_seed(seed);
  std::unique_ptr<dg::Sequential> net = make_model(encoding.feature_count(), classes);
  dg::AdamW optimizer(*net, dg::AdamWConfig{.lr = 1e-2, .weight_decay = 1e-4});
  dg::CosineAnnealingLR schedule(optimizer, settings.steps, settings.steps / 20, 0.1);
  dg::Trainer trainer(*net, train_part, dg::Sampler::shuffled(train_part.size(), settings.seed),
                      loss, settings, optimizer, &schedule);
  trainer.run(settings.steps, [&](const dg::StepLog& log) {
    if (log.step % 200 == 0)
      std::printf("step %4lld  loss %.4f\n", static_cast<long long>(log.step), log.loss);
  });
  const double train_accuracy = accuracy_and_baseline(*net, train_part, classes).first;
  const auto [accuracy, baseline] = accuracy_and_baseline(*net, validation, classes);
  std::printf("accuracy: train %.3f, validation %.3f (majority-class baseline %.3f)\n",
              train_accuracy, accuracy, baseline);
  double worst = accuracy;
  if (!flags.at("test").empty()) {
    // Another file read with this one's encoding: its categories, classes, fill values and the
    // training part's statistics.
    const dg::CsvDataset test = dg::CsvDataset::read(flags.at("test"), encoding);
    const auto [test_accuracy, test_baseline] = accuracy_and_baseline(*net, test, classes);
    std::printf("test file: %lld rows, accuracy %.3f (majority-class baseline %.3f)\n",
                static_cast<long long>(test.size()), test_accuracy, test_baseline);
    worst = std::min(worst, test_accuracy);
  }
  const double min_accuracy = std::stod(flags.at("min-accuracy"));
  if (worst < min_accuracy) {
    std::fprintf(stderr, "tabular: accuracy %.3f is below %.3f\n", worst, min_accuracy);
    return 1;
  }
  return 0;
}

// DIR/customers.csv (rows, seed) and DIR/customers_test.csv (a quarter as many, seed + 1).
void write_data(const std::filesystem::path& dir, int64_t rows, uint64_t seed) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, n, s] : {std::tuple{"customers.csv", rows, seed},
                                   std::tuple{"customers_test.csv", rows / 4, seed + 1}}) {
    const std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    out << customers_csv(n, s);
    if (!out.flush()) throw std::runtime_error("cannot write " + path);
    std::printf("wrote %s (%lld rows)\n", path.c_str(), static_cast<long long>(n));
  }
}

int main(int argc, char** argv) {
  try {
    const auto flags = parse_flags(argc, argv,
                                   {{"write-data", ""},
                                    {"rows", "2000"},
                                    {"data", ""},
                                    {"test", ""},
                                    {"steps", "800"},
                                    {"seed", "0"},
                                    {"min-accuracy", "0.8"}});
    if (!flags.at("write-data").empty()) {
      write_data(flags.at("write-data"), std::stoll(flags.at("rows")),
                 std::stoull(flags.at("seed")));
      if (flags.at("data").empty()) return 0;
    }
    if (flags.at("data").empty())
      throw std::invalid_argument("nothing to do: give --write-data DIR and/or --data FILE");
    return train(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tabular: %s\n", e.what());
    return 1;
  }
}
