#!/usr/bin/env bash
# Ends the trainer under lf-launch mid-run: killed with SIGINT, killed with
# SIGKILL (the trainer's own process, not lf-launch), and SIGTERM sent to
# lf-launch (passed on to the trainer's process group). Each time lf-launch
# exits as a shell would report the trainer (128 + the signal), and leaves
# no server, none of the trainer's ranks, no runtime directory and nothing
# in /dev/shm. SIGHUP, SIGUSR1 and SIGUSR2 are the trainer's: sent to the
# server itself (as Slurm signals every process of a step), they do not
# stop it, and the run ends well.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 5 --budget 400000 --slots 2)

# Both ranks are serving (lf-stat on the endpoint the trainer was given).
trainer_running() {   # TAG
  [[ -s "$WORK/$1.pids" ]] && EP=$(sed 's|^ipc://||' "$WORK/$1.ep") && ranks_running 2
}

for how in INT:trainer:130 KILL:trainer:137 TERM:lf-launch:143; do   # SIGNAL:TO:EXIT
  IFS=: read -r sig who want <<<"$how"
  tag=$sig
  start_launch "$tag" "${SRV[@]}" -- "$TRAINER" "$tag" 2 --compute-us 20000
  wait_until 30 "the trainer's 2 ranks to be served" "$WORK/$tag.launch" -- trainer_running "$tag"
  if [[ $who == trainer ]]; then kill -"$sig" "$(cat "$WORK/$tag.pid")"; else kill -"$sig" "$LAUNCH_PID"; fi
  wait_exit 30 "lf-launch after SIG$sig to the $who" "$LAUNCH_PID" "$WORK/$tag.launch"
  [[ $EXIT_RC -eq $want ]] || { show_logs +1 "$WORK/$tag.launch"; fail "SIG$sig to the $who: lf-launch exited $EXIT_RC, want $want"; }
  grep -q "the trainer was killed by signal" "$WORK/$tag.launch" ||
    fail "SIG$sig: $(cat "$WORK/$tag.launch")"
  check_launch_leftovers "$tag"
  echo "SIG$sig to the $who: lf-launch exited $EXIT_RC, nothing left: ok"
done

start_launch usr "${SRV[@]}" -- "$TRAINER" usr 2 --compute-us 10000
wait_until 30 "the trainer's 2 ranks to be served" "$WORK/usr.launch" -- trainer_running usr
launched_server usr
kill -USR1 "$SERVER_PID"
kill -USR2 "$SERVER_PID"
kill -HUP "$SERVER_PID"
wait_ok 60 "lf-launch after SIGUSR1, SIGUSR2 and SIGHUP to its server" "$LAUNCH_PID" "$WORK/usr.launch"
check_exactly_once usr 2000 1
check_launch_leftovers usr
echo "SIGUSR1, SIGUSR2, SIGHUP to the server: ignored, the run ended well: ok"
