#!/usr/bin/env bash
# liblevelfeed.so exports exactly the functions of levelfeed.h (the version
# script holds), the pkg-config file names it, and a program built against
# the shared library alone (no project static libraries) connects to a
# server and runs to the end of the data; so does one linked to the static
# library alone with the .pc file's Libs.private.
source "$(dirname "$0")/server_lib.sh"

so="$LF_BUILD/lib/liblevelfeed.so"
[[ -f "$so" ]] || fail "missing $so"
# Declared functions: names followed by "(" outside comment lines.
want=$(grep -v '^ *\*\|^/\*' "$LF_ROOT/client/levelfeed.h" | grep -o '\blf_[a-z_]*(' | tr -d '(' | sort -u)
got=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
[[ "$want" == "$got" ]] || fail "exports differ from levelfeed.h: $(diff <(echo "$want") <(echo "$got") | tr '\n' ' ')"
grep -q -- '-llevelfeed' "$LF_BUILD/lib/pkgconfig/levelfeed.pc" || fail "levelfeed.pc"

cat >"$WORK/user.c" <<'C'
#include <levelfeed.h>
#include <stdio.h>
int main(void)
{
    lf_client_options o;
    lf_client_options_default(&o);
    lf_client *c;
    int rc = lf_client_open(&o, &c);
    if (rc) { printf("open: %s\n", lf_strerror(rc)); return 1; }
    lf_batch b;
    long n = 0;
    while ((rc = lf_next(c, &b, 10000)) == 0) { n += b.nsamples; lf_release(c, &b); }
    lf_client_close(c);
    printf("%ld samples, %s\n", n, lf_strerror(rc));
    return rc == LF_E_END ? 0 : 1;
}
C
# A sanitizer build's library needs its runtime in the program too. ldd's
# output is read whole first: "ldd | grep -q" under pipefail fails when
# grep's early exit kills ldd with SIGPIPE, and a TSan library then went
# into a program without TSan, which crashed at random in ZeroMQ's threads.
san=() deps=$(ldd "$so")
[[ $deps == *libasan* ]] && san+=(-fsanitize=address)
[[ $deps == *libubsan* ]] && san+=(-fsanitize=undefined)
[[ $deps == *libtsan* ]] && san+=(-fsanitize=thread)
cc -std=c11 "${san[@]}" -I"$LF_ROOT/client" "$WORK/user.c" -L"$LF_BUILD/lib" -llevelfeed -o "$WORK/user" ||
  fail "cannot build against liblevelfeed.so"
ldd "$WORK/user" >/dev/null
make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 1
LD_LIBRARY_PATH="$LF_BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RANK=0 WORLD_SIZE=1 LEVELFEED_ENDPOINT="$EP" "$WORK/user" \
  >"$WORK/user.log" 2>&1 || fail "user program: $(cat "$WORK/user.log")"
grep -q "^2000 samples" "$WORK/user.log" || fail "user program: $(cat "$WORK/user.log")"
wait_server

# The same program linked to liblevelfeed.a alone, plus the libraries the
# .pc file's Libs.private names (what pkg-config --static adds).
private=$(sed -n 's/^Libs.private: //p' "$LF_BUILD/lib/pkgconfig/levelfeed.pc")
cc -std=c11 "${san[@]}" -I"$LF_ROOT/client" "$WORK/user.c" "$LF_BUILD/lib/liblevelfeed.a" \
  $private -o "$WORK/user-static" 2>"$WORK/static.log" ||
  fail "cannot link liblevelfeed.a with Libs.private ($private): $(cat "$WORK/static.log")"
start_server --data "$WORK/ds" --world 1
RANK=0 WORLD_SIZE=1 LEVELFEED_ENDPOINT="$EP" "$WORK/user-static" >"$WORK/user.log" 2>&1 ||
  fail "static user program: $(cat "$WORK/user.log")"
grep -q "^2000 samples" "$WORK/user.log" || fail "static user program: $(cat "$WORK/user.log")"
wait_server
check_no_leftovers
echo "shared library: exports, pkg-config, a program linked to it alone: ok; the static library with Libs.private: ok"
