#!/usr/bin/env bash
# A dataset keeps one descriptor per shard file open. With more shards than
# the soft open-file limit, lf-shard, lf-plan and lf-server raise the soft
# limit to the hard one and work; where the hard limit itself is too low,
# they fail with a message that names the shard file, the shard count and
# the limit to raise, and exit 1 (no crash, no partial output). lf-server
# reads through the dataset's own descriptors: under a hard limit a few
# dozen above the shard count (lf-plan's need) it serves a whole epoch to a
# client (it opened every shard a second time, and failed to start, with
# 3,000 shards under a limit of 3,100).
set -euo pipefail
BIN=${LF_BIN:?run through tests/run.sh}
work=$(mktemp -d "${TMPDIR:-/tmp}/lf-open-files.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$BIN/lf-shard" synth tokens --out "$work/ds" --samples 4000 --seed 2 --shard-size 4K \
  --threads 1 >"$work/synth.log" 2>&1 || { cat "$work/synth.log" >&2; fail "synth"; }
nshards=$(ls "$work/ds" | grep -c '\.lfs$')
[[ $nshards -ge 60 ]] || fail "only $nshards shards; the test needs more than the limit of 40"
hard=$(ulimit -Hn)
[[ $hard == unlimited || $hard -gt $((nshards + 64)) ]] ||
  { echo "skip: hard open-file limit $hard is too low for the raised case"; exit 77; }

# Soft limit 40, hard limit as it is: raised, everything works.
(ulimit -Sn 40 && "$BIN/lf-shard" verify "$work/ds") >"$work/verify.log" 2>&1 ||
  { cat "$work/verify.log" >&2; fail "lf-shard verify under a soft limit of 40"; }
(ulimit -Sn 40 && "$BIN/lf-plan" "$work/ds" --world 2 --steps 3) >"$work/plan.log" 2>&1 ||
  { cat "$work/plan.log" >&2; fail "lf-plan under a soft limit of 40"; }
(ulimit -Sn 40 && "$BIN/lf-server" --data "$work/ds" --world 1 --print-plan) \
  >"$work/print.log" 2>&1 || { tail -3 "$work/print.log" >&2; fail "lf-server under a soft limit of 40"; }
echo "$nshards shards under a soft limit of 40: lf-shard, lf-plan, lf-server raise it: ok"

# Hard limit: the shards and 48 more, for the server's sockets, eventfd,
# io_uring and ring memfd; twice the shards would not fit.
limit=$((nshards + 48))
[[ $limit -lt $((2 * nshards)) ]] || fail "$nshards shards: too few for a limit between one and two descriptors a shard"
mkdir -m 700 "$work/rt"
(ulimit -n "$limit" && exec "$BIN/lf-server" --data "$work/ds" --world 1 --endpoint "$work/rt/ctl" --quiet) \
  >"$work/server.log" 2>&1 &
server=$!
if ! "$BIN/lf-rank-loop" --endpoint "$work/rt/ctl" --rank 0 --world 1 >"$work/client.log" 2>&1; then
  kill -9 "$server" 2>/dev/null || true
  cat "$work/server.log" "$work/client.log" >&2
  fail "lf-server under a hard limit of $limit ($nshards shards) did not serve its epoch"
fi
wait "$server" || { cat "$work/server.log" >&2; fail "lf-server under a hard limit of $limit: exit $?"; }
echo "$nshards shards under a hard limit of $limit: lf-server serves an epoch: ok"

# Hard limit 40: a clear error, exit 1.
for cmd in "lf-shard verify $work/ds" "lf-plan $work/ds --world 2 --steps 3" \
           "lf-server --data $work/ds --world 1 --print-plan"; do
  rc=0
  # shellcheck disable=SC2086
  (ulimit -n 40 && "$BIN"/$cmd) >"$work/out.log" 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || { cat "$work/out.log" >&2; fail "$cmd under a hard limit of 40: exit $rc"; }
  grep -q "shard-.*Too many open files: the dataset has $nshards shards, each held open; raise the open-file limit" \
    "$work/out.log" || { cat "$work/out.log" >&2; fail "$cmd: no clear message"; }
done
echo "hard limit of 40: each fails with the shard, the count and the limit to raise: ok"
