#!/usr/bin/env bash
# The control plane: a second server on the same endpoint refuses to start
# and leaves the first alone; lf-stat answers (JSON and live lines); a rank
# the server does not serve is refused with the server's reason; a runtime
# directory that others can enter is refused; nothing is left behind.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 2 --budget 400000
# A second server on the same endpoint must refuse, and leave the first alone.
server_refuses "a second server on $EP" "another server" \
  --endpoint "$EP" --data "$WORK/ds" --world 2 --budget 400000
# lf-stat answers with the documented fields.
"$LF_BIN/lf-stat" "$EP" --json >"$WORK/stat.json" || fail "lf-stat --json"
for k in bytes_read blocks_decoded cache_hits queue_depth busy_ns ranks data_wait_ns; do
  grep -q "\"$k\"" "$WORK/stat.json" || fail "lf-stat --json lacks $k"
done
# Without an argument it asks where a trainer would: $LEVELFEED_ENDPOINT.
LEVELFEED_ENDPOINT="$EP" "$LF_BIN/lf-stat" --json >"$WORK/stat-env.json" ||
  fail "lf-stat with LEVELFEED_ENDPOINT=$EP and no argument: exit $?"
grep -q '"state"' "$WORK/stat-env.json" || fail "lf-stat via LEVELFEED_ENDPOINT: $(cat "$WORK/stat-env.json")"
live=$("$LF_BIN/lf-stat" "$EP" --count 2 --interval-ms 100) || fail "lf-stat live: exit $?"
[[ $(grep -c "samples/s" <<<"$live") == 2 ]] || fail "lf-stat live: want 2 lines, got: $live"
# A rank this server does not serve is refused with the server's reason.
if "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 5 --world 2 >"$WORK/bad.log" 2>&1; then
  fail "rank 5 was served"; fi
grep -q "not served" "$WORK/bad.log" || fail "rank 5: $(cat "$WORK/bad.log")"
run_clients smoke 2
wait_server
# Costs in FLOPs (2^41 a token, none saturating below 2048 tokens): a
# rank's cost over 12 epochs passes 2^64, and the summary must still say
# tokens x 2^41 (a 64-bit sum once printed it wrapped).
make_dataset "$WORK/flops" --len-max 2048
start_server --data "$WORK/flops" --world 2 --epochs 12 --cost 2199023255552,0,0,0 \
  --budget 4503599627370496
run_clients flops 2
wait_server
costs=$(sed -n 's/.*rank \([0-9]*\): .* samples, \([0-9]*\) tokens, cost \([0-9]*\),.*/\2 \3/p' \
  "$WORK/server.log" | awk '{printf "%.0f %s\n", $1 * 2199023255552, $2}')
[[ $(wc -l <<<"$costs") == 2 ]] || fail "FLOP costs: no rank lines: $(tail -3 "$WORK/server.log")"
while read -r want got; do
  [[ $want == "$got" ]] || fail "FLOP costs: a rank's cost is $got, its tokens x 2^41 $want"
done <<<"$costs"
# A runtime directory others can enter is refused.
mkdir -m 755 "$WORK/open"
server_refuses "a 0755 runtime directory" "not private" \
  --endpoint "$WORK/open/ctl" --data "$WORK/ds" --world 1 --budget 400000
# A server that never opened its endpoint says why once, naming it: no
# errno line after the reason, no summary of a run that never served
# (both were printed once, a rank line each).
! grep -E "Operation not permitted|rank 0:|batches," "$WORK/refused.log" ||
  fail "a refused endpoint printed more than its reason: $(cat "$WORK/refused.log")"
# An endpoint that is no socket path is a usage error, found before the
# start-up planning.
server_exits "a tcp:// endpoint" 2 "endpoint tcp://127.0.0.1:5555: not an ipc:// path" \
  --endpoint tcp://127.0.0.1:5555 --data "$WORK/ds" --world 1 --budget 400000
! grep -E "planning|rank 0:|batches," "$WORK/refused.log" ||
  fail "a tcp:// endpoint was planned for: $(cat "$WORK/refused.log")"
# Without --endpoint the server takes LEVELFEED_ENDPOINT, as the client
# does (it used to ignore it and serve on the default endpoint).
mkdir -m 700 "$WORK/envrt"
LEVELFEED_ENDPOINT="ipc://$WORK/envrt/ctl" "$LF_BIN/lf-server" --data "$WORK/ds" --world 1 \
  --budget 400000 >"$WORK/env.log" 2>&1 &
PIDS+=($!)
env_pid=$!
EP="$WORK/envrt/ctl" wait_until 20 "a server on LEVELFEED_ENDPOINT" "$WORK/env.log" -- serving
LEVELFEED_ENDPOINT="ipc://$WORK/envrt/ctl" "$LF_BIN/lf-rank-loop" --rank 0 --world 1 --no-digest \
  >"$WORK/env.client" 2>&1 || fail "a client on LEVELFEED_ENDPOINT: $(cat "$WORK/env.client")"
wait_ok 20 "the server on LEVELFEED_ENDPOINT" "$env_pid" "$WORK/env.log"
grep -q "on ipc://$WORK/envrt/ctl" "$WORK/env.log" || fail "LEVELFEED_ENDPOINT: $(cat "$WORK/env.log")"
check_no_leftovers
echo "control plane ok"
