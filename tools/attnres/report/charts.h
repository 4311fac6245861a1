// depthgrad's SVG chart library: line charts (with shaded bands and faint background lines), bar
// charts (with error bars and a reference interval), x–y charts of points with intervals, and
// heatmaps, drawn as self-contained <svg> elements (no scripts, no fonts to fetch), with "nice"
// axis ticks, a legend that lists exactly what is drawn, gaps at non-finite values and a "no data"
// note when there is nothing to draw. Every report page uses it (reproduce's report.html, evolve's
// index.html). It reads no results and computes no statistics: bands and intervals come drawn
// from the caller's numbers.
#pragma once
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace dg {

// ---- line charts --------------------------------------------------------------------------------

struct Series {
  Series(std::string label, std::vector<double> y, std::string color = "")
      : label(std::move(label)), y(std::move(y)), color(std::move(color)) {}
  std::string label;
  std::vector<double> y;  // x = 0, 1, …
  std::string color;      // CSS colour; empty picks from a palette
  // A shaded interval around the line, per x (same length as y; a NaN end leaves a gap), e.g.
  // min–max or a 95% interval over seeds. Bands are drawn under every line (class "band").
  std::vector<double> band_lo, band_hi;
  // A faint line: thin, translucent, drawn first and left out of the legend (e.g. each seed behind
  // the seeds' mean).
  bool faint = false;
};
// x ticks are whole steps (x is an index). The legend has one entry per series that is not faint
// and has a label; a series with a band shows the band's swatch behind its line.
std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const std::string& y_label, const std::vector<Series>& series,
                           int width = 640, int height = 320);

// ---- bar charts ---------------------------------------------------------------------------------

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// Error bars of a bar chart: per bar, the interval's ends in y units (NaN = no bar for that one;
// empty vectors = no error bars) and the legend text saying what they are ("±1 sd over seeds").
struct BarErrors {
  std::vector<double> lo, hi;
  std::string label;
};
// An interval drawn across the whole plot: a shaded band from lo to hi and a dashed line at `at`
// (e.g. the mean of the bars and its 95% confidence interval), named in the legend.
struct ReferenceBand {
  double at = kNoValue, lo = kNoValue, hi = kNoValue;
  std::string label;
};
std::string svg_bar_chart(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, const std::string& y_label,
                          int width = 640, int height = 280, const BarErrors& errors = {},
                          const ReferenceBand& band = {});

// ---- x–y charts of points with intervals --------------------------------------------------------

// One point and its interval (error bar) for a chart whose x is a number: a parameter count, a
// trial number, a generation.
struct IntervalPoint {
  double x = 0, y = 0;
  double lo = kNoValue, hi = kNoValue;  // error bar ends in y units; NaN = no bar
  std::string tooltip;                  // <title> of the marker
};
enum class IntervalLine { none, straight, steps };
struct IntervalSeries {
  std::string label;  // legend text; empty = no legend entry
  std::string color;  // empty picks from the palette
  std::vector<IntervalPoint> points;
  IntervalLine line = IntervalLine::none;  // steps: horizontal, then vertical (a running best)
  bool markers = true;
  bool dashed = false;
};
struct IntervalChartOptions {
  bool log_x = false;      // log10 x axis (parameter counts); x must be > 0
  bool integer_x = false;  // x ticks on whole numbers only (generations, trial numbers)
  // Labels at given x instead of numeric ticks (e.g. trial ids); rotated when they are many.
  std::vector<std::pair<double, std::string>> x_tick_labels;
  std::string error_bar_label;  // a legend entry saying what the error bars are
  bool zero_line = false;       // a line at y = 0 when it is inside the range
  int width = 640, height = 320;
};
std::string svg_interval_chart(const std::string& title, const std::string& x_label,
                               const std::string& y_label,
                               const std::vector<IntervalSeries>& series,
                               const IntervalChartOptions& options = {});

// ---- heatmaps -----------------------------------------------------------------------------------

// rows × columns matrix of values in [0, 1] (e.g. mean routing weight per layer and source).
std::string svg_heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& column_labels,
                        const std::vector<std::vector<double>>& values, int cell = 36);

// Building blocks for a chart drawn elsewhere: the opening <svg> of a chart (class "chart", white
// background, the title in bold at the top left), and a whole chart that says "no data".
std::string svg_chart_open(int width, int height, const std::string& title);
std::string svg_no_data(const std::string& title, int width);

}  // namespace dg
