#!/usr/bin/env bash
# pad's default cut (--micro-max-padded where no cap is set, plan_cli.c
# default_cut) is decided on a balanced epoch 0 of the samples uncut (its
# first steps, PLAN_CLI_PREFIX_SAMPLES: the whole epoch here). lf-plan
# plans those steps for the decision alone; lf-server's start-up walks
# them anyway (the cap's measure), so it decides on its own walk (issue
# 35: one plan fewer at start-up) and makes and walks the cut plan only
# where the cut applies. Either way the server must serve what it served before:
# the same fingerprint (the plan id hashes the samples, pieces and
# parameters) and slot size as the code before this change printed
# (recorded below; recorded again, slot sizes unchanged, when the split's
# version entered the fingerprint; again when the later epochs' cap rule
# entered the plan id and the slots came to be sized for the cap, #35
# item 2; again when that rule became version 2, the cap from epoch 0 on
# measured on epoch 0's first steps: the fingerprints alone moved, and
# built with rule 1 this code prints the ones before; again, the cut
# entry's alone, when a cut plan's sequence hash came to be taken from its
# samples and the cut rather than from every piece, #35: its steps, which
# e2e/plan_golden and unit/plan_pieces hold, unchanged), and the same decision as lf-plan's, on index-only
# datasets where the cut applies (documents up to 600k tokens) and where
# samples cost more than the bound allows but the epoch balances uncut.
source "$(dirname "$0")/server_lib.sh"

served() {   # DIR EPOCHS: "FINGERPRINT SLOT_BYTES" of lf-server --world 8 --ranks 0
  start_server --data "$1" --world 8 --ranks 0 --epochs "$2"
  kill -INT "$SERVER_PID"
  wait "$SERVER_PID" || true   # stopped by the signal: exit 1
  echo "$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")" \
    "$(sed -n 's/.*slots of \([0-9]*\) bytes.*/\1/p' "$WORK/server.log")"
}

cut_line() {   # LOG: pad's default cut as said, without the program's name
  sed -n 's/^lf-[a-z]*: \(plan: \)\{0,1\}\(--micro-max-padded [0-9]* (default.*\)/\2/p' "$1"
}

# name dir synth-args want(fingerprint slot) cut(yes/no)
check() {
  local name=$1 dir=$WORK/$1 want=$3 cut=$4 got
  read -ra args <<<"$2"
  "$LF_BIN/lf-shard" synth tokens --index-only --out "$dir" "${args[@]}" >/dev/null ||
    fail "$name: lf-shard synth --index-only"
  got=$(served "$dir" 2)
  [[ "$got" == "$want" ]] ||
    { show_logs +1 "$WORK/server.log"; fail "$name: fingerprint and slot size $got, before: $want"; }
  "$LF_BIN/lf-plan" "$dir" --world 8 --sampler balanced --steps 1 >/dev/null 2>"$WORK/$name.plan" ||
    fail "$name: lf-plan"
  [[ "$(cut_line "$WORK/server.log")" == "$(cut_line "$WORK/$name.plan")" ]] ||
    fail "$name: the server's cut ($(cut_line "$WORK/server.log")) is not lf-plan's ($(cut_line "$WORK/$name.plan"))"
  if [[ $cut == yes ]]; then
    [[ -n "$(cut_line "$WORK/server.log")" ]] || fail "$name: not cut: $(cat "$WORK/server.log")"
    # decided on the uncut plan's epoch 0, then the cut plan planned
    [[ $(grep -c "^lf-server: planning 1 epoch(s)" "$WORK/server.log") == 2 ]] ||
      fail "$name: the cut plan was not planned anew: $(cat "$WORK/server.log")"
  else
    [[ -z "$(cut_line "$WORK/server.log")" ]] || fail "$name: cut: $(cut_line "$WORK/server.log")"
    grep -q "^lf-server: plan: note: [0-9]* samples cost more than --step-bound" "$WORK/server.log" ||
      fail "$name: no sample over the bound, the decision was not needed: $(cat "$WORK/server.log")"
    [[ $(grep -c "^lf-server: planning 1 epoch(s)" "$WORK/server.log") == 1 ]] ||
      fail "$name: planned twice: $(cat "$WORK/server.log")"
  fi
  echo "$name: fingerprint and slot size $got as before, cut: $cut as lf-plan decides: ok"
}

check cut "--samples 3000 --len-sigma 2 --len-max 600000 --seed 3" "36cf9fa44582d192 1781760" yes
check uncut "--samples 20000 --seed 3" "a18a45fdc880be56 819200" no
# Past PLAN_CLI_PREFIX_SAMPLES (2^20) the decision is taken on epoch 0's
# first steps, by both programs alike, and the server walks those steps
# alone, no epoch (server/README.md, *Planning ahead*).
"$LF_BIN/lf-shard" synth tokens --index-only --out "$WORK/big" --samples 1100000 --seed 3 \
  >/dev/null || fail "big: lf-shard synth --index-only"
served "$WORK/big" 2 >/dev/null
walked=$(sed -n 's/^lf-server: plan: start-up walked \([0-9]*\) sample(s) or piece(s), 0 of the run.s 2 epoch(s)$/\1/p' \
  "$WORK/server.log")
[[ -n "$walked" ]] && ((walked >= 1048576 && walked < 1100000)) ||
  fail "big: start-up walked '$walked' samples, not epoch 0's first 2^20: $(grep walked "$WORK/server.log")"
"$LF_BIN/lf-plan" "$WORK/big" --world 8 --sampler balanced --steps 1 >/dev/null 2>"$WORK/big.plan" ||
  fail "big: lf-plan"
[[ "$(cut_line "$WORK/server.log")" == "$(cut_line "$WORK/big.plan")" ]] ||
  fail "big: the server's cut ($(cut_line "$WORK/server.log")) is not lf-plan's ($(cut_line "$WORK/big.plan"))"
grep -q "^lf-server: plan: note: [0-9]* samples cost more than --step-bound" "$WORK/server.log" ||
  fail "big: no sample over the bound, the decision was not needed: $(cat "$WORK/server.log")"
echo "big: $walked samples walked (epoch 0's first steps), cut as lf-plan decides: ok"
check_no_leftovers
