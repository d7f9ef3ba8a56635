#!/usr/bin/env bash
# The frames path: 2 ranks, two epochs. Every sample's frames equal the
# stored frames, zero-padded to the batch's longest, with the right lengths;
# every sample once per epoch; batches equal the plan; pread == io_uring.
source "$(dirname "$0")/server_lib.sh"
need_uring

"$LF_BIN/lf-shard" synth frames --out "$WORK/fr" --samples 300 --seed 2 --width 16 \
  --len-median 40 --len-min 4 --len-max 200 --threads 1 --block-size 16K >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "synth frames"; }
SRV=(--data "$WORK/fr" --world 2 --epochs 2 --samples-per-rank 6 --preset frames --seed 3)
"$LF_BIN/lf-server" "${SRV[@]}" --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/plan"
for io in uring pread; do
  start_server "${SRV[@]}" --io "$io"
  run_clients "$io" 2 --verify "$WORK/fr"
  wait_server
  diff <(stream_of "$io") "$WORK/plan" >/dev/null || fail "$io: stream differs from the plan"
  check_exactly_once "$io" 300 2
  check_no_leftovers
done
[[ "$(digests_of uring)" == "$(digests_of pread)" ]] || fail "uring and pread frame streams differ"
if "$LF_BIN/lf-server" "${SRV[@]}" --layout pack --seq-len 256 --print-plan >/dev/null 2>&1; then
  fail "pack accepted for frames"; fi
echo "frames: stored bytes, zero padding, lengths, plan, exactly-once, uring == pread: ok"
