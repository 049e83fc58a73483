#!/usr/bin/env python3
"""ckpt_workload.py — a checkpointing workload for t/checkpoints.sh and
bench/artifacts (the replica contract: PORT, GET /health, and
DROVER_CHECKPOINT_DIR).

At start it records, in MARK_DIR (argv[2])/$DROVER_REPLICA_ID.resumed, the
newest complete checkpoint with a state.json it finds in
DROVER_CHECKPOINT_DIR (by its marker's mtime; "none" when there is none) and that checkpoint's state.json, and lists the
directory's entries in .../$DROVER_REPLICA_ID.entries; its pid goes to
.../$DROVER_REPLICA_ID.pid. Then every 50 ms it reads CONTROL (argv[1]):
one line per checkpoint wanted, "NAME MIB" (MIB MiB of fresh random bytes
in delta.bin, plus a fixed 1 MiB static.bin shared by every checkpoint and
state.json), "NAME empty" (a directory with only the COMPLETE marker) or
"NAME partial" (files but no marker: a checkpoint being written). Each
wanted checkpoint not already in the directory is written once, the marker
COMPLETE (empty) last; the time the write took (what the workload is blocked) is
appended to MARK_DIR/$DROVER_REPLICA_ID.blocked as "NAME SECONDS" (the
random bytes are made before the clock starts).
"""
import http.server
import json
import os
import random
import sys
import threading
import time

control, mark = sys.argv[1], sys.argv[2]
root = os.environ["DROVER_CHECKPOINT_DIR"]
rid = os.environ.get("DROVER_REPLICA_ID", "r")
STATIC = random.Random(7).randbytes(1 << 20)


def complete(name):
    return os.path.isfile(os.path.join(root, name, "COMPLETE"))


def note(suffix, text, mode="w"):
    with open(os.path.join(mark, rid + suffix), mode) as f:
        f.write(text)


def marked_at(n):
    return os.stat(os.path.join(root, n, "COMPLETE")).st_mtime_ns


# the newest complete checkpoint with a state (by its marker's time)
names = sorted((n for n in os.listdir(root)
                if complete(n) and os.path.isfile(os.path.join(root, n, "state.json"))),
               key=lambda n: (marked_at(n), n))
newest = names[-1] if names else "none"
state = ""
if names:
    with open(os.path.join(root, newest, "state.json")) as f:
        state = f.read()
note(".entries", "\n".join(sorted(os.listdir(root))) + "\n")
note(".resumed", newest + " " + state + "\n")
note(".pid", str(os.getpid()))


def write(name, how):
    d = os.path.join(root, name)
    if os.path.exists(d):
        return
    delta = os.urandom(int(float(how) * (1 << 20))) if how not in ("partial", "empty") else b"x"
    t0 = time.monotonic()   # blocked: the write itself, not making the bytes
    os.makedirs(d)
    if how != "empty":
        with open(os.path.join(d, "static.bin"), "wb") as f:
            f.write(STATIC)
        with open(os.path.join(d, "delta.bin"), "wb") as f:
            f.write(delta)
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump({"name": name}, f)
    if how != "partial":
        open(os.path.join(d, "COMPLETE"), "w").close()   # empty, as `touch` makes it
    note(".blocked", "%s %.6f\n" % (name, time.monotonic() - t0), "a")


def loop():
    while True:
        try:
            with open(control) as f:
                lines = [l.split() for l in f if l.strip()]
        except OSError:
            lines = []
        for name, how in lines:
            write(name, how)
        time.sleep(0.05)


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *a):
        pass


threading.Thread(target=loop, daemon=True).start()
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
