#!/usr/bin/env bash
# lf-launch when the server cannot serve: a bad --data (the server exits 1
# before it answers), a bad server flag (exit 2, a usage error), a server
# that never answers (--ready-timeout), another server already on a given
# --endpoint, and a trainer that cannot be run. Each time lf-launch names
# what happened, exits with the documented status, never runs the trainer
# where the server did not answer, and leaves nothing behind. Also its own
# usage errors, --help and --version.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
RAN="$WORK/trainer-ran"
NOTE=(sh -c 'touch "$0"' "$RAN")

# lf-launch TAG WANT_RC MESSAGE ARGS...: exits WANT_RC within 30 s saying
# MESSAGE; the trainer (NOTE) never ran; nothing is left.
launch_fails() {
  local tag=$1 want=$2 msg=$3
  shift 3
  rm -f "$RAN"
  start_launch "$tag" "$@"
  wait_exit 30 "lf-launch ($tag)" "$LAUNCH_PID" "$WORK/$tag.launch"
  [[ $EXIT_RC -eq $want ]] && grep -qF -- "$msg" "$WORK/$tag.launch" ||
    { show_logs +1 "$WORK/$tag.launch"; fail "$tag: exit $EXIT_RC, want $want and '$msg'"; }
  [[ ! -e "$RAN" ]] || fail "$tag: the trainer ran"
  check_launch_leftovers "$tag"
}

launch_fails bad-data 1 "lf-server exited with status 1 before it answered" \
  --data "$WORK/nothing" --world 2 -- "${NOTE[@]}"
grep -q "lf-server: .*$WORK/nothing" "$WORK/bad-data.launch" ||
  fail "bad --data: the server's own message is not there: $(cat "$WORK/bad-data.launch")"
launch_fails bad-flag 2 "lf-server exited with status 2 before it answered" \
  --data "$WORK/ds" --world two -- "${NOTE[@]}"

# A "server" that never answers (it only sleeps), given with --server: its
# wait ends at --ready-timeout, and it is stopped.
printf '#!/bin/sh\nexec sleep 600\n' >"$WORK/mute-server"
chmod +x "$WORK/mute-server"
launch_fails mute 1 "did not answer on" --server "$WORK/mute-server" --ready-timeout 0.5 \
  --stop-timeout 1 --data "$WORK/ds" --world 2 -- "${NOTE[@]}"

# Another server already on the --endpoint given: ours refuses to start, and
# the other's answers must not start the trainer.
start_server --data "$WORK/ds" --world 2
rm -f "$RAN"
start_launch taken --endpoint "$EP" --data "$WORK/ds" --world 2 -- "${NOTE[@]}"
wait_exit 30 "lf-launch (taken)" "$LAUNCH_PID" "$WORK/taken.launch"
[[ $EXIT_RC -eq 1 && ! -e "$RAN" ]] ||
  { show_logs +1 "$WORK/taken.launch"; fail "--endpoint of a running server: exit $EXIT_RC, the trainer $([[ -e $RAN ]] && echo ran || echo "did not run")"; }
grep -qE "another process \(pid $SERVER_PID\) serves|another server is running" "$WORK/taken.launch" ||
  fail "--endpoint of a running server: $(cat "$WORK/taken.launch")"
kill "$SERVER_PID"
wait_exit 20 "the other server" "$SERVER_PID"
rm -f "$EP.lock"
[[ -z $(ls "$RT") ]] || fail "left in the given endpoint's directory: $(ls "$RT")"

# A trainer that cannot be run: 127, as a shell says, the server stopped.
start_launch missing --data "$WORK/ds" --world 2 -- "$WORK/no-such-trainer"
wait_exit 30 "lf-launch (missing)" "$LAUNCH_PID" "$WORK/missing.launch"
[[ $EXIT_RC -eq 127 ]] && grep -q "cannot run $WORK/no-such-trainer" "$WORK/missing.launch" ||
  { show_logs +1 "$WORK/missing.launch"; fail "missing trainer: exit $EXIT_RC, want 127"; }
check_launch_leftovers missing

# lf-launch's own command line.
for bad in "--data $WORK/ds" "--data $WORK/ds --" "--ready-timeout x -- true" "--job"; do
  rc=0
  # shellcheck disable=SC2086
  "$LF_BIN/lf-launch" $bad >"$WORK/usage.log" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "lf-launch $bad: exit $rc, want 2: $(cat "$WORK/usage.log")"
done
"$LF_BIN/lf-launch" --help | grep -q "^usage: lf-launch" || fail "--help"
release=$(sed -n 's/^#define LF_VERSION_STRING "\(.*\)"$/\1/p' "$LF_ROOT/client/levelfeed.h")
[[ $("$LF_BIN/lf-launch" --version) == "lf-launch (levelfeed) $release" ]] || fail "--version"
[[ -z $(ls -A "$XDG_RUNTIME_DIR/levelfeed" 2>/dev/null) ]] || fail "usage errors left a directory"
echo "bad data, bad flag, mute server, taken endpoint, missing trainer, usage: named, nothing left: ok"
