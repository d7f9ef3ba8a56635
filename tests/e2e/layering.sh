#!/usr/bin/env bash
# The source folders stay layered, so each can be read and changed from the
# bottom up:
#  1. nothing under server/ includes a header that lives under tools/: what
#     the programs share lives in common/, below both (each #include "x.h"
#     is resolved as the compiler does: the file's own folder, then the
#     Makefile's -I folders in order);
#  2. within server/, balancer/ and client/, the objects' symbol graph has
#     no cycle: an edge A -> B where A.o uses a global symbol that B.o
#     defines (nm on $B/obj/FOLDER/*.o, one object per source in the tree).
#     A cycle is named with the symbols on each of its edges.
# Usage (through tests/run.sh): tests/e2e/layering.sh [FOLDER...] limits the
# symbol check to the folders named; the default checks all three.
set -euo pipefail
B=${LF_BUILD:?run through tests/run.sh}
root=${LF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
folders=("$@")
[[ ${#folders[@]} -gt 0 ]] || folders=(server balancer client)
bad=0
problem() { echo "FAIL: $*" >&2; bad=1; }

# 1. server/ includes nothing from tools/.
read -r -a incdirs <<<"$(sed -n 's/^INCLUDES *:= *//p' Makefile | sed 's/-I//g')"
[[ ${#incdirs[@]} -gt 0 ]] || problem "no INCLUDES line in the Makefile"
resolve() {   # FILE HEADER: prints the header's path relative to the root, if found
  local d
  for d in "$(dirname "$1")" "${incdirs[@]}"; do
    [[ -f $d/$2 ]] && { realpath --relative-to=. "$d/$2"; return; }
  done
}
nincl=0
for f in server/*.c server/*.h; do
  [[ -f $f ]] || continue
  while read -r h; do
    nincl=$((nincl + 1))
    p=$(resolve "$f" "$h")
    if [[ $p == tools/* ]]; then
      problem "$f includes \"$h\", which is $p: server/ must not use tools/ (shared code belongs in common/)"
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
[[ $nincl -gt 0 ]] || problem "found no #include \"...\" in server/: the check looked at nothing"
[[ $bad -eq 1 ]] || echo "server/: $nincl quoted includes, none from tools/"

# 2. No cycle among a folder's objects.
edges() {   # OBJECT...: "A B SYMBOL" for each global symbol A.o takes from B.o
  local o
  for o in "$@"; do
    nm -P -g --defined-only "$o" | awk -v f="$(basename "$o" .o)" '{print "D", f, $1}'
    nm -P -u "$o" | awk -v f="$(basename "$o" .o)" '{print "U", f, $1}'
  done | awk '$1 == "D" {def[$3] = $2; next}
              {use[++n] = $2 " " $3}
              END {for (i = 1; i <= n; i++) {
                     split(use[i], u, " ")
                     if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]], u[2]
                   }}' | sort -u
}
for d in "${folders[@]}"; do
  objs=()
  for src in "$d"/*.c; do
    [[ -f $src ]] || continue
    o=$B/obj/${src%.c}.o
    if [[ -f $o ]]; then objs+=("$o"); else problem "$o is not built (make build)"; fi
  done
  [[ ${#objs[@]} -gt 0 ]] || { problem "$d/: no sources or objects to check"; continue; }
  e=$(edges "${objs[@]}")
  pairs=$(awk 'NF {print $1, $2}' <<<"$e" | sort -u)
  # tsort names the members of each loop it finds, one per line (and
  # fails, which is what this looks for).
  loop=$({ tsort <<<"$pairs" 2>&1 >/dev/null || true; } |
         sed -n '/input contains a loop/,$ { /input contains a loop/d; s/^tsort: //p }' | sort -u)
  if [[ -n $loop ]]; then
    members=" $(echo $loop) "
    problem "$d/: the objects' symbol graph has a cycle through $(echo $loop | sed 's/ /, /g'); its edges (user -> definer: symbols):"
    awk -v m="$members" 'index(m, " " $1 " ") && index(m, " " $2 " ") {
           k = $1 " -> " $2; if (k in s) s[k] = s[k] ", " $3; else s[k] = $3 }
         END {for (k in s) print "  " k ": " s[k]}' <<<"$e" | sort >&2
  else
    echo "$d/: ${#objs[@]} objects, $(grep -c . <<<"$pairs" || true) edges between them, no cycle"
  fi
done
[[ $bad -eq 0 ]] || exit 1
echo "layering: ok"
