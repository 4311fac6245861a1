// Strict flag parsing (see flags.h).
#include "tools/cli/flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace dg::cli {

const std::map<std::string, FlagRange>& flag_ranges() {
  constexpr double kMax = std::numeric_limits<double>::infinity();  // no upper bound
  // 256 byte tokens + the 4 specials (<pad> <unk> <bos> <eos>): a smaller vocabulary cannot hold
  // the byte alphabet, and up to 2^31 - 1 ids fit the int32 token ids.
  constexpr double kMinVocab = 260, kMaxVocab = 2147483647;
  static const std::map<std::string, FlagRange> ranges{
      // flags that are not run-config settings (those carry their setting's range), or whose
      // meaning in some command is not the setting's (bench --steps and --warmup)
      {"steps", {1, kMax}},
      {"vocab", {kMinVocab, kMaxVocab}},
      {"repeat", {1, kMax}},
      {"population", {1, kMax}},
      {"trial-seeds", {1, kMax}},
      // counts where 0 means "none", "all" or "off"
      {"warmup", {0, kMax}},
      {"windows", {0, kMax}},
      {"checkpoint-every", {0, kMax}},
      {"eval-every", {0, kMax}},
      {"sample-every", {0, kMax}},
      {"min-frequency", {0, 2147483647}},
      {"generations", {0, kMax}},
      {"train-tokens", {0, kMax}},
      {"seed", {0, kMax}},  // generate's sampling seed; train's is training.seed
      // real numbers (--temperature, --top-p, --top-k, --max-new-tokens: generate checks those
      // with messages of their own)
      {"confidence-z", {0, 1e6}},
      {"rank-stop-wait", {0, 1e6, true}},  // seconds, (0, about 11 days]
  };
  return ranges;
}

// Refuses a value outside the flag's own range or its name's in flag_ranges(); a flag without a
// bound (a text flag such as --dataset, whose value may look like a number) is not checked.
void Flags::check_range(const Flag& flag, double x) const {
  const auto it = flag_ranges().find(flag.name);
  for (const FlagRange* r : {&flag.range, it == flag_ranges().end() ? nullptr : &it->second})
    if (r && (std::isfinite(r->low) || std::isfinite(r->high)) && !r->contains(x))
      throw UsageError(
          fmt::format("--{}: expected a value {}, got '{}'", flag.name, r->describe(), flag.value));
}

Flags& Flags::add(const std::string& name, const std::string& default_value,
                  const std::string& help, const FlagRange& range) {
  flags_.push_back(Flag{name, default_value, default_value, help, false, false, {}, range});
  return *this;
}

Flags& Flags::add_switch(const std::string& name, const std::string& help, bool on) {
  const std::string value = on ? "true" : "false";
  flags_.push_back(Flag{name, value, value, help, true, false, {}, {}});
  return *this;
}

Flags& Flags::alias(const std::string& other_name) {
  if (flags_.empty()) throw std::logic_error("Flags::alias before any flag");
  flags_.back().aliases.push_back(other_name);
  return *this;
}

bool Flags::parse(int argc, char** argv, int start) {
  for (int i = start; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return false;
    if (arg.rfind("--", 0) != 0)
      throw UsageError(
          fmt::format("unexpected argument '{}' (flags start with --; see depthgrad {} --help)",
                      arg, command_));
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* flag = nullptr;
    for (Flag& f : flags_)
      if (f.name == name || std::find(f.aliases.begin(), f.aliases.end(), name) != f.aliases.end())
        flag = &f;
    if (!flag)
      throw UsageError(fmt::format("unknown flag --{} (see depthgrad {} --help)", name, command_));
    if (flag->is_switch) {
      if (has_value && value != "true" && value != "false")
        throw UsageError(fmt::format("--{}: expected true or false, got '{}'", name, value));
      flag->value = has_value ? value : "true";
    } else {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError(fmt::format("--{}: missing value", name));
        // "--output --steps 5" forgot the output: refuse rather than take "--steps" as the
        // value. A negative number ("--lr -1") starts with one dash and reaches the flag.
        const std::string next = argv[i + 1];
        if (next.rfind("--", 0) == 0)
          throw UsageError(fmt::format(
              "--{}: missing value (the next argument '{}' is a flag; write --{}={} if that is "
              "the value)",
              name, next, name, next));
        value = argv[++i];
      }
      flag->value = value;
    }
    flag->given = true;
  }
  // Ranges are checked now, before a command does any work (a bad --windows used to surface
  // only after the checkpoint and the data were loaded). Text that is not a number is left to
  // get_int / get_double, which say so.
  for (const Flag& f : flags_) {
    if (!f.given || f.is_switch) continue;
    char* end = nullptr;
    const double x = std::strtod(f.value.c_str(), &end);
    if (!f.value.empty() && *end == '\0') check_range(f, x);
  }
  return true;
}

const Flags::Flag& Flags::find(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return f;
  throw std::logic_error("flag --" + name + " was not declared");
}

const std::string& Flags::get(const std::string& name) const { return find(name).value; }

int64_t Flags::get_int(const std::string& name) const {
  const std::string& v = get(name);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError(fmt::format("--{}: expected an integer, got '{}'", name, v));
  check_range(find(name), static_cast<double>(x));
  return x;
}

double Flags::get_double(const std::string& name) const {
  const std::string& v = get(name);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x))
    throw UsageError(fmt::format("--{}: expected a number, got '{}'", name, v));
  check_range(find(name), x);
  return x;
}

bool Flags::get_bool(const std::string& name) const { return get(name) == "true"; }
bool Flags::given(const std::string& name) const { return find(name).given; }
bool Flags::declared(const std::string& name) const {
  return std::any_of(flags_.begin(), flags_.end(), [&](const Flag& f) { return f.name == name; });
}

std::vector<std::pair<std::string, std::string>> Flags::values() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Flag& f : flags_) out.emplace_back(f.name, f.value);
  return out;
}

std::string Flags::help() const {
  std::string out =
      fmt::format("usage: depthgrad {} [flags]\n\n{}\n\nflags:\n", command_, summary_);
  for (const Flag& f : flags_) {
    std::string left =
        f.is_switch ? fmt::format("  --{}", f.name) : fmt::format("  --{} VALUE", f.name);
    // The default once: not for switches that are off or flags without one, nor when the help
    // text already names it ("(default: heads)").
    const bool says_default = f.help.find("default") != std::string::npos;
    std::string def =
        (f.is_switch && f.default_value == "false") || f.default_value.empty() || says_default
            ? ""
            : fmt::format(" (default: {})", f.default_value);
    std::string aliases;
    for (const std::string& a : f.aliases) aliases += fmt::format(" (alias: --{})", a);
    out += fmt::format("{:<28} {}{}{}\n", left, f.help, def, aliases);
  }
  out += fmt::format("  {:<26} {}\n", "--help", "show this help");
  return out;
}

}  // namespace dg::cli
