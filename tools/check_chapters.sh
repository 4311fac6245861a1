#!/usr/bin/env bash
# Checks the learner's path's chapters against the code they teach: every chapter file
# (<folder>/learn-NN-<topic>.md, git-tracked) lists what it covers under the heading
# "## What this chapter covers", one line per file:
#
#   - `autograd/ops_arithmetic.cpp`: `mul`, `mul_backward`, `struct BroadcastPlan`
#
# and this fails, naming the chapter and line, when a listed file is gone, when a listed name no
# longer appears in its file as a definition-like use (the name followed by '(', or after struct,
# class, enum class, using or #define), when a chapter lists nothing, when README.md does not link
# a chapter, or when a chapter has no checks (tools/learn/checks/chNN.cpp) and stubs
# (tools/learn/stubs/chNN.cpp). It cannot tell a definition from a call: a name that is only
# called in its file still passes. Usage: tools/check_chapters.sh [repo root]
set -euo pipefail
root=${1:-.}
cd "$root"
status=0
fail() { echo "$1"; status=1; }
mapfile -t chapters < <(git ls-files -- '*learn-[0-9][0-9]-*.md' | sort)
for chapter in "${chapters[@]}"; do
  base=$(basename "$chapter")
  number=${base#learn-}
  number=${number%%-*}
  grep -q "($chapter)\|(\./$chapter)" README.md || fail "README.md: does not link chapter $chapter"
  for f in "tools/learn/checks/ch$number.cpp" "tools/learn/stubs/ch$number.cpp"; do
    [ -f "$f" ] || fail "$chapter: its exercises' file $f does not exist"
  done
  listed=0
  in_section=0
  line_number=0
  while IFS= read -r line; do
    line_number=$((line_number + 1))
    if [[ $line == "## What this chapter covers"* ]]; then in_section=1; continue; fi
    [[ $in_section == 1 && $line == "## "* ]] && break
    [[ $in_section == 1 ]] || continue
    [[ $line =~ ^-\ \`([^\`]+)\`:\ (.*)$ ]] || continue
    file=${BASH_REMATCH[1]}
    names=${BASH_REMATCH[2]}
    listed=$((listed + 1))
    if [ ! -f "$file" ]; then
      fail "$chapter:$line_number: names $file, which does not exist"
      continue
    fi
    while read -r name; do
      [ -n "$name" ] || continue
      name=${name#struct }
      name=${name#class }
      pattern="(^|[^A-Za-z0-9_])$name[[:space:]]*\\(|(struct|class|enum class|using|#define)[[:space:]]+$name([^A-Za-z0-9_]|$)"
      grep -Eq "$pattern" "$file" ||
        fail "$chapter:$line_number: names '$name' in $file, which no longer has it"
    done < <(grep -o '`[^`]*`' <<<"$names" | tr -d '`')
  done <"$chapter"
  [ "$listed" -gt 0 ] || fail "$chapter: lists no file under '## What this chapter covers'"
done
if [ "$status" -eq 0 ]; then echo "check_chapters: ${#chapters[@]} chapters, every named function found"; fi
exit "$status"
