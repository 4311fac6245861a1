// Command-line flags for the depthgrad commands: declared with a default and a help line,
// parsed strictly (an unknown flag, a missing value or a malformed number is a UsageError that
// names the flag), and listed by --help with their defaults: a flag's default is shown once, as
// "(default: X)" unless its help text already says what the default is, and not at all when it
// has none. No abbreviations, no positional magic.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dg::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs f(); a std::invalid_argument it throws (a flag's value that a library check refuses, such
// as --mode sideways or --heads 5 with --dim 64) becomes a UsageError: exit 2, not 1.
template <class F>
void as_usage_error(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// The values a numeric flag accepts, by flag name (the same name means the same thing in every
// command): get_int / get_double refuse a value outside [low, high] (low itself excluded when
// low_open) with a UsageError naming the flag. tests/test_flags.cpp checks that every numeric
// flag the commands read has its range here.
struct FlagRange {
  double low, high;
  bool low_open = false;
};
const std::map<std::string, FlagRange>& flag_ranges();

class Flags {
 public:
  Flags(std::string command, std::string summary)
      : command_(std::move(command)), summary_(std::move(summary)) {}
  // A flag taking a value ("--steps 30" or "--steps=30"). A separate value may not start with
  // "--" (that is the next flag: "--output --steps 5" is an error); "--output=--x" may.
  Flags& add(const std::string& name, const std::string& default_value, const std::string& help);
  // A switch ("--quiet"); "--quiet=false" also accepted.
  Flags& add_switch(const std::string& name, const std::string& help);
  // Another name for the flag declared last ("--output" for "--output-dir"): parsed as that flag,
  // listed beside it in --help.
  Flags& alias(const std::string& other_name);
  // Parses argv[start..]; throws UsageError. Returns false when --help was asked for.
  bool parse(int argc, char** argv, int start);
  const std::string& get(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  bool given(const std::string& name) const;
  // Every flag's name and value (given or default), in declaration order.
  std::vector<std::pair<std::string, std::string>> values() const;
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Flag {
    std::string name, value, default_value, help;
    bool is_switch = false, given = false;
    std::vector<std::string> aliases;
  };
  const Flag& find(const std::string& name) const;
  std::string command_, summary_;
  std::vector<Flag> flags_;
};

}  // namespace dg::cli
