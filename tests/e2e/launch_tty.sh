#!/usr/bin/env bash
# lf-launch on a terminal (a pty here), as a person runs it: the trainer's
# process group gets the terminal, so a trainer that reads it is not
# stopped (SIGTTIN), and a Ctrl-C reaches the trainer alone: not lf-launch
# (which would pass it on a second time) and not the server (which must
# outlive a trainer saving its checkpoint). lf-launch then exits 130 and
# stops the server itself. Needs /usr/bin/python3 (for the pty).
source "$(dirname "$0")/launch_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "SKIP: /usr/bin/python3 is needed for a pty"; exit 77; }

make_dataset "$WORK/ds"
"$PY" - "$LF_BIN/lf-launch" "$WORK" >"$WORK/t.launch" 2>&1 <<'EOF_PY' || EXIT_RC=$?
import os, pty, select, sys, time
launch, work = sys.argv[1], sys.argv[2]
open(work + "/t.err", "wb").close()
pid, fd = pty.fork()
if pid == 0:   # stderr to a file: a pty drops what is unread when its last user exits
    os.dup2(os.open(work + "/t.err", os.O_WRONLY | os.O_APPEND), 2)
    os.execv(launch, [launch, "--data", work + "/ds", "--world", "2", "--",
                      "sh", "-c", 'echo $$ >"$0"; read x; echo "got:$x"; exec sleep 60',
                      work + "/t.pid"])
out = b""
def pump(until, secs):   # reads the terminal until `until` is seen or secs pass
    global out
    end = time.time() + secs
    while until not in out and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return
for _ in range(300):
    if b"lf-launch: running" in open(work + "/t.err", "rb").read():
        break
    time.sleep(0.1)
os.write(fd, b"hello\n")
pump(b"got:hello", 10)
# Ctrl-C once the trainer is sleep (a shell between two commands may hold
# a SIGINT back for the next one, which exec replaces)
trainer = open(work + "/t.pid").read().strip()
for _ in range(100):
    if open("/proc/%s/comm" % trainer).read() == "sleep\n":
        break
    time.sleep(0.1)
os.write(fd, b"\x03")     # Ctrl-C
for _ in range(300):
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
else:
    os.kill(pid, 9)
    done, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(st))
EOF_PY
rc=${EXIT_RC:-0}
cat "$WORK/t.err" >>"$WORK/t.launch"
grep -q "got:hello" "$WORK/t.launch" || { cat "$WORK/t.launch" >&2; fail "the trainer did not read the terminal"; }
[[ $rc -eq 130 ]] || { cat "$WORK/t.launch" >&2; fail "Ctrl-C: lf-launch exited $rc, want 130"; }
! grep -q "passing .* on to the trainer" "$WORK/t.launch" ||
  fail "the Ctrl-C reached lf-launch, not only the trainer's group"
grep -q "lf-server exited with status 1 after lf-launch sent it SIGTERM" "$WORK/t.launch" ||
  { cat "$WORK/t.launch" >&2; fail "the server did not wait for lf-launch to stop it"; }
check_launch_leftovers t
echo "on a terminal: the trainer read it, Ctrl-C reached the trainer alone, exit 130, nothing left: ok"
