#!/usr/bin/env bash
# Proves that `depthgrad gradcheck` has teeth: plants a 1% error in one element of each op's
# backward in turn (DG_PLANT_ERROR, read by tests/support/plant_error.cpp in the gradcheck_teeth
# program, which runs gradcheck's table; one build, the op chosen at run time) and checks that
# the gradient checks then fail. Two plants per op: in every dtype (the float64
# central differences must catch it) and in float32 backwards only (the float32-vs-float64
# gradient comparison must catch it). Prints one line per plant and the kill rate per op family.
# With --second it plants instead in the nodes each op's backward records under create_graph
# (<op>:grad2: that op's second derivative wrong by 1%) and runs the second-derivative table
# (gradgradcheck), which must then fail.
# Opt-in (not in ctest: about two gradcheck runs per op). It does not edit or rebuild the tree.
# Usage: tools/gradcheck_teeth.sh PATH/TO/gradcheck_teeth [--second] [OP...]
#        (default: every op it runs)
# (`make gradcheck-teeth` builds the program, a CMake target built on request only, and runs this.)
set -uo pipefail
BIN=${1:?usage: tools/gradcheck_teeth.sh PATH/TO/gradcheck_teeth [OP...]}
shift
modes=(all f32)
list_tag=op
if [ "${1:-}" = "--second" ]; then
  shift
  modes=(grad2)
  list_tag=op2
  export DG_TEETH_ORDER=2
fi
export DEPTHGRAD_THREADS=${DEPTHGRAD_THREADS:-1}
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ops=("$@")
if [ ${#ops[@]} -eq 0 ]; then
  # Every op whose backward the suite runs, as the tape names it.
  mapfile -t ops < <(DG_PLANT_ERROR=list "$BIN" 2>&1 >/dev/null | awk -v tag="$list_tag" '$1 == tag {print $2}' | sort -u)
fi
if [ ${#ops[@]} -eq 0 ]; then echo "gradcheck_teeth: no ops found" >&2; exit 2; fi
if ! "$BIN" > /dev/null; then echo "gradcheck_teeth: gradcheck fails without a plant" >&2; exit 2; fi

declare -A family_total family_killed
total=0
killed=0
survivors=()
printf '%-28s %-6s %s\n' op plant result
for op in "${ops[@]}"; do
  # the family: the autograd/ops_<family>.cpp that names the op (elementwise, matmul, norm, ...)
  family=$(grep -l "\"$op\"" "$ROOT"/autograd/ops_*.cpp 2> /dev/null | head -1 | sed 's|.*/ops_||; s|\.cpp$||')
  family=${family:-other}
  for mode in "${modes[@]}"; do
    spec=$op
    [ "$mode" = f32 ] && spec="$op:f32"
    [ "$mode" = grad2 ] && spec="$op:grad2"
    DG_PLANT_ERROR=$spec "$BIN" > /tmp/gradcheck_teeth.$$ 2>&1
    rc=$?
    total=$((total + 1))
    family_total[$family]=$((${family_total[$family]:-0} + 1))
    if [ $rc -eq 1 ]; then
      result=killed
      killed=$((killed + 1))
      family_killed[$family]=$((${family_killed[$family]:-0} + 1))
    else
      result="SURVIVED (exit $rc)"
      survivors+=("$spec")
    fi
    printf '%-28s %-6s %s\n' "$op" "$mode" "$result"
  done
done
rm -f /tmp/gradcheck_teeth.$$
echo
printf '%-16s %s\n' family killed/planted
for family in $(printf '%s\n' "${!family_total[@]}" | sort); do
  printf '%-16s %d/%d\n' "$family" "${family_killed[$family]:-0}" "${family_total[$family]}"
done
echo "kill rate: $killed/$total planted errors caught by the gradient checks"
[ ${#survivors[@]} -eq 0 ] || echo "survivors: ${survivors[*]}"
[ $killed -eq $total ]
