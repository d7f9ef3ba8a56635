"""The checks of common/timeline.c's outputs the e2e tests share (lf-train's
and lf-server's for lf_client_trace / Loader(trace=, chart=)):

  check_timeline.py trace FILE RANKS [server]
      a Chrome trace Perfetto opens: JSON; a process a rank, pids 1..RANKS
      (never 0, which Perfetto takes for the idle task), each named
      "...: rank R", its steps on one track; with `server`, one more
      process (pid RANKS + 1, "...: server") with a track per stage and
      thread, each stage (read, decode, assemble, ring wait) with slices;
      on every track the slices one after another (none overlaps the next)
  check_timeline.py chart FILE RANKS
      an SVG document with a panel a rank ("rank R")

Prints what it found; exits non-zero (an assertion) when a check fails.
"""
import collections
import json
import sys
import xml.etree.ElementTree as ET

STAGES = ("read", "decode", "assemble", "ring wait")


def check_trace(path, ranks, server):
    ev = json.load(open(path))["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X"]
    pids = set(range(1, ranks + 1 + server))
    assert {e["pid"] for e in ev} == pids, ("pids", sorted({e["pid"] for e in ev}))
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert all(procs.get(r + 1, "").endswith(": rank %d" % r) for r in range(ranks)), procs
    assert {e["tid"] for e in slices if e["pid"] <= ranks} == {1}, "a rank's steps on one track"
    assert {"data wait", "compute"} <= {e["name"] for e in slices if e["pid"] <= ranks}
    for p in range(1, ranks + 1):
        assert any(e["pid"] == p for e in slices), "rank %d has no slice" % (p - 1)
    tracks = collections.defaultdict(list)
    for e in slices:
        tracks[e["pid"], e["tid"]].append((e["ts"], e["dur"], e["name"]))
    for key, s in tracks.items():
        s.sort()
        for a, b in zip(s, s[1:]):
            assert a[0] + a[1] <= b[0] + 0.002, ("overlapping slices", key, a, b)
    if server:
        sp = ranks + 1
        assert procs.get(sp, "").endswith(": server"), procs
        threads = {e["tid"]: e["args"]["name"] for e in ev
                   if e["name"] == "thread_name" and e["pid"] == sp}
        for stage in STAGES:
            mine = [t for t, n in threads.items() if n.startswith(stage + " (")]
            assert mine, ("no %s track" % stage, threads)
            n = sum(len(tracks.get((sp, t), [])) for t in mine)
            assert n > 0, "no %s slice" % stage
            assert all(x[2] == stage for t in mine for x in tracks.get((sp, t), []))
        print("trace %s: %d ranks; server tracks: %s" % (path, ranks, ", ".join(
            "%s %d" % (threads[t], len(tracks.get((sp, t), []))) for t in sorted(threads))))
    else:
        print("trace %s: %d ranks, %d slices" % (path, ranks, len(slices)))


def check_chart(path, ranks):
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    texts = [e.text for e in root.iter("{http://www.w3.org/2000/svg}text")]
    assert all("rank %d" % r in texts for r in range(ranks)), texts
    print("chart %s: an SVG with %d rank panels" % (path, ranks))


if __name__ == "__main__":
    what, path, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "trace":
        check_trace(path, ranks, len(sys.argv) > 4 and sys.argv[4] == "server")
    else:
        check_chart(path, ranks)
