# Sourced by the lf-server benchmarks (server.sh, server_image.sh; run.sh
# skips *_lib.sh): a scratch folder with a private runtime directory, GNU
# time, and the way they run a server with two clients and read its summary.
# WORKERS (default "1 2") and ROUNDS (3) are the worker counts and rounds.
BIN=${LF_BIN:?}; BUILD=${LF_BUILD:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/lf-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -m 700 "$work/rt"
EP="$work/rt/ctl"
workers=${WORKERS:-1 2}
rounds=${ROUNDS:-3}
gnu_time=$(type -P time) || { echo "server bench: GNU time is needed (apt-get install time)"; exit 1; }

summary() {   # SERVER-LOG SED-PATTERN: one figure from the server's summary
  sed -n "s/$2/\\1/p" "$1"
}

serve() {   # LOG CLIENT-ARGS SERVER-ARGS... : runs a server and 2 clients; a failure ends the bench
  local log=$1 cargs=$2 pids=() p; shift 2
  "$gnu_time" -f "peak_rss_kb %M" "$BIN/lf-server" --endpoint "$EP" --world 2 "$@" \
    >"$log.server" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -S "$EP" ]] && break; sleep 0.05; done
  for r in 0 1; do
    # shellcheck disable=SC2086
    "$BIN/lf-rank-loop" --endpoint "$EP" --rank $r --world 2 $cargs >"$log.r$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" && continue
    echo "server bench: a run failed (lf-server $*): $(tail -3 "$log".*)"
    exit 1
  done
}

# Prints run, steady and cpu seconds of a server log.
times_of() {
  local secs steady cpu
  secs=$(summary "$1" '.* samples in \([0-9.]*\) s;.*')
  steady=$(summary "$1" '.*steady \([0-9.]*\) s.*')
  cpu=$(sed -n 's/.*cpu user \([0-9.]*\) s, sys \([0-9.]*\) s.*/\1 \2/p' "$1" | awk '{print $1 + $2}')
  echo "$secs $steady $cpu"
}
