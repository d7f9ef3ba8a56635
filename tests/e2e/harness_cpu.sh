#!/usr/bin/env bash
# lf-train on the CPU under mpirun, against lf-servers it starts itself:
#  - 2 ranks, pad layout, a few hundred steps: the loss falls (first vs
#    last 10% of steps); each rank's batches equal the server's plan
#    (lf-server --print-plan); the report has exactly the documented keys;
#    the trace and chart are well formed (a process a rank, pids from 1,
#    slices that do not overlap; the chart an SVG document with a panel a
#    rank, rendered where rsvg-convert is); the report has the noise floor
#    (identical work on every rank) and --compare's table and lines set
#    balanced and naive against it;
#  - --calibrate (alone) fits with standard errors and R^2, writes a cost
#    file that lf-plan reads, and refuses a --data run beside it;
#  - 3 ranks, pack layout, the cost model from --cost-file: the batches
#    equal the plan with the same --cost too, and with 2 ranks
#    on a set whose every 10th sample is empty;
#  - 2 ranks, lf-server --micro-batches (each micro-batch padded to its own
#    longest): the batches equal the plan too;
#  - 2 ranks, --compare with --max-tokens: balanced is served with the cap,
#    the baselines without it (their servers refuse caps), each == its plan;
#  - 8 ranks, --device sim (compute asleep for a hidden cost): the batches
#    equal the plan, the report says sim, every compute slice lasts at
#    least its hidden cost;
#  - a planted fault (one rank's parameter nudged after step 10) must fail
#    the run with the cross-rank parameter check's message;
#  - without a GPU, --device cuda is refused with a reason;
#  - the model's backward matches central differences (--gradcheck), and
#    the check fails when one gradient component is spoiled;
#  - a rank killed mid-run ends the job, and rank 0 takes its server and
#    runtime directory with it;
#  - nothing is left behind: /dev/shm, runtime directories, processes.
source "$(dirname "$0")/harness_lib.sh"

# 1. two ranks, pad layout
train pad 2 --batches "$WORK/pad" --report "$WORK/report.json" --trace "$WORK/trace.json" \
  --chart "$WORK/chart.svg" -- --samples-per-rank 1 ||
  { cat "$WORK/pad.out" >&2; fail "lf-train (2 ranks, pad) failed"; }
check_plan pad 2 balanced --samples-per-rank 1
check_loss pad balanced 200
check_report "$WORK/report.json" "$WORK/trace.json" 2 cpu
check_chart "$WORK/chart.svg" 2
echo "2 ranks, pad: batches == plan, report, trace, chart ok"

# 1a. --calibrate alone: a fit with its confidence, and a cost file lf-plan reads
mpirun -np 2 "$LF_BIN/lf-train" --calibrate "${MODEL[@]}" --calibrate-lengths 8,256 \
  --calibrate-repeats 3 --cost-file "$WORK/fit.cost" >"$WORK/cal.out" 2>&1 ||
  fail "lf-train --calibrate: $(cat "$WORK/cal.out")"
for want in "R^2 = " "  a  = .* standard error" "lf-server --cost 16," "cost file: $WORK/fit.cost"; do
  grep -q -- "$want" "$WORK/cal.out" || fail "--calibrate printed no '$want': $(cat "$WORK/cal.out")"
done
"$LF_BIN/lf-plan" "$WORK/ds" --world 2 --cost-file "$WORK/fit.cost" >"$WORK/cal-plan.out" 2>&1 ||
  fail "lf-plan cannot read the calibration's cost file: $(cat "$WORK/cal-plan.out")"
if train calbad 2 --calibrate; then fail "--calibrate ran beside --data"; fi
grep -q "calibrate runs alone" "$WORK/calbad.out" || fail "--calibrate --data: $(cat "$WORK/calbad.out")"
echo "--calibrate: $(grep -c ' = ' "$WORK/cal.out") terms printed, cost file read by lf-plan"

# 2. three ranks, pack layout (rows of 512 tokens, cu_seqlens)
PACK=(--layout pack --seq-len 512 --samples-per-rank 2)
printf 'levelfeed-cost 1\na %s\nb %s\nc0 %s\nd %s\n' ${COST//,/ } >"$WORK/model.cost"
train pack 3 --sampler sorted --cost 16,0,0,0 --cost-file "$WORK/model.cost" --batches "$WORK/pack" \
  -- "${PACK[@]}" ||
  { cat "$WORK/pack.out" >&2; fail "lf-train (3 ranks, pack) failed"; }
check_plan pack 3 sorted "${PACK[@]}"
echo "3 ranks, pack: batches == plan"

# 2a. pack layout with empty samples (every 10th): they have no cu_seqlens
# segment, and still train and count, as in pad
awk 'BEGIN { srand(5); for (i = 0; i < 200; i++) { printf "{\"tokens\": ["
  for (k = 0; i % 10 && k < 1 + int(rand() * 60); k++) printf "%s%d", k ? ", " : "", int(rand() * 256)
  print "]}" } }' >"$WORK/empty.jsonl"
"$LF_BIN/lf-shard" create tokens --in "$WORK/empty.jsonl" --out "$WORK/dsz" >"$WORK/dsz.log" 2>&1 ||
  fail "lf-shard create: $(cat "$WORK/dsz.log")"
PACKZ=(--layout pack --seq-len 128 --samples-per-rank 4)
mpirun -np 2 "$LF_BIN/lf-train" --data "$WORK/dsz" "${MODEL[@]}" --batches "$WORK/packz" \
  -- "${PACKZ[@]}" >"$WORK/packz.out" 2>&1 ||
  { cat "$WORK/packz.out" >&2; fail "lf-train (pack, empty samples) failed"; }
DS="$WORK/dsz" check_plan packz 2 balanced "${PACKZ[@]}"
echo "2 ranks, pack with empty samples: batches == plan"

# 2b. two ranks, the plan's pad micro-batches as the server delivers them
MICRO=(--micro-batches --micro-overhead 4 --samples-per-rank 4)
train micro 2 --batches "$WORK/micro" -- "${MICRO[@]}" ||
  { cat "$WORK/micro.out" >&2; fail "lf-train (2 ranks, --micro-batches) failed"; }
check_plan micro 2 balanced "${MICRO[@]}"
echo "2 ranks, --micro-batches: batches == plan"

# 2c. --compare with a per-rank cap: balanced is served with it, naive and
# sorted (whose servers refuse caps) without it, each equal to its plan
train compare 2 --compare --batches "$WORK/cmp" -- --max-tokens 300 ||
  { cat "$WORK/compare.out" >&2; fail "lf-train --compare --max-tokens failed"; }
check_plan cmp.balanced 2 balanced --max-tokens 300
for s in naive sorted; do
  check_plan "cmp.$s" 2 "$s"
  grep -q "^lf-train: $s runs without --max-tokens" "$WORK/compare.out" ||
    fail "no word that $s runs without the cap: $(cat "$WORK/compare.out")"
done
grep -Eq "^balance against the noise floor \(compute max/mean p50 / floor p50\): balanced ([0-9.]+x|not measured) naive" \
  "$WORK/compare.out" || fail "no comparison headline: $(cat "$WORK/compare.out")"
grep -q "^tokens/s, this run only: balanced vs naive " "$WORK/compare.out" || fail "no tokens/s line"
for row in "noise floor p50" "noise floor p99" "p50 / floor" "p99 / floor"; do
  grep -q "^$row  " "$WORK/compare.out" || fail "the table has no '$row' row: $(cat "$WORK/compare.out")"
done
for s in balanced naive; do
  grep -q "^$s: compute max/mean p50 .*; noise floor (every rank the same batch, [0-9]* steps) p50 .*; against the floor p50 " \
    "$WORK/compare.out" || fail "no noise floor line for $s: $(cat "$WORK/compare.out")"
done
echo "2 ranks, --compare --max-tokens: the cap binds balanced only, batches == plans"

# 2d. --device sim: 8 ranks on the 2 cores, each rank's compute asleep for
# the hidden cost (here 20 us a token, no jitter: a sleep never ends early,
# so every compute slice lasts at least its tokens' cost; a bound from
# below that load cannot break)
train sim 8 --device sim --sim-cost 20000,0,0,0 --sim-jitter 0 --batches "$WORK/sim" \
  --report "$WORK/sim.json" --trace "$WORK/simtrace.json" -- --samples-per-rank 2 ||
  { cat "$WORK/sim.out" >&2; fail "lf-train --device sim (8 ranks) failed"; }
check_plan sim 8 balanced --samples-per-rank 2
check_report "$WORK/sim.json" "$WORK/simtrace.json" 8 sim
/usr/bin/python3 - "$WORK/sim.json" "$WORK/simtrace.json" <<'PY' || fail "--device sim: $(cat "$WORK/sim.out")"
import json, sys
assert json.load(open(sys.argv[1]))["device"] == "sim"
ev = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e.get("name") == "compute"]
short = [e for e in ev if e["dur"] * 1000 < 20000 * e["args"]["tokens"] * (1 - 1e-6)]
assert ev and not short, short[:3]
print(f"sim: {len(ev)} compute slices, each at least 20 us a token")
PY
echo "8 ranks, --device sim: batches == plan, compute asleep for the hidden cost"

# 3. a planted fault must be caught by the parameter check
if train fault 2 --sampler naive --fault-step 10 --fault-rank 1 -- --samples-per-rank 1; then
  fail "a perturbed parameter went unnoticed"
fi
grep -q "parameters differ after step 10: rank 1" "$WORK/fault.out" ||
  fail "fault run: $(cat "$WORK/fault.out")"
echo "planted fault: caught"

# 4. no GPU: --device cuda says why it cannot run
if ! nvidia-smi -L >/dev/null 2>&1; then
  if train nogpu 1 --device cuda; then fail "--device cuda ran without a GPU"; fi
  grep -Eq "device cuda: .*(CUDA|device|built without)" "$WORK/nogpu.out" ||
    fail "--device cuda without a GPU: $(cat "$WORK/nogpu.out")"
  if "$LF_BIN/lf-train" --gradcheck --device cuda >"$WORK/grad-nogpu.out" 2>&1; then
    fail "--gradcheck --device cuda passed without a GPU: $(cat "$WORK/grad-nogpu.out")"
  fi
  grep -Eq "gradcheck --device cuda: .*(CUDA|device|built without)" "$WORK/grad-nogpu.out" ||
    fail "--gradcheck --device cuda without a GPU: $(cat "$WORK/grad-nogpu.out")"
  echo "--device cuda without a GPU: refused with a reason (training and --gradcheck)"
fi

# 5. gradients against finite differences, and the check's planted fault
"$LF_BIN/lf-train" --gradcheck >"$WORK/grad.out" 2>&1 || fail "gradcheck: $(cat "$WORK/grad.out")"
if "$LF_BIN/lf-train" --gradcheck --fault-step 0 >"$WORK/grad-bad.out" 2>&1; then
  fail "gradcheck missed a spoiled gradient: $(cat "$WORK/grad-bad.out")"
fi
echo "$(cat "$WORK/grad.out"); a spoiled gradient is caught"

# 6. a rank that dies mid-run (kill -9, as the OOM killer would): mpirun
#    ends the others with SIGTERM, and rank 0 takes its server and runtime
#    directory with it
train killed 2 --epochs 50 -- --samples-per-rank 1 &
job=$!
matches() { compgen -G "$1" >/dev/null; }   # GLOB: some path matches it
wait_until 20 "the killed run's server to come up ($TMP/lf-train.*/ctl)" -- \
  matches "$TMP/lf-train.*/ctl"
sleep 0.5
victim=""
for p in $(pgrep -f "lf-train --data $WORK/ds"); do
  # grep -x without -q: grep reads it all, so tr never dies of SIGPIPE
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=1" >/dev/null &&
    victim=$p
done
[[ -n $victim ]] || fail "killed run: rank 1 not found"
kill -9 "$victim"
if wait "$job"; then fail "killed run: mpirun exited 0"; fi
echo "a rank killed mid-run: the job ends, the server and its directory go"

check_clean
echo "harness cpu ok"
