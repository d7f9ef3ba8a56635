#!/usr/bin/env bash
# lf-server's flags are read strictly: each malformed or out-of-range value
# is refused at start-up with exit 2 and the flag named, before any ring is
# made (a size the transform cannot make used to pass here and stop the
# job at its first image; an --epochs of 4294967295 used to be taken and
# its plan walked for hours); the well-formed forms are taken.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
make_dataset "$WORK/tiny" --samples 20   # plans 65536 epochs in a moment
DS=$WORK/ds
# A refusal comes before any planning; the timeout only ends a value that
# is taken instead (--epochs 4294967295 once planned for ever).
refused() {   # WHAT FLAGS...: lf-server --print-plan must exit 2 naming WHAT
  local what=$1 rc=0; shift
  timeout 60 "$LF_BIN/lf-server" --data "$DS" --world 2 --print-plan "$@" >/dev/null \
    2>"$WORK/err" || rc=$?
  [[ $rc == 2 ]] || fail "$* : exit $rc, want 2 ($(cat "$WORK/err"))"
  grep -q -- "$what" "$WORK/err" || fail "$* : the error does not name $what: $(cat "$WORK/err")"
}
taken() {   # FLAGS...: lf-server --print-plan must succeed
  "$LF_BIN/lf-server" --data "$DS" --world 2 --print-plan "$@" >/dev/null 2>"$WORK/err" ||
    fail "$* refused: $(cat "$WORK/err")"
}

for v in 1025x10 224x224junk -1x224 0x5 224 x224 224x; do refused --image-size --image-size "$v"; done
for v in "" " 0.5" 1.5 -0 nan 0.5x; do refused --flip --flip "$v"; done
for v in "0," " 0" "+0" "1-0" "0,,1" "0-" "2"; do refused --ranks --ranks "$v"; done
refused --epochs --epochs 0
# Start-up plans every epoch once: the count is bounded, and the message
# names the bound.
refused '--epochs must be 1\.\.65536' --epochs 65537
refused '--epochs must be 1\.\.65536' --epochs 4294967295
# Step keys hold epochs up to 2^24 - 1: a run past it (or wrapping past
# 2^32 - 1) once served with its later epochs' samples never counted off
# the block cache.
refused 'the last epoch, 16777216, is past 16777215' --epoch 16777214 --epochs 3
refused 'the last epoch, 4294967296, is past 16777215' --epoch 4294967295 --epochs 2
refused --world --world 2x
refused --micro-max-padded --sampler naive --micro-max-padded 10   # a cap a baseline would drop samples by

# Parameters the balancer cannot plan with: exit 1 in its own words, as
# lf-plan prints them (lf-server once said "plan: Value too large for
# defined data type" for this outlier step past 2^63).
rc=0
timeout 60 "$LF_BIN/lf-server" --data "$DS" --world 2 --sampler balanced --cost 2.2e12,0,0,0 \
  --budget 4503599627370496 --outlier-cost 2251799813685248 --outlier-group 4096 \
  >/dev/null 2>"$WORK/err" || rc=$?
[[ $rc == 1 ]] && grep -q "an outlier step would cost 2^63 or more" "$WORK/err" ||
  fail "an outlier step past 2^63: exit $rc: $(cat "$WORK/err")"

taken --image-size 1024x1 --flip 0 --ranks 0-1
taken --flip .25 --ranks 0,1
taken --flip 1 --ranks 1
taken --pad-id 65535 --token-dtype u16
DS=$WORK/tiny taken --epochs 65536
taken --epoch 16777213 --epochs 3
check_no_leftovers
echo "lf-server options: malformed values refused with exit 2, well-formed ones taken"
