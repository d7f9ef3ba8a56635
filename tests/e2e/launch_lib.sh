#!/usr/bin/env bash
# Helpers for the lf-launch end-to-end tests (sourced by tests/e2e/launch_*.sh
# after server_lib.sh's own set-up: a private /dev/shm where the kernel
# allows, $WORK, fail, the wait helpers).
source "$(dirname "${BASH_SOURCE[0]}")/server_lib.sh"

# lf-launch makes its runtime directories under $XDG_RUNTIME_DIR/levelfeed:
# a fresh one per test, so the leftover check sees only what it made.
export XDG_RUNTIME_DIR="$WORK/xdg"
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset SLURM_JOB_ID TORCHELASTIC_RUN_ID LEVELFEED_ENDPOINT

# The trainer lf-launch runs: TAG N [lf-rank-loop args]. It writes its pid
# (TAG.pid), its ranks' pids (TAG.pids) and the endpoint it was given
# (TAG.ep), then runs N lf-rank-loop ranks that find the server through
# LEVELFEED_ENDPOINT alone (outputs as run_clients': TAG.rR.txt, .log),
# and fails when any of them fails. With LAUNCH_BARRIER="T1 T2 ..." it
# first waits until those trainers wrote their .ep too: their servers are
# then all up at once. As one node's trainer of several, LAUNCH_NODE=K
# and LAUNCH_WORLD=W make its ranks K*N .. K*N+N-1 of W, and its own files
# TAG.K.pid, TAG.K.pids, TAG.K.ep (the ranks' outputs keep TAG).
# LAUNCH_ARGS_RR="ARGS" (exported) adds ARGS to rank R's alone.
TRAINER="$WORK/trainer.sh"
cat >"$TRAINER" <<EOF
#!/usr/bin/env bash
W='$WORK' B='$LF_BIN'
EOF
cat >>"$TRAINER" <<'EOF'
tag=$1 n=$2
shift 2
me=$tag${LAUNCH_NODE:+.$LAUNCH_NODE} first=$((${LAUNCH_NODE:-0} * n)) world=${LAUNCH_WORLD:-$n}
echo $$ >"$W/$me.pid"
echo "$LEVELFEED_ENDPOINT" >"$W/$me.ep"
for t in ${LAUNCH_BARRIER:-}; do
  for ((i = 0; i < 3000; i++)); do [[ -s "$W/$t.ep" ]] && break; sleep 0.01; done
done
pids=()
for ((r = first; r < first + n; r++)); do
  own=LAUNCH_ARGS_R$r
  # shellcheck disable=SC2086
  "$B/lf-rank-loop" --rank "$r" --world "$world" --out "$W/$tag.r$r.txt" "$@" ${!own:-} \
    >"$W/$tag.r$r.log" 2>&1 &
  pids+=($!)
done
echo "${pids[@]}" >"$W/$me.pids"
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
EOF
chmod +x "$TRAINER"

# Starts lf-launch ARGS... in the background, output in $WORK/TAG.launch;
# its pid in LAUNCH_PID.
start_launch() {   # TAG ARGS...
  local tag=$1
  shift
  "$LF_BIN/lf-launch" "$@" >"$WORK/$tag.launch" 2>&1 &
  LAUNCH_PID=$!
  PIDS+=("$LAUNCH_PID")
}

# The pid of the server lf-launch started, from its log (a wait_until
# condition: sets SERVER_PID).
launched_server() {   # TAG
  SERVER_PID=$(sed -n 's/^lf-launch: started .* (pid \([0-9]*\)) on .*/\1/p' "$WORK/$1.launch")
  [[ -n "$SERVER_PID" ]]
}

# Succeeds when no process of PIDS is left (a zombie counts as gone: its
# parent, which may be init, reaps it in its own time).
all_gone() {          # PID...
  local p
  for p in "$@"; do
    [[ -e /proc/$p ]] && [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]] && {
      SEEN="pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)) running"
      return 1
    }
  done
  return 0
}

# After lf-launch TAG ended: its server and the trainer's processes are
# gone, nothing is left under $XDG_RUNTIME_DIR/levelfeed and /dev/shm is as
# it was.
check_launch_leftovers() {   # TAG
  local tag=$1 left now
  launched_server "$tag" || fail "$tag: no 'started' line: $(cat "$WORK/$tag.launch")"
  # shellcheck disable=SC2046
  all_gone "$SERVER_PID" $(cat "$WORK/$tag.pid" "$WORK/$tag.pids" 2>/dev/null) ||
    fail "$tag: left running after lf-launch ended: $SEEN"
  left=$(ls -A "$XDG_RUNTIME_DIR/levelfeed" 2>/dev/null || true)
  [[ -z "$left" ]] || fail "$tag: left in the runtime directory: $left"
  now=$(ls /dev/shm | sort)
  [[ "$now" == "$SHM_BEFORE" ]] || fail "$tag: /dev/shm changed: $(comm -13 <(echo "$SHM_BEFORE") <(echo "$now"))"
}
