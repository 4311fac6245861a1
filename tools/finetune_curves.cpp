// finetune_curves: the validation-loss curves of fine-tuning runs as one SVG line chart (the
// report charts of tools/attnres/report/charts.h) and a Markdown table, from the runs' own logs.
// Each run is a `depthgrad train` or `depthgrad finetune` output folder trained with
// --eval-every N: its steps.jsonl has "validation_loss" on every N-th step. The loss before the
// first step (the same for every run that starts from the same base: LoRA's B starts at zero) is
// given with --start, as `depthgrad eval` printed it, and drawn at step 0.
//
//   finetune_curves --title "tiny Llama" --start 5.66 --svg llama.svg
//       "full=runs/llama-full" "LoRA r=8=runs/llama-lora" > llama.md   (one line)
//
// A run is LABEL=DIR (the last '=' splits them). Every run must have the same evaluation steps.
#include <fmt/core.h>

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/attnres/report/charts.h"
#include "train/io/files.h"
#include "train/io/json.h"

namespace {

struct Curve {
  std::string label;
  std::vector<int64_t> steps;  // 1-based steps after which the validation loss was taken
  std::vector<double> losses;
};

// The (step, validation_loss) pairs of DIR/steps.jsonl, in order.
Curve read_curve(const std::string& label, const std::string& dir) {
  const std::string path = dir + "/steps.jsonl";
  std::istringstream lines(dg::read_file(path));
  Curve c{label, {}, {}};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const dg::json::Value v = dg::json::parse(line, fmt::format("{} line {}", path, number));
    if (const dg::json::Value* loss = v.find("validation_loss")) {
      c.steps.push_back(v.at("step").as_int() + 1);
      c.losses.push_back(loss->as_double());
    }
  }
  if (c.steps.empty())
    throw std::runtime_error(
        fmt::format("{}: no validation_loss (train the run with --eval-every N)", path));
  return c;
}

struct Options {
  std::string title, svg;
  double start = std::nan("");
  std::vector<Curve> curves;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    if (a == "--title") {
      o.title = value();
    } else if (a == "--svg") {
      o.svg = value();
    } else if (a == "--start") {
      const std::string text = value();
      size_t used = 0;
      try {
        o.start = std::stod(text, &used);
      } catch (const std::exception&) {
      }
      if (used != text.size() || !std::isfinite(o.start))
        throw std::invalid_argument(fmt::format("--start: '{}' is not a number", text));
    } else {
      const size_t eq = a.rfind('=');
      if (eq == std::string::npos || eq == 0)
        throw std::invalid_argument(fmt::format("'{}' is not LABEL=DIR", a));
      o.curves.push_back(read_curve(a.substr(0, eq), a.substr(eq + 1)));
    }
  }
  if (o.curves.empty() || o.svg.empty())
    throw std::invalid_argument(
        "usage: finetune_curves --title T --start LOSS --svg OUT.svg LABEL=DIR...");
  for (const Curve& c : o.curves)
    if (c.steps != o.curves.front().steps)
      throw std::invalid_argument(
          fmt::format("{} was evaluated at other steps than {}", c.label, o.curves.front().label));
  return o;
}

// The Markdown table: one row per evaluation step, one column per run.
void print_table(const Options& o) {
  std::string head = "| step |", rule = "|---:|";
  for (const Curve& c : o.curves) {
    head += fmt::format(" {} |", c.label);
    rule += "---:|";
  }
  fmt::print("{}\n{}\n", head, rule);
  if (std::isfinite(o.start)) {
    std::string row = "| 0 |";
    for (size_t k = 0; k < o.curves.size(); ++k) row += fmt::format(" {:.4f} |", o.start);
    fmt::print("{}\n", row);
  }
  for (size_t i = 0; i < o.curves.front().steps.size(); ++i) {
    std::string row = fmt::format("| {} |", o.curves.front().steps[i]);
    for (const Curve& c : o.curves) row += fmt::format(" {:.4f} |", c.losses[i]);
    fmt::print("{}\n", row);
  }
}

void write_chart(const Options& o) {
  const std::vector<int64_t>& steps = o.curves.front().steps;
  const int64_t every = steps.front();
  std::vector<dg::Series> series;
  for (const Curve& c : o.curves) {
    std::vector<double> y;
    if (std::isfinite(o.start)) y.push_back(o.start);
    y.insert(y.end(), c.losses.begin(), c.losses.end());
    series.emplace_back(c.label, y);
  }
  const std::string x_label =
      std::isfinite(o.start)
          ? fmt::format("evaluation (every {} steps; 0 = before training)", every)
          : fmt::format("evaluation (every {} steps, from step {})", every, every);
  dg::write_file_atomic(
      o.svg, dg::svg_line_chart(o.title, x_label, "validation loss (nats/token)", series) + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    write_chart(o);
    print_table(o);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "finetune_curves: {}\n", e.what());
    return 1;
  }
}
