#!/usr/bin/env python3
"""model_dir_check.py — a model server for t/artifact_replica.sh (the
replica contract: PORT, GET /health): it checks its DROVER_MODEL_DIR
against EXPECTED (argv[1], lines "SHA256  PATH" as sha256sum writes them):
every file there with exactly those bytes, nothing else, no write bit on
any file or directory. It then records the check in MARKER_DIR (argv[2])/
$DROVER_REPLICA_ID ("ok" or the problem) and serves /health 200 only when
the check passed (503 otherwise).
"""
import hashlib
import http.server
import os
import stat
import sys

expected_file, marker_dir = sys.argv[1], sys.argv[2]
root = os.environ.get("DROVER_MODEL_DIR", "")
want = {}
with open(expected_file) as f:
    for line in f:
        digest, path = line.rstrip("\n").split("  ", 1)
        want[path] = digest


def check():
    if not root or not os.path.isdir(root):
        return "DROVER_MODEL_DIR is not a directory: %r" % root
    seen = {}
    for d, dirs, files in os.walk(root):
        if os.stat(d).st_mode & 0o222:
            return "directory %s is writable" % d
        for name in files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                return "%s is not a regular file" % p
            if st.st_mode & 0o222:
                return "%s is writable" % p
            with open(p, "rb") as fh:
                seen[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    if seen != want:
        return "model dir differs: got %r, want %r" % (seen, want)
    return "ok"


result = check()
with open(os.path.join(marker_dir, os.environ.get("DROVER_REPLICA_ID", "unknown")), "w") as f:
    f.write(result + "\n")
print("model dir check:", result, flush=True)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = 200 if result == "ok" and self.path == "/health" else 503
        body = (result + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
