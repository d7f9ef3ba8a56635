#!/usr/bin/env bash
# lf-launch alone on one machine: it starts lf-server in a private runtime
# directory, waits until it answers, runs the trainer (two lf-rank-loop
# ranks that know the server only from LEVELFEED_ENDPOINT), and when the
# trainer has ended leaves no server, no runtime directory and nothing in
# /dev/shm; the ranks got their whole plan, every sample once, and
# lf-launch exits with the trainer's status.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 5 --budget 400000)
"$LF_BIN/lf-server" "${SRV[@]}" --print-plan >"$WORK/plan.txt"

start_launch a "${SRV[@]}" -- "$TRAINER" a 2 --verify "$WORK/ds"
wait_ok 60 "lf-launch" "$LAUNCH_PID" "$WORK/a.launch"
check_exactly_once a 2000 1
diff <(stream_of a) <(sort -k1,1n -k2,2n -k3,3n "$WORK/plan.txt") >/dev/null ||
  fail "the ranks' batches are not the plan"
ep=$(cat "$WORK/a.ep")
[[ $ep == "ipc://$XDG_RUNTIME_DIR/levelfeed/job-job."??????"/ctl" ]] ||
  fail "LEVELFEED_ENDPOINT=$ep, want ipc://$XDG_RUNTIME_DIR/levelfeed/job-job.XXXXXX/ctl"
for line in "lf-server answered after" "the trainer exited with status 0" \
            "lf-server exited with status 0" "lf-server: rank 1: "; do
  grep -qF "$line" "$WORK/a.launch" || fail "no '$line' in: $(cat "$WORK/a.launch")"
done
check_launch_leftovers a

# The trainer's exit status is lf-launch's; --job names the directory.
start_launch b "${SRV[@]}" --job 'my job/7' -- sh -c 'echo "$LEVELFEED_ENDPOINT" >"$0"; exit 3' \
  "$WORK/b.ep"
wait_exit 60 "lf-launch" "$LAUNCH_PID" "$WORK/b.launch"
[[ $EXIT_RC -eq 3 ]] || { show_logs +1 "$WORK/b.launch"; fail "trainer exit 3: lf-launch exited $EXIT_RC"; }
[[ $(cat "$WORK/b.ep") == "ipc://$XDG_RUNTIME_DIR/levelfeed/job-my_job_7."* ]] ||
  fail "--job 'my job/7': endpoint $(cat "$WORK/b.ep")"
check_launch_leftovers b
echo "alone: the plan delivered through LEVELFEED_ENDPOINT, exit status passed on, nothing left: ok"
