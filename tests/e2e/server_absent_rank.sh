#!/usr/bin/env bash
# A rank that never connects (issue #30, item 4): the server plans no step
# until every rank it serves has asked for its batches, so its peers wait.
# The server tells a waiting rank which rank it waits for (WAITING, each
# heartbeat), and the waiting rank's timeout names it: in lf-rank-loop
# (lf_client_error) "rank 1 has not connected to the server at EP for N s:
# start it, or check its launcher", and the same in the Python Loader's
# LevelfeedTimeout; a rank that connected but never asked for a batch is
# named as such. Before, the peer's timeout said only "timed out waiting
# for the server". Rank 1 started afterwards still gets the whole plan.
# Without numpy, or in a ThreadSanitizer build, the Python part is skipped,
# saying so, and the C part still runs.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds" --samples 200
SRV=(--data "$WORK/ds" --world 2 --seed 3 --slots 2 --heartbeat-ms 200)

# C: rank 0 alone times out naming rank 1; rank 1, started then, runs to
# the end (rank 0 left, so the plan goes on without it).
start_server "${SRV[@]}"
rc=0
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank 0 --timeout-ms 2000 \
  >"$WORK/r0.log" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "rank 0 ran without rank 1: $(cat "$WORK/r0.log")"
grep -Eq "rank 1 has not connected to the server at $EP for [0-9]+ s: start it, or check its launcher" \
  "$WORK/r0.log" || fail "rank 0's timeout does not name rank 1: $(cat "$WORK/r0.log")"
echo "C: $(cat "$WORK/r0.log")"
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank 1 --timeout-ms 60000 \
  >"$WORK/r1.log" 2>&1 || fail "rank 1 after rank 0 left: $(cat "$WORK/r1.log")"
wait_server

# The Python part: not with numpy missing, nor in a ThreadSanitizer build
# (CI runs the server_ tests there; Python cannot load a library built so:
# "cannot allocate memory in static TLS block").
lib=${LF_BUILD:-$LF_BIN/..}/lib/liblevelfeed.so
why=
/usr/bin/python3 -c 'import numpy' 2>/dev/null || why="numpy is not importable"
ldd "$lib" | grep -q libtsan && why="the library is a ThreadSanitizer build"
if [[ -n $why ]]; then
  echo "skip of the Python part: $why"
  check_no_leftovers
  exit 0
fi
source "$(dirname "$0")/python_lib.sh"

# Python: the same timeout as LevelfeedTimeout; then rank 1 connects but
# takes no batch, and rank 0's next timeout says so.
start_server "${SRV[@]}"
"$PY" - "$EP" <<'PYEOF' || fail "Python: the absent rank named"
import re
import sys
import levelfeed
from levelfeed import LevelfeedTimeout

ep = sys.argv[1]


def times_out(lo, pattern):
    try:
        next(iter(lo))
    except LevelfeedTimeout as e:
        assert re.search(pattern, str(e)), str(e)
        print("Python:", e)
        return
    sys.exit("a batch came although rank 1 %s" % pattern)


with levelfeed.Loader(endpoint=ep, rank=0, world_size=2, timeout=2) as lo:
    times_out(lo, r"rank 1 has not connected to the server at %s for \d+ s: start it, or "
              r"check its launcher" % re.escape(ep))
    with levelfeed.Loader(endpoint=ep, rank=1, world_size=2, timeout=2):
        times_out(lo, r"rank 1 connected to the server at %s \d+ s ago but has not asked for "
                  r"a batch" % re.escape(ep))
PYEOF
wait_server
check_python_leftovers
echo "absent rank ok"
