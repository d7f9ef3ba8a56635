#!/usr/bin/env bash
# Start-up on a large index (run by `make bench`; figures, never a verdict):
# a `lf-shard synth tokens` set of LF_STARTUP_SAMPLES samples (default 10 M,
# 1-8 tokens each: the index, not the bytes, is what start-up plans), one
# epoch at world 8, the server serving rank 0. A client with the default
# 10 s connect timeout starts just before the server. Figures: when the
# server has its endpoint (it binds before it opens the dataset), when it
# serves (opening the index, the plan id, the prepass: "lf-server: plan:"),
# and when the client, which waited through the "planning" answers, has
# its first batch.
source "$(dirname "$0")/bench_lib.sh"

n=${LF_STARTUP_SAMPLES:-10000000}
ep="$tmp/rt/ctl"
mkdir -m 700 "$tmp/rt"
t=$( { time "$lf" synth tokens --out "$tmp/ds" --samples "$n" --seed 1 --len-median 2 \
         --len-min 1 --len-max 8 >/dev/null 2>&1; } 2>&1 ) || { echo "startup bench: synth failed"; exit 1; }
echo "synth: $n samples in $(cut -d' ' -f1 <<<"$t") s, $(du -sh "$tmp/ds" | cut -f1) on disk"

ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(ms)
"$bin/lf-rank-loop" --endpoint "$ep" --rank 0 --world 8 --max-batches 1 --no-digest \
  >"$tmp/client.log" 2>&1 &
client=$!
"$bin/lf-server" --endpoint "$ep" --data "$tmp/ds" --world 8 --ranks 0 >"$tmp/server.log" 2>&1 &
server=$!
bound='' serving='' first=''
while kill -0 "$client" 2>/dev/null || kill -0 "$server" 2>/dev/null; do
  [[ -z $bound && -S $ep ]] && bound=$(($(ms) - t0))
  [[ -z $serving ]] && grep -q "lf-server: serving" "$tmp/server.log" && serving=$(($(ms) - t0))
  [[ -z $first ]] && ! kill -0 "$client" 2>/dev/null && first=$(($(ms) - t0))
  sleep 0.01
done
rc=0
wait "$client" || rc=$?
wait "$server" || true
[[ $rc -eq 0 ]] || { echo "startup bench: the client failed: $(tail -3 "$tmp/client.log")"; exit 1; }
echo "server start-up, $n samples, 1 epoch, world 8: endpoint bound at ${bound:-?} ms," \
     "serving at ${serving:-?} ms; a client started before it (connect timeout 10 s) had" \
     "its first batch at ${first:-?} ms"
grep "lf-server: planning" "$tmp/server.log" || true
