#!/usr/bin/env bash
# Helpers for the lf-server end-to-end tests (sourced by tests/e2e/server_*.sh;
# tests/run.sh does not run *_lib.sh files as tests).
set -euo pipefail

# Where the kernel allows it (root, as in CI), each test runs in its own
# mount namespace with a private, empty /dev/shm, so the leftover check sees
# exactly what levelfeed left and nothing other jobs on the machine made.
if [[ -z "${LF_SHM_PRIVATE:-}" ]] &&
   unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
  export LF_SHM_PRIVATE=1
  exec unshare --mount --propagation private bash -c \
    'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec bash "$@"' bash "$0" "$@"
fi

LF_BIN=${LF_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/default/bin}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lf-e2e.XXXXXX")
RT="$WORK/rt"                 # the runtime directory (0700)
EP="$RT/ctl"                  # the control endpoint
mkdir -m 700 "$RT"
# The launcher variables the server and the client read (server/job.c,
# lf_ipc_job): a test sets those it means, whatever runs the suite.
unset LEVELFEED_JOB SLURM_JOB_ID SLURM_NODEID SLURM_NTASKS SLURM_NTASKS_PER_NODE \
  SLURM_TASKS_PER_NODE SLURM_NNODES SLURM_DISTRIBUTION TORCHELASTIC_RUN_ID GROUP_RANK \
  NODE_RANK LOCAL_WORLD_SIZE WORLD_SIZE OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_SIZE \
  OMPI_COMM_WORLD_RANK
SHM_BEFORE=$(ls /dev/shm | sort)
PIDS=()

fail() { echo "FAIL: $*" >&2; exit 1; }

cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${LF_KEEP_TMP:-}" ]] || rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT

# A small token dataset (2000 samples, 61 blocks) shared by the scenarios.
# Tests that force --io uring (a failed set-up is then fatal, by design)
# skip where the kernel or a seccomp profile refuses io_uring_setup (425 on
# x86-64 and arm64), as Docker's default profile does.
need_uring() {
  /usr/bin/python3 -c 'import ctypes, sys
p = ctypes.create_string_buffer(120)
sys.exit(0 if ctypes.CDLL(None, use_errno=True).syscall(425, 1, p) >= 0 else 1)' ||
    { echo "SKIP: io_uring cannot be set up here (kernel or seccomp), --io uring untestable"; exit 77; }
}

make_dataset() {   # DIR [extra lf-shard synth args]
  local dir=$1; shift
  "$LF_BIN/lf-shard" synth tokens --out "$dir" --samples 2000 --seed 7 --threads 1 "$@" >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }
}

# The last LINES lines of each LOG that exists ("+1": all of it), on stderr.
show_logs() {      # LINES [LOG...]
  local n=$1 f
  shift
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    if [[ $n == +1 ]]; then echo "--- ${f#"$WORK"/}:"; else echo "--- ${f#"$WORK"/}, last $n lines:"; fi
    tail -n "$n" "$f"
  done >&2
}

# Tries COMMAND... every 20 ms until it succeeds, for at most SECS seconds
# of wall-clock time however long one try takes (one that asks lf-stat can
# take its 2 s timeout). Past that it fails, naming WHAT and SEEN (what
# COMMAND may leave there: what it saw last), with the end of the server's
# log and of each LOG and lf-stat's line on the run while a server answers;
# cleanup then kills every process in PIDS. Deadlines are tens of seconds,
# several times what the awaited work takes under ThreadSanitizer, the
# slowest build CI runs these tests in.
wait_until() {     # SECS WHAT [LOG...] -- COMMAND...
  local secs=$1 what=$2 logs=("$WORK/server.log") t0
  shift 2
  while [[ $1 != -- ]]; do [[ $1 == "${logs[0]}" ]] || logs+=("$1"); shift; done
  shift
  SEEN=
  t0=$(date +%s%N)
  until "$@"; do
    if (($(date +%s%N) - t0 >= secs * 1000000000)); then
      show_logs 20 "${logs[@]}"
      [[ -S "$EP" ]] && { echo "--- lf-stat:"; "$LF_BIN/lf-stat" "$EP" --count 1 2>&1; } >&2 || true
      fail "timed out after $secs s waiting for $what${SEEN:+ (last seen: $SEEN)}"
    fi
    sleep 0.02
  done
}

ended() {          # PID...: succeeds when none of them is running
  local p
  for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done
}

# Waits (up to SECS seconds, as wait_until) until the background process PID
# has ended; its exit status in EXIT_RC.
wait_exit() {      # SECS WHAT PID [LOG...]
  wait_until "$1" "$2 to end" "${@:4}" -- ended "$3"
  EXIT_RC=0
  wait "$3" || EXIT_RC=$?
}

# wait_exit for each PID in turn, the i-th named "WHAT i" with its log
# printf(LOGFMT, i); their exit statuses in RCS.
wait_each() {      # SECS WHAT LOGFMT PID...
  local secs=$1 what=$2 fmt=$3 i=0 p log
  shift 3
  RCS=()
  for p in "$@"; do
    # shellcheck disable=SC2059
    log=$(printf "$fmt" "$i")
    wait_exit "$secs" "$what $i" "$p" "$log"
    RCS[i++]=$EXIT_RC
  done
}

# wait_exit, and fails unless PID exited 0, with each LOG in full.
wait_ok() {        # SECS WHAT PID [LOG...]
  wait_exit "$@"
  [[ $EXIT_RC -eq 0 ]] || { show_logs +1 "${@:4}"; fail "$2 failed (exit $EXIT_RC)"; }
}

serving() {        # lf-stat says the server has planned and serves
  SEEN=$("$LF_BIN/lf-stat" "$EP" --json 2>&1) || true
  [[ $SEEN == *'"state": "serving"'* ]]
}

# Starts lf-server in the background and waits until it has planned and
# serves (it answers on its socket while it plans); its pid in SERVER_PID.
start_server() {   # ARGS...
  "$LF_BIN/lf-server" --endpoint "$EP" "$@" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_until 20 "the server to serve on $EP" -- serving
}

ranks_running() {  # N: lf-stat shows N ranks (or more) being served
  local k
  k=$("$LF_BIN/lf-stat" "$EP" --json 2>/dev/null | grep -c '"state": "running"') || true
  SEEN="${k:-0} running"
  [[ ${k:-0} -ge $1 ]]
}

# Waits (up to 20 s) until N ranks are being served, per lf-stat.
wait_running() {   # N
  wait_until 20 "$1 ranks to be running" -- ranks_running "$1"
}

# Waits (up to 20 s: its clients have ended) for the server; fails unless
# it exits 0.
wait_server() {
  wait_ok 20 "the server" "$SERVER_PID" "$WORK/server.log"
}

# Runs N clients (ranks 0..N-1) to their end: outputs in $WORK/TAG.rR.txt,
# per-batch digests in $WORK/TAG.rR.dig, logs in $WORK/TAG.rR.log; "{r}" in
# an argument becomes the rank. The run may take up to 60 s (the longest in
# these tests, 8 s under ThreadSanitizer). Their exit statuses in CLIENT_RCS.
end_clients() {    # TAG N [rank-loop args...]
  local tag=$1 n=$2; shift 2
  local cpids=() logs=() r
  for ((r = 0; r < n; r++)); do
    "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank "$r" --world "$n" \
      --out "$WORK/$tag.r$r.txt" --digests "$WORK/$tag.r$r.dig" "${@//\{r\}/$r}" \
      >"$WORK/$tag.r$r.log" 2>&1 &
    cpids+=($!)
    logs+=("$WORK/$tag.r$r.log")
  done
  PIDS+=("${cpids[@]}")
  wait_until 60 "the $n clients of run $tag to end" "${logs[@]}" -- ended "${cpids[@]}"
  CLIENT_RCS=()
  for ((r = 0; r < n; r++)); do
    CLIENT_RCS+=(0)
    wait "${cpids[$r]}" || CLIENT_RCS[r]=$?
  done
}

# end_clients, and fails unless every client exited 0 (their logs shown).
run_clients() {    # TAG N [rank-loop args...]
  end_clients "$@"
  local r rc=0
  for ((r = 0; r < $2; r++)); do
    [[ ${CLIENT_RCS[r]} -eq 0 ]] || { rc=1; cat "$WORK/$1.r$r.log" >&2; }
  done
  [[ $rc -eq 0 ]] || fail "a client of run $1 failed"
}

# Resume: N clients stop after K batches (their states saved), then
# restore into a new server; fails unless the two pieces together equal the
# uninterrupted run `full` (run with the same server flags, SRV) batch for
# batch and byte for byte.
resume_equals_full() {   # K N VERIFY
  local k=$1 n=$2 verify=$3 r
  start_server "${SRV[@]}"
  run_clients "a$k" "$n" --max-batches "$k" --save "$WORK/state.$k.{r}"
  wait_server
  start_server "${SRV[@]}"
  run_clients "b$k" "$n" --restore "$WORK/state.$k.{r}" --verify "$verify"
  wait_server
  for ((r = 0; r < n; r++)); do
    [[ $(wc -l <"$WORK/a$k.r$r.txt") -eq $k ]] || fail "k=$k: rank $r first piece length"
    cmp -s <(cat "$WORK/a$k.r$r.txt" "$WORK/b$k.r$r.txt") "$WORK/full.r$r.txt" ||
      fail "k=$k: rank $r resumed batches differ from the uninterrupted run"
    cmp -s <(cat "$WORK/a$k.r$r.dig" "$WORK/b$k.r$r.dig") "$WORK/full.r$r.dig" ||
      fail "k=$k: rank $r resumed tensor bytes differ from the uninterrupted run"
  done
}

# end_clients, and fails unless every client exited non-zero.
run_clients_failing() {  # TAG N [rank-loop args...]
  end_clients "$@"
  local r
  for ((r = 0; r < $2; r++)); do
    [[ ${CLIENT_RCS[r]} -ne 0 ]] || fail "client $r of run $1 exited 0"
  done
}

# Asks while a run is held, so that it cannot end before the answer
# however loaded the machine: of a started world-2 server, rank 0's client
# runs free and rank 1's gets stuck after K batches, holding its slots (the
# planner waits for them); waits (20 s) until COND succeeds, then kills
# rank 1's client, so rank 0 finishes, and waits for the server.
held_until() {     # K WHAT COND...
  local k=$1 what=$2 c0 c1
  shift 2
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 2 >"$WORK/held.r0.log" 2>&1 &
  c0=$!
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 1 --world 2 --hang-after "$k" >/dev/null 2>&1 &
  c1=$!
  PIDS+=("$c0" "$c1")
  wait_until 20 "$what" -- "$@"
  kill -9 "$c1"
  wait_ok 30 "rank 0 after rank 1 was killed" "$c0" "$WORK/held.r0.log"
  wait_server
}

# Sorted batch lines of every rank of a run.
stream_of() {      # TAG
  cat "$WORK/$1".r*.txt | sort -k1,1n -k2,2n -k3,3n
}

digests_of() {     # TAG: per-batch digests of every rank, sorted
  cat "$WORK/$1".r*.dig | sort -k1,1n -k2,2n -k3,3n
}

# Every sample once per epoch: the stream holds epochs 0..EPOCHS-1 (an
# empty stream fails), the ids of each epoch are distinct and, with nothing
# rejected by the plan, as many as the dataset holds.
check_exactly_once() {   # TAG SAMPLES EPOCHS
  local tag=$1 want=$2 epochs=$3 e ids uniq seen
  seen=$(stream_of "$tag" | cut -d' ' -f1 | sort -un | tr '\n' ' ')
  [[ "$seen" == "$(seq -s ' ' 0 $((epochs - 1))) " ]] ||
    fail "$tag: delivered epochs '${seen% }', want 0..$((epochs - 1))"
  for e in $seen; do
    ids=$(stream_of "$tag" | awk -v e="$e" '$1 == e && $4 > 0 {print $5}' | tr , '\n' | wc -l)
    uniq=$(stream_of "$tag" | awk -v e="$e" '$1 == e && $4 > 0 {print $5}' | tr , '\n' | sort -u | wc -l)
    [[ $ids -eq $uniq ]] || fail "$tag: epoch $e delivered $ids ids, $uniq distinct"
    [[ $uniq -eq $want ]] || fail "$tag: epoch $e delivered $uniq of $want samples"
  done
}

# lf-server ARGS... must refuse to start: exit 1, saying MESSAGE.
server_refuses() {   # WHAT MESSAGE ARGS...
  server_exits "$1" 1 "${@:2}"
}

# lf-server ARGS... must stop at once with exit RC, saying MESSAGE (2: the
# command line is wrong).
server_exits() {   # WHAT RC MESSAGE ARGS...
  local what=$1 want_rc=$2 want=$3 rc=0
  shift 3
  "$LF_BIN/lf-server" "$@" >"$WORK/refused.log" 2>&1 || rc=$?
  [[ $rc == "$want_rc" ]] && grep -qF -- "$want" "$WORK/refused.log" ||
    fail "$what: exit $rc, want $want_rc and '$want': $(cat "$WORK/refused.log")"
}

# The bytes lf-server ARGS... needs before any cache: read buffers, two
# blocks and the process's own resident memory, as it names them when
# refusing a 1-byte --memory-limit (which it does before planning: the
# rings, sized by the plan, are not in it; the own part differs by build: a
# sanitizer's shadow memory is in it), the own part with an eighth more:
# it varies from run to run (ThreadSanitizer: 1.08 MB more in the run than
# in the probe, which failed a 1 MiB margin).
memory_need() {    # ARGS...
  local need
  need=$("$LF_BIN/lf-server" "$@" --memory-limit 1 2>&1 |
    sed -n 's/.* is below rings \([0-9]*\) + read buffers \([0-9]*\) + two blocks \([0-9]*\) + the process.s own \([0-9]*\).*/\1 + \2 + \3 + \4 * 9 \/ 8/p' || true)
  [[ -n "$need" ]] || fail "no memory need reported for a 1-byte limit"
  echo $(($need))
}

check_no_leftovers() {
  local now
  now=$(ls /dev/shm | sort)
  [[ "$now" == "$SHM_BEFORE" ]] || fail "/dev/shm changed: $(comm -13 <(echo "$SHM_BEFORE") <(echo "$now"))"
  # Nothing may stay in the runtime directory, the lock file included.
  local left
  left=$(ls "$RT")
  [[ -z "$left" ]] || fail "left in the runtime directory: $left"
}

# A rank's state and batch count from lf-stat's JSON ("gone 17"); needs
# /usr/bin/python3 (the caller skips without it).
rank_stat() {      # RANK
  "$LF_BIN/lf-stat" "$EP" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
r = [r for r in json.load(sys.stdin)["ranks"] if r["rank"] == int(sys.argv[1])][0]
print(r["state"].replace(" ", "_"), r["batches"])' "$1"
}

# Succeeds when lf-stat shows RANK in STATE ("any": whichever) with at least
# MIN_BATCHES batches handed out; SEEN says what it showed. A wait_until
# condition.
rank_is() {        # RANK STATE|any [MIN_BATCHES]
  local st n
  read -r st n < <(rank_stat "$1" 2>/dev/null) || { SEEN="no answer from lf-stat"; return 1; }
  SEEN="rank $1 $st, $n batches"
  [[ ($2 == any || $st == "$2") && $n -ge ${3:-0} ]]
}

# The position in a state file of lf_state_save: "epoch step".
state_position() { # FILE
  local e s
  e=$(od -An -t u4 -j 8 -N 4 "$1" | tr -d ' ')
  s=$(od -An -t u8 -j 16 -N 8 "$1" | tr -d ' ')
  echo "$e $s"
}

# The lines of a --out or --digests file before position "epoch step".
before_position() { # FILE EPOCH STEP
  awk -v e="$2" -v s="$3" '$1 < e || ($1 == e && $2 < s)' "$1"
}

# kill -9 of a client, then lf-stat polled until its rank is "gone" (the
# server learns it from the closed fd-socket connection); fails if it is
# not within BOUND_MS (default 20 s). Sets GONE_MS.
kill_client_until_gone() {   # PID RANK [BOUND_MS]
  local pid=$1 rank=$2 bound=${3:-20000} t0
  t0=$(date +%s%N)
  kill -9 "$pid"
  { wait "$pid"; } 2>/dev/null || true
  wait_until $(((bound + 999) / 1000)) "rank $rank to be gone after its client's kill -9" -- \
    rank_is "$rank" gone
  GONE_MS=$((($(date +%s%N) - t0) / 1000000))
  [[ $GONE_MS -le $bound ]] || fail "rank $rank gone after $GONE_MS ms, over $bound ms"
}

# lf-stat's reading of two ranks where rank 1 is the slower (e2e/server_observe,
# python_observe), once both have 30 steps reported: "ok" and what it showed,
# in SEEN, or what is wrong. lockstep: rank 0 is held back by rank 1 through
# the plan's lock-step; sync: rank 0 waits for rank 1 in its all-reduce.
observe_reading() {  # lockstep|sync
  "$LF_BIN/lf-stat" "$EP" --json 2>/dev/null >"$WORK/stat.json" || { SEEN="no answer"; return 1; }
  SEEN=$("$PY" - "$WORK/stat.json" "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["rank"]: x for x in d["ranks"]}
if min(x["steps_reported"] for x in r.values()) < 30:
    print("fewer than 30 steps"); sys.exit()
f0, f1 = r[0]["per_step_ms"], r[1]["per_step_ms"]
bad = []
if d["slowest"] != {"rank": 1, "stage": "compute"}: bad.append("slowest %s" % d["slowest"])
if r[1]["cause"] != "compute": bad.append("rank 1: %s" % r[1]["cause"])
if sys.argv[2] == "sync":
    if r[0]["cause"] != "sync wait": bad.append("rank 0: %s" % r[0]["cause"])
    if f0["sync"] is None or not f0["sync"] > 2 * max(f0["data_wait"], f0["compute"]): bad.append("rank 0 %s" % f0)
    if f1["sync"] is not None and f1["sync"] > f0["sync"] / 2: bad.append("rank 1 %s" % f1)
    print("; ".join(bad) if bad else "ok: rank 0 sync wait %.1f ms a step, compute %.1f ms, data wait %.1f ms; rank 1 compute %.1f ms"
          % (f0["sync"], f0["compute"], f0["data_wait"], f1["compute"]))
    sys.exit()
if r[0]["cause"] != "held back by rank 1": bad.append("rank 0: %s" % r[0]["cause"])
if not f0["held_back"] > 2 * f0["data_path"]: bad.append("rank 0 %s" % f0)
server = f0["held_back"] + f0["data_path"]
if abs(server - f0["data_wait"]) > max(5, 0.15 * f0["data_wait"]): bad.append("rank 0: client %.2f ms, server %.2f ms" % (f0["data_wait"], server))
print("; ".join(bad) if bad else "ok: rank 0 data wait %.1f ms a step (lf_next), held back %.1f ms, data path %.1f ms; rank 1 compute %.1f ms"
      % (f0["data_wait"], f0["held_back"], f0["data_path"], f1["compute"]))
PYEOF
)
  [[ $SEEN == ok* ]]
}

# The trace and the chart of common/timeline.c (lf-train's, or lf-server's
# for lf_client_trace): e2e/check_timeline.py says what is checked; the
# chart is rendered by rsvg-convert where the machine has it.
check_trace() {    # TRACE RANKS [server]
  /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/check_timeline.py" trace "$@" ||
    fail "trace $1 malformed"
}
check_chart() {    # SVG RANKS
  /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/check_timeline.py" chart "$@" ||
    fail "chart $1 malformed"
  if command -v rsvg-convert >/dev/null; then
    rsvg-convert -o "$1.png" "$1" || fail "rsvg-convert cannot render $1"
    echo "chart $1: rendered by rsvg-convert"
  fi
}
