#!/usr/bin/env bash
# Checks that functions stay short enough for a reader to hold, counted from the first line of
# the signature to the closing brace (a class body is not a function; its member functions are):
#  - in the library (tensor/ autograd/ nn/ train/), at most ALLOW functions over LIMIT lines
#    (default: 5 over 80); it fails listing them all when there are more;
#  - everywhere checked (the library and tools/), no function over CAP lines (default 150).
# A data table is exempt from both: a function whose signature's previous line starts with
# "// data table" (the gradient-check rows, <family>_op_cases(), are tables of cases, not steps).
# Generated files are not checked (train/lm/text/unicode_tables.cpp). It matches braces with awk,
# skipping comments, strings, character literals and preprocessor lines; it does not parse C++,
# so a lambda counts as part of the function around it.
# Usage: tools/check_function_length.sh [repo root] [--limit N] [--allow N] [--cap N] [--top N]
#   --top N lists the N longest functions (data tables marked) instead of checking. Exits 1 when
#   the check fails.
set -euo pipefail
root=""
limit=80
allow=5
cap=150
top=0
while [ $# -gt 0 ]; do
  case "$1" in
    --limit) limit="$2"; shift 2 ;;
    --allow) allow="$2"; shift 2 ;;
    --cap) cap="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    *) root="$1"; shift ;;
  esac
done
cd "${root:-$(dirname "$0")/..}"

# generated sources: written by a script, not read as code
generated='^train/lm/text/unicode_tables\.cpp$'

files=$(find tensor autograd nn train tools -type f \( -name '*.cpp' -o -name '*.h' \) | sort |
  grep -Ev "$generated" || true)

# One line per function: "<lines> <file>:<line> <name> <table>", table 1 for a data table.
# State: `mode` is "" at namespace or class scope, "F" inside a function body, "O" inside another
# braced block at scope level (an initializer); `depth` counts braces inside F or O.
measure() {
  awk '
    function reset_header() { hdr = ""; hdr0 = ""; hasparen = 0; pdepth = 0; hdrline = 0 }
    function name_of(h,   m) {
      if (match(h, /[A-Za-z_~][A-Za-z0-9_:~<>=!+*\/&|^%\[\]-]*[ \t]*\(/)) {
        m = substr(h, RSTART, RLENGTH - 1); sub(/[ \t]+$/, "", m); return m
      }
      return "?"
    }
    FNR == 1 { mode = ""; depth = 0; incomment = 0; inraw = 0; cont = 0; nscope = 0; reset_header()
               split("", text) }
    {
      text[FNR] = $0
      line = $0
      if (!incomment && !inraw) {
        if (cont) { cont = (line ~ /\\$/); next }
        if (line ~ /^[ \t]*#/) { cont = (line ~ /\\$/); next }
      }
      n = length(line); i = 1
      while (i <= n) {
        c = substr(line, i, 1)
        if (incomment) {
          if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i += 2; continue }
          i++; continue
        }
        if (inraw) {
          k = index(substr(line, i), ")" rawdelim "\"")
          if (k == 0) { i = n + 1; continue }
          i += k + length(rawdelim) + 1; inraw = 0; continue
        }
        if (c == "/" && substr(line, i + 1, 1) == "/") break
        if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i += 2; continue }
        if (c == "\"") {
          if (i > 1 && substr(line, i - 1, 1) == "R") {
            k = index(substr(line, i + 1), "(")
            rawdelim = substr(line, i + 1, k - 1); inraw = 1; i = i + 1 + k; continue
          }
          j = i + 1
          while (j <= n) {
            d = substr(line, j, 1)
            if (d == "\\") { j += 2; continue }
            if (d == "\"") break
            j++
          }
          i = j + 1; c = "\"\""
        } else if (c == "'\''") {
          p = (i > 1) ? substr(line, i - 1, 1) : ""
          q = substr(line, i + 1, 1)
          if (p ~ /[0-9a-fA-F]/ && q ~ /[0-9a-fA-F]/ && substr(line, i + 2, 1) != "'\''") { i++; continue }
          j = i + 1
          while (j <= n) {
            d = substr(line, j, 1)
            if (d == "\\") { j += 2; continue }
            if (d == "'\''") break
            j++
          }
          i = j + 1; c = "'\'''\''"
        } else {
          i++
        }
        if (mode != "") {
          if (c == "{") depth++
          else if (c == "}") {
            depth--
            if (depth == 0) {
              if (mode == "F") print (FNR - fstart + 1) " " FILENAME ":" fstart " " fname " " ftable
              mode = ""; reset_header()
            }
          }
          continue
        }
        if (c == "{") {
          h = hdr0
          if (!hasparen) {
            if (h ~ /(^|[^A-Za-z0-9_])(namespace|class|struct|union|enum|extern)([^A-Za-z0-9_]|$)/) {
              nscope++; reset_header(); continue
            }
            mode = "O"; depth = 1; continue
          }
          if (h !~ /operator/ && (h ~ /=[ \t]*$/ || h ~ /(^|[^A-Za-z0-9_])concept([^A-Za-z0-9_]|$)/)) {
            mode = "O"; depth = 1; continue
          }
          mode = "F"; depth = 1; fstart = hdrline ? hdrline : FNR; fname = name_of(hdr0)
          ftable = (fstart > 1 && text[fstart - 1] ~ /^[ \t]*\/\/ data table/) ? 1 : 0; continue
        }
        if (c == "}") { if (nscope > 0) nscope--; reset_header(); continue }
        if (c == ";" && pdepth == 0) { reset_header(); continue }
        if (hdrline == 0 && c !~ /[ \t]/) hdrline = FNR
        if (c == "(") { if (pdepth == 0) { hdr0 = hdr0 "("; hasparen = 1 } pdepth++; continue }
        if (c == ")") { if (pdepth > 0) pdepth--; if (pdepth == 0) hdr0 = hdr0 ")"; continue }
        if (pdepth == 0) hdr0 = hdr0 c
      }
      if (mode == "" && hdr0 != "") hdr0 = hdr0 " "
    }
  ' $files
}

if [ "$top" -gt 0 ]; then
  measure | sort -rn | head -n "$top" |
    awk '{ printf "%s %s %s%s\n", $1, $2, $3, $4 == 1 ? " (data table)" : "" }'
  exit 0
fi

lengths=$(measure)
status=0
too_long=$(echo "$lengths" | awk -v cap="$cap" '$4 == 0 && $1 > cap' | sort -rn)
if [ -n "$too_long" ]; then
  echo "functions longer than $cap lines (split them into named steps):"
  echo "$too_long" | awk '{ printf "  %s %s: %d lines\n", $2, $3, $1 }'
  status=1
fi
library='^(tensor|autograd|nn|train)/'
over=$(echo "$lengths" | awk -v limit="$limit" -v lib="$library" '$4 == 0 && $1 > limit && $2 ~ lib' |
  sort -rn)
count=$(echo -n "$over" | grep -c . || true)
if [ "$count" -gt "$allow" ]; then
  echo "$count functions in tensor/ autograd/ nn/ train/ are longer than $limit lines; at most" \
    "$allow may be (split them into named steps; a data table is marked '// data table'):"
  echo "$over" | awk '{ printf "  %s %s: %d lines\n", $2, $3, $1 }'
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "no function over $cap lines in tensor/ autograd/ nn/ train/ tools/, and $count (at most" \
    "$allow) over $limit lines in tensor/ autograd/ nn/ train/ (data tables aside)"
fi
exit "$status"
