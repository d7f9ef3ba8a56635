#!/usr/bin/env bash
# Two jobs of one user on one node, both with the default endpoint and the
# same job name, run side by side: each lf-launch makes its own runtime
# directory, so their servers never meet, and both trainers get their
# whole plan. Each trainer starts its ranks only once the other job's
# server is up too, so the two run at the same time.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 5 --budget 400000)
"$LF_BIN/lf-server" "${SRV[@]}" --print-plan >"$WORK/plan.txt"

export SLURM_JOB_ID=42   # both jobs say they are job 42 (two steps of one allocation)
LAUNCH_BARRIER=y start_launch x "${SRV[@]}" -- "$TRAINER" x 2 --verify "$WORK/ds"
x=$LAUNCH_PID
LAUNCH_BARRIER=x start_launch y "${SRV[@]}" -- "$TRAINER" y 2 --verify "$WORK/ds"
y=$LAUNCH_PID
wait_ok 60 "the first lf-launch" "$x" "$WORK/x.launch"
wait_ok 60 "the second lf-launch" "$y" "$WORK/y.launch"
for tag in x y; do
  check_exactly_once "$tag" 2000 1
  diff <(stream_of "$tag") <(sort -k1,1n -k2,2n -k3,3n "$WORK/plan.txt") >/dev/null ||
    fail "job $tag: the ranks' batches are not the plan"
  [[ $(cat "$WORK/$tag.ep") == "ipc://$XDG_RUNTIME_DIR/levelfeed/job-42."??????"/ctl" ]] ||
    fail "job $tag: endpoint $(cat "$WORK/$tag.ep")"
  check_launch_leftovers "$tag"
done
[[ $(cat "$WORK/x.ep") != $(cat "$WORK/y.ep") ]] || fail "both jobs got $(cat "$WORK/x.ep")"
echo "two jobs side by side, default endpoints: both served their plan, nothing left: ok"
