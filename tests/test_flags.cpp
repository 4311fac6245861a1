// The depthgrad CLI's flag parser (tools/cli/flags.h): values, switches, defaults, and the
// errors that name the flag, including a value that is really the next flag.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_helpers.h"
#include "tools/cli/flags.h"
#include "train/lm/run_config.h"

using dg::cli::Flags;
using dg::cli::UsageError;
using dg::test::contains;

namespace {

Flags train_flags() {
  Flags f("train", "test command");
  f.add("output", "runs/out", "where to write");
  f.add("steps", "30", "training steps");
  f.add("lr", "0.001", "learning rate");
  f.add_switch("quiet", "less output");
  return f;
}

// Parses the words after the command name; returns false when --help was asked for.
bool parse(Flags& f, std::vector<std::string> words) {
  words.insert(words.begin(), {"depthgrad", "train"});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return f.parse(static_cast<int>(argv.size()), argv.data(), 2);
}

}  // namespace

TEST_CASE("flags: values, switches and defaults") {
  Flags f = train_flags();
  REQUIRE(parse(f, {"--output", "runs/a", "--steps=5", "--quiet"}));
  CHECK(f.get("output") == "runs/a");
  CHECK(f.get_int("steps") == 5);
  CHECK(f.get_double("lr") == 0.001);
  CHECK_FALSE(f.given("lr"));
  CHECK(f.given("steps"));
  CHECK(f.get_bool("quiet"));
  Flags h = train_flags();
  CHECK_FALSE(parse(h, {"--steps", "5", "--help"}));
}

TEST_CASE("flags: a value that is the next flag is refused, naming the flag") {
  Flags f = train_flags();
  CHECK_THROWS_WITH_AS(parse(f, {"--output", "--steps", "5"}),
                       doctest::Contains("--output: missing value (the next argument '--steps' is "
                                         "a flag; write --output=--steps if that is the value)"),
                       UsageError);
  // Before, "--output --quiet" ran with output "--quiet" and quiet off.
  Flags g = train_flags();
  CHECK_THROWS_WITH_AS(parse(g, {"--output", "--quiet"}),
                       doctest::Contains("--output: missing value"), UsageError);
  Flags h = train_flags();
  CHECK_THROWS_WITH_AS(parse(h, {"--steps", "--"}), doctest::Contains("--steps: missing value"),
                       UsageError);
  // Meant literally, it can be given with '='.
  Flags e = train_flags();
  REQUIRE(parse(e, {"--output=--odd-name"}));
  CHECK(e.get("output") == "--odd-name");
  Flags m = train_flags();
  CHECK_THROWS_WITH_AS(parse(m, {"--output"}), doctest::Contains("--output: missing value"),
                       UsageError);
}

TEST_CASE("flags: a negative number is a value and reaches the flag's own check") {
  Flags f = train_flags();
  REQUIRE(parse(f, {"--lr", "-1"}));
  CHECK(f.get_double("lr") == -1.0);  // the run config's check refuses it (training.lr)
  // --steps has its range in flag_ranges(): refused while parsing, naming the flag
  Flags s = train_flags();
  CHECK_THROWS_WITH_AS(parse(s, {"--steps", "-5"}),
                       doctest::Contains("--steps: expected a value >= 1, got '-5'"), UsageError);
  Flags g = train_flags();
  REQUIRE(parse(g, {"--lr", "-1e-3"}));
  CHECK(g.get_double("lr") == -1e-3);
}

TEST_CASE("flags: unknown flags, stray words and bad numbers name what is wrong") {
  Flags f = train_flags();
  CHECK_THROWS_WITH_AS(parse(f, {"--stepz", "5"}), doctest::Contains("unknown flag --stepz"),
                       UsageError);
  Flags g = train_flags();
  CHECK_THROWS_WITH_AS(parse(g, {"5"}), doctest::Contains("unexpected argument '5'"), UsageError);
  Flags h = train_flags();
  REQUIRE(parse(h, {"--steps", "five"}));
  CHECK_THROWS_WITH_AS(h.get_int("steps"),
                       doctest::Contains("--steps: expected an integer, got 'five'"), UsageError);
  Flags q = train_flags();
  CHECK_THROWS_WITH_AS(parse(q, {"--quiet=maybe"}),
                       doctest::Contains("--quiet: expected true or false"), UsageError);
}

TEST_CASE("flags: numbers outside a flag's range are refused, naming the flag and the range") {
  // --vocab's range is listed by name (flag_ranges()); the others carry their own (a run-config
  // setting's, as tools/cli/run_config_flags.cpp gives them).
  auto flags = [] {
    Flags f("train", "test command");
    f.add("vocab", "512", "")
        .add("eval-windows", "32", "", dg::at_least(0))
        .add("clip", "1", "", dg::at_least(0));
    return f;
  };
  // Refused by parse(), before a command does any work.
  Flags a = flags(), b = flags(), c = flags(), ok = flags();
  CHECK_THROWS_WITH_AS(parse(a, {"--vocab", "100"}),
                       doctest::Contains("--vocab: expected a value >= 260 and <= 2147483647, "
                                         "got '100'"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse(b, {"--eval-windows", "-3"}),
                       doctest::Contains("--eval-windows: expected a value >= 0, got '-3'"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parse(c, {"--clip=-0.5"}),
                       doctest::Contains("--clip: expected a value >= 0"), UsageError);
  REQUIRE(parse(ok, {"--vocab", "260", "--eval-windows", "0"}));
  CHECK(ok.get_int("vocab") == 260);
  CHECK(ok.get_int("eval-windows") == 0);
}

TEST_CASE("flags: every numeric flag a command reads has a range (or its own check)") {
  // Read by name here; the run config's flags are read from the settings table with its ranges
  // (tools/cli/run_config_flags.cpp). The commands that check these themselves, with messages
  // of their own:
  const std::set<std::string> own_check{"temperature", "top-p", "top-k", "max-new-tokens"};
  // A run-config flag a command declares with add_run_config_flags and reads itself (bench
  // --accum) carries its setting's range.
  std::set<std::string> settings;
  for (const auto& row : dg::run_config_settings()) settings.insert(row.flag_name());
  const std::regex getter(R"re(get_(int|double)\("([a-z0-9-]+)"\))re");
  int seen = 0;
  for (const char* file :
       {"cmd_train.cpp", "cmd_reproduce.cpp", "cmd_evolve.cpp", "cmd_bench.cpp", "cmd_generate.cpp",
        "cmd_gradcheck.cpp", "train_samples.cpp", "shared_flags.cpp"}) {
    std::ifstream in(std::string(DG_SOURCE_DIR) + "/tools/cli/" + file);
    REQUIRE_MESSAGE(in.good(), file);
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator it(source.begin(), source.end(), getter), end; it != end; ++it) {
      const std::string name = (*it)[2];
      ++seen;
      CHECK_MESSAGE(
          (dg::cli::flag_ranges().count(name) || own_check.count(name) || settings.count(name)),
          "--" << name << " (" << file << ") has no range in flag_ranges()");
    }
  }
  CHECK(seen > 15);
}

TEST_CASE("flags: an alias parses as its flag and is listed beside it") {
  Flags f("train", "test command");
  f.add("output-dir", "runs/out", "where to write").alias("output");
  REQUIRE(parse(f, {"--output", "runs/a"}));
  CHECK(f.get("output-dir") == "runs/a");
  CHECK(f.given("output-dir"));
  Flags g("train", "test command");
  g.add("output-dir", "runs/out", "where to write").alias("output");
  REQUIRE(parse(g, {"--output-dir=runs/b"}));
  CHECK(g.get("output-dir") == "runs/b");
  CHECK(contains(g.help(), "--output-dir VALUE"));
  CHECK(contains(g.help(), "where to write (default: runs/out) (alias: --output)"));
}

TEST_CASE("flags: --help shows each default once, and none for a flag without one") {
  Flags f("train", "test command");
  f.add("steps", "30", "training steps")
      .add("kv-heads", "", "K/V heads (default: heads)")
      .add("config", "", "JSON run config")
      .add("threads", "2", "threads (default: physical cores)");
  const std::string help = f.help();
  CHECK(contains(help, "training steps (default: 30)\n"));
  CHECK(contains(help, "K/V heads (default: heads)\n"));  // not "... (default: none)"
  CHECK(contains(help, "JSON run config\n"));             // nothing appended
  CHECK(contains(help, "threads (default: physical cores)\n"));
  CHECK_FALSE(contains(help, "(default: none)"));
  CHECK_FALSE(contains(help, "(default: 2)"));
}
