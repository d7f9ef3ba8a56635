# Sourced by the benchmark scripts that time commands (run.sh skips
# *_lib.sh): the build's paths, a scratch folder removed on exit, and
# best_of_3, the one way they time a command.
B=${LF_BUILD:?run through make bench}
bin=${LF_BIN:-$B/bin}
lf="$bin/lf-shard"
threads=$(nproc)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lf_$(basename "$0" .sh)_bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
TIMEFORMAT='%R %U %S'

# Best (least wall time) of 3 runs of a command, output discarded: "wall cpu".
best_of_3() {
  local t
  for _ in 1 2 3; do
    t=$( { time "$@" >/dev/null 2>&1; } 2>&1 )
    awk '{ printf "%.4f %.4f\n", $1, $2 + $3 }' <<<"$t"
  done | sort -n | head -n 1
}
