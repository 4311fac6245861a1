// A live progress line for long work: step, loss, tokens/s, elapsed and time left, redrawn in
// place on a terminal (stderr). When stderr is not a terminal (a log file under nohup, a pipe)
// the same line is printed as a plain line at most once a minute, so a long run's log shows where
// it is; --quiet silences both.
// Also appends one JSON object per step to a JSON-lines log when a path is given: the one file
// depthgrad writes without the atomic temporary-and-rename (an append-only log: each line is
// written and flushed whole, so a kill loses at most the line being written).
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace dg::json {
class Value;
}

namespace dg::cli {

class Progress {
 public:
  // append: keep the log's lines (a resumed run) instead of starting it empty.
  Progress(bool quiet, const std::string& jsonl_path = "", bool append = false);
  // Seconds spent before this process (a resumed run): elapsed covers the whole run. Time left
  // is always this process's pace (the fraction done since its first step) applied to the rest.
  void set_prior_seconds(double seconds) { prior_seconds_ = seconds; }
  ~Progress();
  // One training step of `total` (per task), in task `label`, with overall fraction done.
  void step(const std::string& label, long step, long total, double loss, double tokens_per_second,
            double overall_fraction);
  // A line that stays (clears the live line first); printed unless quiet.
  void message(const std::string& line);
  // Writes a raw JSON object line to the log (when open).
  void log_json(const std::string& json_line);
  // Starts writing the log to `jsonl_path` (closing any open one): appended to, or started empty.
  void open_log(const std::string& jsonl_path, bool append);
  void close_log();
  void finish();

 private:
  bool live_;   // redraw one line in place (stderr is a terminal)
  bool quiet_;  // print nothing
  // Not a terminal: a plain progress line at most this often.
  static constexpr double plain_line_seconds_ = 60;
  FILE* log_ = nullptr;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
  double prior_seconds_ = 0;
  // The overall fraction and time at the first step of this process (the pace for time left).
  double first_fraction_ = -1;
  std::chrono::steady_clock::time_point first_step_;
};

std::string format_duration(double seconds);

// A resumed run's step log: keeps the lines `keep` accepts (each line parsed as JSON) and drops
// the others, a damaged line and a last line cut by a kill. Rewritten atomically, before the log
// is reopened for appending; a missing log is an empty one.
void keep_log_lines(const std::string& jsonl_path,
                    const std::function<bool(const json::Value& line)>& keep);

}  // namespace dg::cli
