#!/usr/bin/env bash
# Renders a run's report.html in headless Chromium, saves a PNG screenshot and the browser's DOM,
# and checks that every number the page marks with data-json/data-value (after the browser has
# parsed it) equals the number at that path in the run's result.json. Shell and awk only.
#
#   tools/check_report.sh RUN_DIR [OUT_DIR]
#
# RUN_DIR holds result.json and report.html (as written by `depthgrad reproduce`). Writes
# OUT_DIR/report.png and OUT_DIR/report.dom.html (OUT_DIR defaults to RUN_DIR). Environment:
#   CHROMIUM       browser binary (default: chromium, chromium-browser or google-chrome on PATH)
#   SHOT_SIZE      screenshot window "WIDTH,HEIGHT" in CSS pixels (default 1200,5600); the
#                  screenshot is the window, so raise HEIGHT for long reports (many seeds).
# Exit status: 0 all checks pass, 1 a check failed, 2 usage error or no browser.
# Needs Debian's `chromium` (apt-get install chromium). Never run by the unit tests.
set -euo pipefail

usage() { echo "usage: tools/check_report.sh RUN_DIR [OUT_DIR]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
run_dir="$1"
out_dir="${2:-$run_dir}"
result="$run_dir/result.json"
report="$run_dir/report.html"
[ -f "$result" ] || { echo "check_report: $result does not exist" >&2; exit 2; }
[ -f "$report" ] || { echo "check_report: $report does not exist" >&2; exit 2; }
mkdir -p "$out_dir"

browser="${CHROMIUM:-}"
if [ -z "$browser" ]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then browser="$candidate"; break; fi
  done
fi
[ -n "$browser" ] || { echo "check_report: no Chromium found; install it with: apt-get install chromium" >&2; exit 2; }

profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
url="file://$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-sync --no-first-run --disable-dev-shm-usage --hide-scrollbars --force-device-scale-factor=1
       --user-data-dir="$profile")
png="$out_dir/report.png"
dom="$out_dir/report.dom.html"
log="$out_dir/chromium.log"

rm -f "$png"
"$browser" "${flags[@]}" --window-size="${SHOT_SIZE:-1200,5600}" --screenshot="$png" "$url" >"$log" 2>&1 || true
"$browser" "${flags[@]}" --dump-dom "$url" >"$dom" 2>>"$log" || true

failures=0
fail() { echo "check_report: FAIL: $*" >&2; failures=$((failures + 1)); }

[ -s "$png" ] || fail "no screenshot written (see $log)"
grep -q '</html>' "$dom" || fail "the DOM dump is empty or truncated (see $log)"

# result.json (written one member per line) -> "path<TAB>number" lines, paths like
# seed_results[1].rd_attnres.lm_loss. Containers are tracked with a stack, not by indentation.
flatten_json() {
  awk '
    function here() { return depth > 0 ? path[depth] : "" }
    {
      line = $0
      sub(/^[ \t]+/, "", line); sub(/[ \t\r]+$/, "", line)
      if (line == "") next
      c = substr(line, 1, 1)
      if (c == "}" || c == "]") { depth--; next }
      name = ""; rest = line
      if (depth > 0 && kind[depth] == "o") {
        i = 2
        while (i <= length(line)) {
          ch = substr(line, i, 1)
          if (ch == "\\") { i += 2; continue }
          if (ch == "\"") break
          i++
        }
        key = substr(line, 2, i - 2)
        rest = substr(line, i + 1); sub(/^[ \t]*:[ \t]*/, "", rest)
        name = here() == "" ? key : here() "." key
      } else if (depth > 0) {
        name = here() "[" index_of[depth] "]"; index_of[depth]++
      }
      sub(/,$/, "", rest)
      if (rest == "{") { depth++; kind[depth] = "o"; path[depth] = name; next }
      if (rest == "[") { depth++; kind[depth] = "a"; path[depth] = name; index_of[depth] = 0; next }
      if (rest ~ /^-?[0-9]/) print name "\t" rest
    }' "$1"
}

# data-json / data-value pairs of a page -> "path<TAB>value" lines.
page_numbers() {
  grep -o 'data-json="[^"]*" data-value="[^"]*"' "$1" | sed 's/^data-json="\([^"]*\)" data-value="\([^"]*\)"$/\1\t\2/' || true
}

flat="$(mktemp)"; in_dom="$(mktemp)"; in_file="$(mktemp)"
trap 'rm -rf "$profile" "$flat" "$in_dom" "$in_file"' EXIT
flatten_json "$result" >"$flat"
page_numbers "$dom" >"$in_dom"
page_numbers "$report" >"$in_file"

n_dom=$(wc -l <"$in_dom"); n_file=$(wc -l <"$in_file")
[ "$n_dom" -gt 0 ] || fail "the DOM has no data-value elements"
[ "$n_dom" -eq "$n_file" ] || fail "report.html has $n_file data-value elements but the browser's DOM has $n_dom (markup the browser dropped?)"

# Compare as numbers (awk reads both with strtod, so equal text-forms of one double compare equal).
mismatches=$(awk -F '\t' '
  NR == FNR { value[$1] = $2; next }
  !($1 in value) { print "  " $1 ": not a number in result.json"; next }
  ($2 + 0) != (value[$1] + 0) { print "  " $1 ": page " $2 ", result.json " value[$1] }' "$flat" "$in_dom")
if [ -n "$mismatches" ]; then
  fail "numbers in the page differ from result.json:"
  echo "$mismatches" >&2
fi

n_open=$(grep -o '<svg' "$dom" | wc -l); n_close=$(grep -o '</svg>' "$dom" | wc -l)
[ "$n_open" -gt 0 ] && [ "$n_open" -eq "$n_close" ] || fail "$n_open <svg> but $n_close </svg> in the DOM"
if grep -Eiwq 'nan|infinity' "$dom"; then fail "the DOM shows NaN or Infinity"; fi

if [ "$failures" -gt 0 ]; then
  echo "check_report: $failures check(s) failed for $report" >&2
  exit 1
fi
echo "check_report: $n_dom numbers in the rendered page equal result.json; $n_open charts"
echo "screenshot: $png"
echo "DOM: $dom"
