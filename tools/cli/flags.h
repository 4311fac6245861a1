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

#include "train/settings.h"

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

// The values a numeric flag accepts: its own range (a run-config setting's, given to add), and
// the range listed here by flag name for flags that are not settings (the same name means the
// same thing in every command). parse, get_int and get_double refuse a value outside either with
// a UsageError naming the flag. tests/test_flags.cpp checks that every numeric flag the commands
// read by name has its range here.
using FlagRange = SettingRange;
const std::map<std::string, FlagRange>& flag_ranges();

class Flags {
 public:
  Flags(std::string command, std::string summary)
      : command_(std::move(command)), summary_(std::move(summary)) {}
  // A flag taking a value ("--steps 30" or "--steps=30"). A separate value may not start with
  // "--" (that is the next flag: "--output --steps 5" is an error); "--output=--x" may.
  Flags& add(const std::string& name, const std::string& default_value, const std::string& help,
             const FlagRange& range = {});
  // A switch ("--quiet"); "--quiet=false" also accepted. One that is on unless turned off
  // ("--rope=false") shows "(default: true)".
  Flags& add_switch(const std::string& name, const std::string& help, bool on = false);
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
  bool declared(const std::string& name) const;
  // Every flag's name and value (given or default), in declaration order.
  std::vector<std::pair<std::string, std::string>> values() const;
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Flag {
    std::string name, value, default_value, help;
    bool is_switch = false, given = false;
    std::vector<std::string> aliases;
    FlagRange range;
  };
  void check_range(const Flag& flag, double x) const;
  const Flag& find(const std::string& name) const;
  std::string command_, summary_;
  std::vector<Flag> flags_;
};

}  // namespace dg::cli
