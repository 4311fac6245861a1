// Progress line and JSON-lines step log (see progress.h).
#include "tools/cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <stdexcept>

#include "train/io/files.h"
#include "train/io/json.h"

namespace dg::cli {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

Progress::Progress(bool quiet, const std::string& jsonl_path, bool append)
    : live_(!quiet && isatty(STDERR_FILENO)),
      quiet_(quiet),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (!jsonl_path.empty()) open_log(jsonl_path, append);
}

void Progress::open_log(const std::string& jsonl_path, bool append) {
  if (log_) std::fclose(log_);
  log_ = std::fopen(jsonl_path.c_str(), append ? "a" : "w");
  if (!log_) throw std::runtime_error(fmt::format("cannot open step log {}", jsonl_path));
}

void Progress::close_log() {
  if (log_) std::fclose(log_);
  log_ = nullptr;
}

Progress::~Progress() {
  finish();
  if (log_) std::fclose(log_);
}

void Progress::step(const std::string& label, long step, long total, double loss, double tps,
                    double overall) {
  if (quiet_) return;
  auto now = std::chrono::steady_clock::now();
  if (first_fraction_ < 0) {  // a resumed run starts part way: its pace is measured from here
    first_fraction_ = overall;
    first_step_ = now;
  }
  const double since_last = std::chrono::duration<double>(now - last_draw_).count();
  if (live_ ? step + 1 < total && since_last < 0.1 : since_last < plain_line_seconds_) return;
  last_draw_ = now;
  double elapsed = prior_seconds_ + std::chrono::duration<double>(now - start_).count();
  // Time left at this process's pace: the work done since its first step, and the time it took.
  const double pace_seconds = std::chrono::duration<double>(now - first_step_).count();
  const double left =
      overall > first_fraction_ ? pace_seconds * (1 - overall) / (overall - first_fraction_) : NAN;
  std::string line =
      fmt::format("{} step {}/{} loss {:.4f} {:.0f} tok/s elapsed {} left {}", label, step + 1,
                  total, loss, tps, format_duration(elapsed), format_duration(left));
  if (!live_) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    return;
  }
  std::fprintf(stderr, "\r\033[2K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::message(const std::string& line) {
  if (quiet_) return;
  if (drawn_) {
    std::fprintf(stderr, "\r\033[2K");
    drawn_ = false;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::log_json(const std::string& json_line) {
  if (log_) {
    std::fputs(json_line.c_str(), log_);
    std::fputc('\n', log_);
    std::fflush(log_);  // a whole line per step reaches the file: a kill loses at most one
  }
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[2K");
    std::fflush(stderr);
    drawn_ = false;
  }
  if (log_) std::fflush(log_);
}

void keep_log_lines(const std::string& path,
                    const std::function<bool(const json::Value& line)>& keep) {
  if (!file_exists(path)) return;
  const std::string text = read_file(path);
  std::string kept;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a line cut by a kill: dropped
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    try {
      if (keep(json::parse(line, path))) kept += line + "\n";
    } catch (const std::exception&) {
      // a damaged line is dropped
    }
  }
  write_file_atomic(path, kept);
}

}  // namespace dg::cli
