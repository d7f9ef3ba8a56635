#!/usr/bin/env bash
# Another local user (uid 65534, played with setpriv) cannot pose as the
# server nor make lf-server delete or follow what it planted (issue #28,
# F1 and F3; docs/RELIABILITY.md, "Local peers"):
# - the default runtime directory /tmp/levelfeed-0 squatted by that user is
#   refused, naming its owner, by the C client and the Python loader, and
#   the server refuses to start in it, naming exactly what to remove;
# - a squat that comes after the trainer started, with that user's own
#   lf-server in it, is refused once the server answers (it once fed the
#   trainer that server's batches, or stalled it for its whole timeout);
# - a symbolic link planted at /tmp/levelfeed-0 (to a directory of ours) is
#   not followed;
# - lf-server never removes a file that is not a socket at its endpoint or
#   at the endpoint's ".fd" path (--endpoint dir/model.ckpt once deleted
#   model.ckpt and model.ckpt.fd).
# The foreign fd-socket peer and the foreign memfd are refused in
# unit/client_api (a fake server plays them). It all runs in a private /tmp
# (a fresh tmpfs in a mount namespace of its own), so the real
# /tmp/levelfeed-0 is never touched. Exit 77 where uid 65534 cannot be
# played (not root, no setpriv) or no mount namespace can be made.
if [[ -z "${LF_TMP_PRIVATE:-}" ]]; then
  [[ $(id -u) == 0 ]] || { echo "SKIP: needs root, to play uid 65534 and mount a private /tmp"; exit 77; }
  setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null ||
    { echo "SKIP: setpriv cannot switch to uid 65534 here"; exit 77; }
  unshare --mount --propagation private true 2>/dev/null ||
    { echo "SKIP: no private mount namespace for a /tmp of this test's own"; exit 77; }
  # The fresh /tmp would hide a checkout (or build) that lies under /tmp.
  [[ "$(cd "$(dirname "$0")" && pwd -P)/" != /tmp/* && "$(cd "${LF_BUILD:-.}" && pwd -P)/" != /tmp/* ]] ||
    { echo "SKIP: the checkout or build is under /tmp, which this test replaces with its own"; exit 77; }
  export LF_TMP_PRIVATE=1
  exec unshare --mount --propagation private bash -c \
    'mount -t tmpfs -o mode=1777 tmpfs /tmp && exec bash "$@"' bash "$0" "$@"
fi
unset TMPDIR XDG_RUNTIME_DIR
source "$(dirname "$0")/server_lib.sh"

OTHER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
SQUAT=/tmp/levelfeed-0
chmod 755 "$WORK"                 # the other user's server reads the dataset
make_dataset "$WORK/ds"
chmod -R a+rX "$WORK/ds"
ARGS=(--data "$WORK/ds" --world 1 --budget 400000)

client_refused() {   # WHAT LOG: lf-rank-loop (default endpoint) must fail, naming the owner
  local what=$1 log=$2
  grep -qF "belongs to uid 65534" "$log" || fail "$what: $(cat "$log")"
}

# F3: a user's files at the endpoint and at its .fd path stay.
echo weights >"$RT/model.ckpt"
echo weights >"$RT/model.ckpt.fd"
server_refuses "files at the endpoint" "model.ckpt.fd: exists and is not a socket; not removing it" \
  --endpoint "$RT/model.ckpt" "${ARGS[@]}"
rm "$RT/model.ckpt.fd"
server_refuses "a file at the endpoint" "model.ckpt: exists and is not a socket; not removing it" \
  --endpoint "$RT/model.ckpt" "${ARGS[@]}"
[[ $(cat "$RT/model.ckpt") == weights ]] || fail "the endpoint's file was removed"
[[ ! -e "$RT/model.ckpt.fd" ]] || fail "the server left its fd socket behind"
rm "$RT/model.ckpt"

# F3: a symbolic link at the default runtime directory, to a private
# directory of ours, is not followed.
mkdir -m 700 "$WORK/ours"
"${OTHER[@]}" ln -s "$WORK/ours" "$SQUAT"
server_refuses "a symbolic link at $SQUAT" "$SQUAT is a symbolic link" "${ARGS[@]}"
grep -qF "rm $SQUAT" "$WORK/refused.log" || fail "the refusal names nothing to remove: $(cat "$WORK/refused.log")"
[[ -z $(ls "$WORK/ours") ]] || fail "the server used the link's target: $(ls "$WORK/ours")"
rm "$SQUAT"

# F1: a squatted runtime directory: the server says what to remove, the
# client refuses at once (not after its timeout).
"${OTHER[@]}" mkdir -m 700 "$SQUAT"
server_refuses "a squatted $SQUAT" "belongs to uid 65534" "${ARGS[@]}"
grep -qF "rm -r $SQUAT" "$WORK/refused.log" || fail "the refusal names nothing to remove: $(cat "$WORK/refused.log")"
t0=$(date +%s)
if "$LF_BIN/lf-rank-loop" --rank 0 --world 1 --connect-timeout-ms 20000 >"$WORK/squat.log" 2>&1; then
  fail "a client was served in a squatted $SQUAT"; fi
client_refused "a client, squatted $SQUAT" "$WORK/squat.log"
(($(date +%s) - t0 < 10)) || fail "the client waited out its timeout before refusing"
# The Python loader, through the same library: the cause in the exception.
# (Not under ThreadSanitizer: a TSan library cannot be loaded into an
# interpreter that was started without the runtime, "cannot allocate memory
# in static TLS block"; the C client's case above runs there.)
source "$(dirname "$0")/python_lib.sh"
lib_deps=$(ldd "$LEVELFEED_LIB")
if [[ $lib_deps == *libtsan* ]]; then
  echo "note: the Python case is skipped (a ThreadSanitizer build of liblevelfeed)"
elif "$PY" -c "import numpy" 2>/dev/null; then
  "$PY" - <<'PYEOF' || fail "python: squatted directory"
import levelfeed
try:
    levelfeed.Loader(rank=0, world_size=1, timeout=20)
except levelfeed.LevelfeedError as e:
    assert "belongs to uid 65534" in str(e), str(e)
else:
    raise SystemExit("served in a squatted directory")
PYEOF
else
  echo "note: the Python case is skipped ($PY lacks numpy)"
fi
rm -r "$SQUAT"

# F1: the squat comes after the trainer started, with the other user's own
# server in it: refused once that server answers, not served.
"$LF_BIN/lf-rank-loop" --rank 0 --world 1 --connect-timeout-ms 30000 >"$WORK/late.log" 2>&1 &
CLIENT=$!
PIDS+=("$CLIENT")
sleep 0.5
"${OTHER[@]}" "$LF_BIN/lf-server" --endpoint "$SQUAT/ctl" "${ARGS[@]}" >"$WORK/other.log" 2>&1 &
PIDS+=($!)
wait_exit 25 "the client of a late squat" "$CLIENT" "$WORK/late.log" "$WORK/other.log"
[[ $EXIT_RC != 0 ]] || fail "the client was served by the other user's server: $(cat "$WORK/late.log")"
client_refused "a client, late squat" "$WORK/late.log"
echo "local peers ok"
