#!/usr/bin/env bash
# The test runner: unit programs, fuzz-corpus replays, end-to-end scripts.
# Each test runs under a timeout; exit 0 = pass, 77 = skip, anything else = fail.
# Usage: tests/run.sh BUILD_DIR [NAME_FILTER]   (an extended regular expression
# matched against names such as unit/plan_props, e2e/server_kill)
# The last line is "N passed, N failed, N skipped"; the exit status is non-zero
# when anything failed.
set -u
B=${1:?usage: tests/run.sh BUILD_DIR [FILTER]}
filter=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$B" && pwd)
timeout_s=${LF_TEST_TIMEOUT:-300}
logdir="$B/test-logs"
# A whole run starts from an empty log folder; a filtered run rewrites only
# its own tests' logs, so a second run beside it (a sanitizer subset, the GPU
# tests) keeps the first one's.
[[ -z "$filter" ]] && rm -rf "$logdir"
mkdir -p "$logdir"
export LF_BUILD="$B" LF_BIN="$B/bin" LF_ROOT="$root"
# For a SANITIZE=thread build: libzmq's own threads are not instrumented.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$root/tests/tsan.supp}"

passed=0 failed=0 skipped=0
failures=()

run_one() {   # NAME COMMAND...
  local name=$1; shift
  [[ -n "$filter" && ! "$name" =~ $filter ]] && return
  local log="$logdir/${name//\//_}.log" start end rc
  start=$(date +%s%N)
  (cd "$root" && timeout -k 5 "$timeout_s" "$@") >"$log" 2>&1 </dev/null
  rc=$?
  end=$(date +%s%N)
  local ms=$(( (end - start) / 1000000 )) secs
  secs=$(printf '%d.%02d' $((ms / 1000)) $(((ms % 1000) / 10)))
  case $rc in
    0)  passed=$((passed + 1)); printf 'PASS  %-44s %6ss\n' "$name" "$secs" ;;
    77) skipped=$((skipped + 1)); printf 'SKIP  %-44s %s\n' "$name" "$(tail -n 1 "$log")" ;;
    *)  failed=$((failed + 1)); failures+=("$name")
        [[ $rc -eq 124 || $rc -eq 137 ]] && echo "timed out after ${timeout_s}s" >>"$log"
        printf 'FAIL  %-44s %6ss (exit %d)\n' "$name" "$secs" "$rc"
        sed 's/^/      | /' "$log" | tail -n 25 ;;
  esac
}

# Tests are found by their sources (a binary left in the build folder by a
# test since removed does not run); a source whose binary is missing fails.
not_built=(sh -c 'echo "$0 is not built (make build)"; exit 1')
for src in "$root"/tests/unit/*.c; do
  name=$(basename "$src" .c) t="$B/tests/unit/$name"
  if [[ -x "$t" ]]; then run_one "unit/$name" "$t"; else run_one "unit/$name" "${not_built[@]}" "$t"; fi
done
for src in "$root"/tests/fuzz/*.c; do
  name=$(basename "$src" .c) r="$B/fuzz/$name-replay"
  [[ $name == replay ]] && continue   # the replay driver, linked into each
  if [[ -x "$r" ]]; then run_one "fuzz/$name" "$r" "$root/tests/fuzz/corpus/$name"
  else run_one "fuzz/$name" "${not_built[@]}" "$r"; fi
done
for s in "$root"/tests/e2e/*.sh; do
  [[ -f "$s" && "$s" != *_lib.sh ]] || continue   # *_lib.sh are sourced helpers
  run_one "e2e/$(basename "$s" .sh)" bash "$s"
done

echo
[[ ${#failures[@]} -gt 0 ]] && echo "failed: ${failures[*]} (logs in $logdir)"
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 && $((passed + skipped)) -gt 0 ]]
