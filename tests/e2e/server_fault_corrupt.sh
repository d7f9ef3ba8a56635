#!/usr/bin/env bash
# lf-server on a dataset with flipped bytes inside two blocks (of different
# shards). --on-corrupt=fail (the default): the server exits non-zero with a
# message naming the shard file and the block, and the clients fail too.
# --on-corrupt=skip: both epochs complete; the summary and the metrics count
# exactly the damaged blocks' samples as quarantined; each batch is its plan
# batch less those samples (so every other sample arrives exactly once per
# epoch, its token bytes equal to the shards' as the clients check), and two
# runs deliver byte-identical streams. A truncated shard (cut inside its
# blocks) is refused at start-up in either mode, naming the file; one cut
# while the server runs is a read error naming file, byte and block (with
# either reader, in either mode, nothing quarantined).
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds" --shard-size 1M
PLAN=(--data "$WORK/ds" --seed 3 --epochs 2 --budget 400000 --world 2)

# Block rows of `inspect --blocks`: block shard file_offset stored raw first samples.
"$LF_BIN/lf-shard" inspect "$WORK/ds" --blocks >"$WORK/inspect.txt"
awk 'f && NF == 7 {print} /^block +shard +file_offset/ {f = 1}' "$WORK/inspect.txt" >"$WORK/blocks.txt"
nshards=$(awk '{print $2}' "$WORK/blocks.txt" | sort -u | wc -l)
[[ $nshards -ge 2 ]] || fail "want a dataset of >= 2 shards, got $nshards"
# The damaged blocks: the 3rd of the dataset, and the 2nd of the last shard.
last=$((nshards - 1))
bad1=$(awk 'NR == 3 {print $1}' "$WORK/blocks.txt")
bad2=$(awk -v s="$last" '$2 == s {n++; if (n == 2) print $1}' "$WORK/blocks.txt")
shard_file() { awk -v s="$1" '$1 == s && NF == 7 && $7 ~ /^shard-/ {print $7}' "$WORK/inspect.txt"; }
: >"$WORK/bad_ids"
want_q=0
for b in "$bad1" "$bad2"; do
  read -r _ shard off stored _ first n < <(awk -v b="$b" '$1 == b' "$WORK/blocks.txt")
  f="$WORK/ds/$(shard_file "$shard")"
  [[ -f "$f" ]] || fail "no shard file for shard $shard"
  # Flip one byte a third of the way into the block's stored bytes.
  pos=$((off + stored / 3))
  old=$(od -An -tu1 -j "$pos" -N1 "$f" | tr -d ' ')
  printf "$(printf '\\%03o' $((old ^ 0x55)))" | dd of="$f" bs=1 seek="$pos" conv=notrunc status=none
  seq "$first" $((first + n - 1)) >>"$WORK/bad_ids"
  want_q=$((want_q + n))
done
echo "damaged dataset blocks $bad1 and $bad2 ($want_q samples)"

# fail: a non-zero exit, the message names the shard file and its block.
start_server "${PLAN[@]}"
run_clients_failing fail 2
src=0
wait "$SERVER_PID" || src=$?
[[ $src -ne 0 ]] || fail "--on-corrupt=fail: the server exited 0"
grep -q "error: .*shard-[0-9]*\.lfs: block [0-9]* (dataset block \($bad1\|$bad2\)," "$WORK/server.log" ||
  fail "--on-corrupt=fail: no message naming shard and block: $(cat "$WORK/server.log")"
grep -qi "error" "$WORK/fail.r0.log" || fail "client 0 gave no error: $(cat "$WORK/fail.r0.log")"
check_no_leftovers
echo "on-corrupt=fail: $(grep -o 'error: .*' "$WORK/server.log" | head -1)"

# skip: the expected stream is the plan less the damaged blocks' samples.
"$LF_BIN/lf-server" "${PLAN[@]}" --print-plan | sort -k1,1n -k2,2n -k3,3n |
  awk 'NR == FNR {bad[$1] = 1; next}
       {n = split($5, ids, ","); out = ""; k = 0
        for (i = 1; i <= n; i++) if (!(ids[i] in bad)) {out = out (k ? "," : "") ids[i]; k++}
        print $1, $2, $3, k, out}' "$WORK/bad_ids" - | sed 's/ $//' >"$WORK/skip.plan"

run_skip() {   # TAG [client args]
  local tag=$1
  shift
  start_server "${PLAN[@]}" --on-corrupt skip "${SKIP_EXTRA[@]}"
  run_clients "$tag" 2 --verify "$WORK/ds" --pad-id 0 "$@"
  wait_server
  set -- "$tag"
  cp "$WORK/server.log" "$WORK/$1.server.log"
  q=$(sed -n 's/.*quarantined \([0-9]*\) samples in \([0-9]*\) blocks.*/\1 \2/p' "$WORK/server.log")
  # Found once and never re-read: blocks 2, samples those of both epochs.
  [[ "$q" == "$((2 * want_q)) 2" ]] ||
    fail "$1: quarantined '$q', want '$((2 * want_q)) 2': $(cat "$WORK/server.log")"
  for b in "$bad1" "$bad2"; do
    grep -q "quarantined .*shard-[0-9]*\.lfs block [0-9]* (dataset block $b)" "$WORK/server.log" ||
      fail "$1: block $b not in the summary"
  done
  diff <(stream_of "$1" | sed 's/ $//') "$WORK/skip.plan" >"$WORK/$1.diff" ||
    fail "$1: stream is not the plan less the damaged samples: $(head -5 "$WORK/$1.diff")"
  check_exactly_once "$1" $((2000 - want_q)) 2
  check_no_leftovers
}
SKIP_EXTRA=()
run_skip skip1
run_skip skip2 --compute-us 3000
[[ "$(digests_of skip1)" == "$(digests_of skip2)" ]] || fail "two skip runs differ"
# The metrics' quarantine counts, "BLOCKS SAMPLES", asked while a run is
# held (held_until: before, they were polled while the clients ran, and a
# loaded machine's run could end first) with rank 1 stuck 3 batches after
# the last step of epoch 0 that holds a damaged sample.
quarantine_shown() {
  local mb ms
  SEEN=$("$LF_BIN/lf-stat" "$EP" --json 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; o = json.load(sys.stdin); print(o["quarantined_blocks"], o["quarantined_samples"])' 2>/dev/null) || true
  read -r mb ms <<<"$SEEN"
  [[ "$mb" == 2 && ${ms:-0} -gt 0 && $ms -le $((2 * want_q)) ]]
}
lastbad=$("$LF_BIN/lf-server" "${PLAN[@]}" --print-plan | awk 'NR == FNR {bad[$1] = 1; next}
  $1 == 0 {n = split($5, ids, ","); for (i = 1; i <= n; i++) if (ids[i] in bad) s = $2}
  END {print s}' "$WORK/bad_ids" -)
start_server "${PLAN[@]}" --on-corrupt skip
held_until $((lastbad + 4)) "lf-stat to show 2 blocks and 1..$((2 * want_q)) samples quarantined" \
  quarantine_shown
check_no_leftovers
echo "on-corrupt=skip: 2 epochs complete, $want_q samples quarantined, plan less them, reruns identical, metrics while held: ok"
# --micro-batches: the damaged samples leave their micro-batches (the
# clients check every row against the micro table); the same stream.
SKIP_EXTRA=(--micro-batches)
run_skip skipm
echo "on-corrupt=skip with --micro-batches: the same stream: ok"

# Truncation: the shard no longer matches its manifest, so no mode can serve it.
cp -r "$WORK/ds" "$WORK/cut"
f="$WORK/cut/$(shard_file "$last")"
truncate -s $(($(stat -c %s "$f") / 2)) "$f"
for mode in fail skip; do
  rc=0
  timeout 20 "$LF_BIN/lf-server" "${PLAN[@]/$WORK\/ds/$WORK/cut}" --endpoint "$EP" --on-corrupt "$mode" \
    >"$WORK/cut.log" 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || fail "truncated, $mode: exit $rc, want 1: $(cat "$WORK/cut.log")"
  grep -q "$(basename "$f").* bytes, manifest says" "$WORK/cut.log" ||
    fail "truncated, $mode: no message naming $(basename "$f"): $(cat "$WORK/cut.log")"
  check_no_leftovers
done
echo "truncated shard refused at start-up in both modes: $(head -1 "$WORK/cut.log")"

# A damaged shard index (its last sample entry's length, the byte before the
# footer's 64 less 8): the server opens the dataset without reading sample
# entries (lf_dataset_open_mapped), so it starts; the shard's index is
# checked before the first of its blocks is decoded, and the mismatch stops
# the server in either mode, naming the file, with nothing quarantined (the
# fault is the whole shard's, not one block's) and nothing of it delivered.
make_dataset "$WORK/idx" --shard-size 1M
f="$WORK/idx/$(shard_file "$last")"
pos=$(($(stat -c %s "$f") - 64 - 8))
old=$(od -An -tu1 -j "$pos" -N1 "$f" | tr -d ' ')
printf "$(printf '\\%03o' $((old ^ 0x01)))" | dd of="$f" bs=1 seek="$pos" conv=notrunc status=none
for mode in fail skip; do
  start_server "${PLAN[@]/$WORK\/ds/$WORK/idx}" --on-corrupt "$mode"
  run_clients_failing "idx$mode" 2
  rc=0
  wait "$SERVER_PID" || rc=$?
  log=$(cat "$WORK/server.log")
  [[ $rc -ne 0 ]] || fail "damaged index, $mode: the server exited 0: $log"
  grep -q "lf-server: serving" <<<"$log" || fail "damaged index, $mode: the server did not start: $log"
  grep -q "error: .*$(basename "$f"): index: checksum mismatch" <<<"$log" ||
    fail "damaged index, $mode: no error naming the shard's index: $log"
  ! grep -Eq "quarantined(:| [1-9])" <<<"$log" || fail "damaged index, $mode: quarantined: $log"
  check_no_leftovers
done
echo "damaged shard index stops the server in both modes: $(grep -o 'error: .*' "$WORK/server.log" | head -1 | sed "s|$WORK/||")"

# A shard cut short while the server runs (after start-up, before the ranks
# START, so no block is read yet): a failing read, not damage. Both modes and
# both readers exit 1 naming the shard, the byte and the block, the clients
# get that reason, and nothing is quarantined (the blocks a read did not fill
# are never decoded).
make_dataset "$WORK/clean" --shard-size 1M   # $WORK/ds less the flipped bytes
for io in pread uring; do
  for mode in fail skip; do
    rm -rf "$WORK/cut"
    cp -r "$WORK/clean" "$WORK/cut"
    f="$WORK/cut/$(shard_file "$last")"
    start_server "${PLAN[@]/$WORK\/ds/$WORK/cut}" --io "$io" --on-corrupt "$mode"
    truncate -s $(($(stat -c %s "$f") / 2)) "$f"
    cpids=()
    for r in 0 1; do
      "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank "$r" --world 2 >"$WORK/cut$io$mode.r$r.log" 2>&1 &
      cpids+=($!)
    done
    for p in "${cpids[@]}"; do
      if wait "$p"; then fail "cut while serving ($io, $mode): a rank finished"; fi
    done
    rc=0
    wait "$SERVER_PID" || rc=$?
    log=$(cat "$WORK/server.log")
    [[ $rc -eq 1 ]] || fail "cut while serving ($io, $mode): exit $rc, want 1: $log"
    grep -Eq "error: read: $f at byte [0-9]+ \(block [0-9]+\): the file ends before its index says it does" \
      <<<"$log" || fail "cut while serving ($io, $mode): no read error naming file, byte and block: $log"
    ! grep -Eq "quarantined(:| [1-9])" <<<"$log" || fail "cut while serving ($io, $mode): quarantined: $log"
    grep -q "server: read: .*$(basename "$f") at byte" "$WORK"/cut$io$mode.r*.log ||
      fail "cut while serving ($io, $mode): the clients lack the reason"
    check_no_leftovers
  done
done
echo "shard cut while serving: $(grep -o 'error: read: .*' "$WORK/server.log" | sed "s|$WORK/||")"

# pread names the byte where the file ends, as io_uring does (it named the
# first byte of the block it was reading): the last shard's first block to
# be read is found with the shard cut to nothing, then cut 1000 bytes into
# that block. One reader reads in plan order, so that block fails first.
cut_pread() {   # SIZE: serve with the last shard cut to SIZE bytes; the read error in $err
  rm -rf "$WORK/cut"
  cp -r "$WORK/clean" "$WORK/cut"
  start_server "${PLAN[@]/$WORK\/ds/$WORK/cut}" --io pread
  truncate -s "$1" "$WORK/cut/$(shard_file "$last")"
  local p cpids=()
  for r in 0 1; do
    "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank "$r" --world 2 >/dev/null 2>&1 &
    cpids+=($!)
  done
  for p in "${cpids[@]}"; do wait "$p" || true; done
  wait "$SERVER_PID" || true
  err=$(grep -o 'at byte [0-9]* (block [0-9]*)' "$WORK/server.log") ||
    fail "pread, cut to $1: no read error: $(cat "$WORK/server.log")"
}
cut_pread 0
read -r start block < <(sed 's/at byte \([0-9]*\) (block \([0-9]*\))/\1 \2/' <<<"$err")
cut_pread $((start + 1000))
[[ $err == "at byte $((start + 1000)) (block $block)" ]] ||
  fail "pread cut 1000 bytes into block $block (at $start): the error says '$err'"
check_no_leftovers
echo "pread names the byte a cut shard ends at: $err"
