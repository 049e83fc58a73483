#!/usr/bin/env python3
"""range_server.py — a test origin for the node cache (t/cache.sh).

Serves the files under --root with single-range GETs (206 and a
Content-Range; 416 when unsatisfiable), and a few control routes:
  GET /_stats                 {"PATH": bytes of body sent, ...}
  GET /_reset                 zero the counters
  GET /_flip?path=P&offset=N  flip (xor 0xff) the byte at N of P as served (again: unflip)
  GET /_slow?bps=N            send each answer at N bytes/s (0: full speed)
With --token T every file GET needs "Authorization: Bearer T" (else 401).
With --tls CERT KEY it speaks https (t/artifact_https.sh) with that
certificate chain and key (PEM).
Listens on 127.0.0.1:0 and writes its port to --port-file.
"""
import argparse
import json
import os
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SENT = {}
FLIPS = {}        # path -> set of offsets
SLOW = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        path = urllib.parse.unquote(u.path)
        if path == "/_stats":
            with LOCK:
                return self.reply(200, json.dumps(SENT).encode())
        if path == "/_reset":
            with LOCK:
                SENT.clear()
            return self.reply(200, b"{}")
        if path == "/_flip":
            with LOCK:
                s = FLIPS.setdefault(q["path"], set())
                s ^= {int(q["offset"])}
            return self.reply(200, b"{}")
        if path == "/_slow":
            SLOW[0] = int(q["bps"])
            return self.reply(200, b"{}")
        if ARGS.token and self.headers.get("Authorization") != "Bearer " + ARGS.token:
            return self.reply(401, b'{"error":"bad credential"}')
        rel = path.lstrip("/")
        full = os.path.realpath(os.path.join(ARGS.root, rel))
        if not full.startswith(os.path.realpath(ARGS.root) + os.sep) or not os.path.isfile(full):
            return self.reply(404, b'{"error":"not found"}')
        size = os.path.getsize(full)
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()
                return
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            status = 206
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Connection", "close")
        self.end_headers()
        with open(full, "rb") as f:
            f.seek(start)
            off = start
            t0 = time.monotonic()
            sent = 0
            while off <= end:
                piece = bytearray(f.read(min(65536, end - off + 1)))
                with LOCK:
                    for x in FLIPS.get(rel, ()):
                        if off <= x < off + len(piece):
                            piece[x - off] ^= 0xFF
                bps = SLOW[0]
                if bps:
                    due = t0 + (sent + len(piece)) / bps
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                try:
                    self.wfile.write(piece)
                except (BrokenPipeError, ConnectionResetError):
                    return
                with LOCK:
                    SENT[rel] = SENT.get(rel, 0) + len(piece)
                off += len(piece)
                sent += len(piece)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    if ARGS.tls:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls[0], ARGS.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = ARGS.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, ARGS.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
