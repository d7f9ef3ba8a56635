#!/usr/bin/env bash
# Every lf-shard command answers --help on stdout with exit 0, a usage line and
# an example; no arguments at all is a usage error (exit 2).
source "$(dirname "$0")/../data/lf_shard/helpers.sh"

check_help() {   # ARGS...: the command line before --help
  local out
  out=$("$LF_SHARD" "$@" --help) || fail "lf-shard $* --help: exit $?"
  [[ "$out" == "Usage: lf-shard "* ]] || fail "lf-shard $* --help: no usage line"
  [[ "$out" == *"Example:"* ]] || fail "lf-shard $* --help: no example"
}

check_help
for cmd in "synth" "synth tokens" "synth images" "synth frames" "create" "create tokens" \
           "create images" "create frames" "inspect" "stats" "verify" "cat" "digest"; do
  # shellcheck disable=SC2086 # the words of cmd are separate arguments
  check_help $cmd
done
out=$("$LF_SHARD" -h) || fail "lf-shard -h: exit $?"
[[ "$out" == "Usage: lf-shard COMMAND"* ]] || fail "lf-shard -h: no usage line"
"$LF_SHARD" >/dev/null 2>&1
[[ $? -eq 2 ]] || fail "lf-shard without arguments should exit 2"
echo "help: every command answers --help"
