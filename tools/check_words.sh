#!/usr/bin/env bash
# Checks that the tree's words describe the project, not how it was made: fails listing file:line
# for issue numbers, prose about work sessions, absolute machine paths and commit-hash-like words.
# It does not read data: tools/results/<run>/, tests/fuzz/corpus/, tests/data/, generated files.
#
# Usage: tools/check_words.sh [--exclude PATH]... [repo root]
#   --exclude PATH  leave one tracked file out (temporary: for a file being rewritten elsewhere,
#                   e.g. README.md; the caller names it, so the exception is visible where it is
#                   made and removed by deleting the flag)
#
# What fails (each line of each git-tracked text file outside the data above):
#   issue     "issue" or "issues" followed by a number, case-insensitive, with or without "#".
#   session   the word session(s) anywhere, also inside identifiers (session_start_): depthgrad has
#             no concept called a session, so any use is prose about how the code was written.
#             The one program use is evolve's result key runtime.sessions (it counts the program's
#             invocations of a resumed run; kept results and tests read it): allowed only as the
#             quoted key "sessions" or the dotted name runtime.sessions.
#   path      an absolute path of one machine: /work/, /home/, /root/, /Users/ (not inside a
#             URL: a slash preceded by a letter, digit or dot is part of a host or path there).
#   hash      a word of 7 to 40 lowercase hex digits with at least one letter and one digit (a
#             commit hash), except: a URL or path segment (next to a '/'), a line that names a
#             SHA-256 (sha256, SHA-256, SHA256SUMS), a file whose path names sha256 (its tests
#             are hex), the hex alphabet 0123456789abcdef, and parts of numbers (after a '.', or
#             an exponent like 1e-10).
# Generated files are those whose first line says GENERATED, and tools/results/scales.* (written
# by `depthgrad reproduce --combine`). This script and tests/check_words_teeth.sh are left out too:
# they must name the words they forbid.
set -euo pipefail

excludes=()
root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --exclude)
      [ $# -ge 2 ] || { echo "check_words: --exclude needs a path" >&2; exit 2; }
      excludes+=("$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "check_words: unknown option $1" >&2; exit 2 ;;
    *) root="$1"; shift ;;
  esac
done
cd "${root:-$(dirname "$0")/..}"
git rev-parse --is-inside-work-tree > /dev/null 2>&1 ||
  { echo "check_words: $(pwd) is not a git work tree" >&2; exit 2; }

files() {  # tracked files that are not data, one per line
  git ls-files |
    grep -vE '^tools/results/[^/]+/|^tools/results/scales\.|^tests/fuzz/corpus/|^tests/data/' |
    grep -vxE 'tools/check_words\.sh|tests/check_words_teeth\.sh' |
    { if [ ${#excludes[@]} -gt 0 ]; then grep -vxF -f <(printf '%s\n' "${excludes[@]}"); else cat; fi; } || true
}

# One perl pass over every file; prints "file:line: kind: text" for each finding.
findings=$(files | perl -e '
  use strict; use warnings;
  my $n = 0;
  while (my $f = <STDIN>) {
    chomp $f;
    next unless -f $f && !-l $f;
    next if -B $f;  # binary
    open(my $fh, "<", $f) or next;
    my $sha_file = $f =~ /sha256/i;
    while (my $line = <$fh>) {
      last if $. == 1 && $line =~ /GENERATED/;
      my @hits;
      push @hits, ["issue", $1] while $line =~ /\b(issues?\s*#?\s*\d+)/gi;
      while ($line =~ /(\S*(?<![A-Za-z])sessions?(?![A-Za-z])\S*)/gi) {
        my $w = $1;
        next if $w =~ /"sessions"|runtime\.sessions/;
        push @hits, ["session", $w];
      }
      push @hits, ["path", $1] while $line =~ m{((?<![\w.])/(?:work|home|root|Users)/\S*)}g;
      unless ($sha_file || $line =~ /sha-?256/i) {
        while ($line =~ m{(?<![\w.])([0-9a-f]{7,40})(?![\w])}g) {
          my ($w, $s, $e) = ($1, $-[1], $+[1]);
          next unless $w =~ /[a-f]/ && $w =~ /[0-9]/;
          next if $w eq "0123456789abcdef";
          my $before = $s > 0 ? substr($line, $s - 1, 1) : "";
          my $after = substr($line, $e, 1);
          next if $before eq "/" || $after eq "/";            # a URL or path segment
          next if $before =~ /[-+]/ && $s > 1 && substr($line, $s - 2, 1) =~ /[eE]/;  # 1e-10
          next if $after eq "." && substr($line, $e + 1, 1) =~ /\d/;  # the start of a number
          push @hits, ["hash", $w];
        }
      }
      for my $h (@hits) { print "$f:$.: $h->[0]: $h->[1]\n"; $n++; }
    }
    close $fh;
  }
')

if [ -n "$findings" ]; then
  printf '%s\n' "$findings"
  echo "check_words: $(printf '%s\n' "$findings" | wc -l) finding(s) describe how the tree was made" \
    "(issue numbers, work sessions, machine paths, commit hashes); say what the project does" >&2
  exit 1
fi
echo "check_words: $(files | wc -l) tracked files describe the project"
