#!/usr/bin/env bash
# Checks the Markdown of the tree: every relative link (](path) or ](path#anchor), not http(s),
# mailto or a bare #anchor; code blocks and code spans skipped) in every tracked .md file resolves to a file or folder, and the
# README's first program (its first ```cpp block) is tools/example/quickstart.cpp byte for byte,
# so the program a newcomer copies is the one the package test builds and runs. It does not
# check anchors or outside links (no network here).
# Usage: tools/check_docs.sh [repo root]. Prints each broken link; exits 1 if any.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# "line:target" for each link of a Markdown file: fenced blocks and code spans (which may run over
# a line break) are blanked first, keeping the line count, so code is never read as a link.
links_of() {
  perl -0777 -ne '
    s/^([ \t]*```.*?^[ \t]*```)/ "\n" x ($1 =~ tr{\n}{}) /gsme;
    s/(`[^`]*`)/ "\n" x ($1 =~ tr{\n}{}) /gse;
    my $line = 1;
    for my $chunk (split /(\n)/) {
      if ($chunk eq "\n") { $line++; next }
      print "$line:$1\n" while $chunk =~ /\]\(([^) ]+)/g;
    }' "$1"
}

failures=0
links=0
while IFS= read -r md; do
  dir=$(dirname "$md")
  # ](target) occurrences outside code spans; a target ends at ')' or whitespace (a title).
  while IFS=: read -r lineno target; do
    [ -z "$target" ] && continue
    case "$target" in http://* | https://* | mailto:* | '#'*) continue ;; esac
    path=${target%%#*}
    links=$((links + 1))
    if [ ! -e "$dir/$path" ]; then
      echo "$md:$lineno: link to '$target' does not resolve ($dir/$path does not exist)"
      failures=$((failures + 1))
    fi
  done < <(links_of "$md")
done < <(git ls-files '*.md' 2> /dev/null | grep -v '^tests/fuzz/corpus/' ||
  find . -name '*.md' -not -path './build*' | sed 's#^\./##')

# The README's first ```cpp block against the example program it shows.
readme_program=$(awk '/^```cpp$/ { inside = 1; next } inside && /^```$/ { exit } inside { print }' README.md)
if [ "$readme_program" != "$(cat tools/example/quickstart.cpp)" ]; then
  echo "README.md: its first \`\`\`cpp block differs from tools/example/quickstart.cpp (the program the package test runs):"
  diff <(echo "$readme_program") tools/example/quickstart.cpp | head -20 || true
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "check_docs: $failures problem(s) in the Markdown" >&2
  exit 1
fi
echo "check_docs: $links relative links resolve; the README's program is tools/example/quickstart.cpp"
