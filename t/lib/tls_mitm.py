#!/usr/bin/env python3
"""tls_mitm.py — a man in the middle for t/tls.sh: terminates TLS on
127.0.0.1 (port written to --port-file) with its own certificate (--cert,
--key), forwards each request to the real head (--target https URL, its
certificate not checked) and answers with the head's reply, so that
GET /v1/tls/ca through it returns the real CA. Everything it decrypts is
appended to --log: the test checks that no secret ever reached it. It
listens on --listen (default 127.0.0.1; t/netns.sh gives its netns address).
"""
import argparse
import socket
import ssl
import threading

ap = argparse.ArgumentParser()
ap.add_argument("--target", required=True)
ap.add_argument("--cert", required=True)
ap.add_argument("--key", required=True)
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--listen", default="127.0.0.1")
a = ap.parse_args()
host, port = a.target.split("://", 1)[1].rsplit(":", 1)

srv_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
srv_ctx.load_cert_chain(a.cert, a.key)
cli_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
cli_ctx.check_hostname = False
cli_ctx.verify_mode = ssl.CERT_NONE
lock = threading.Lock()


def note(data):
    with lock, open(a.log, "ab") as f:
        f.write(data)


def serve(raw):
    try:
        c = srv_ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError) as e:
        note(b"handshake refused by the client: " + str(e).encode() + b"\n")
        raw.close()
        return
    try:
        req = c.recv(65536)
        note(req + b"\n")
        if not req:
            return
        if b"Connection:" not in req:
            req = req.replace(b"\r\n", b"\r\nConnection: close\r\n", 1)
        up = cli_ctx.wrap_socket(socket.create_connection((host, int(port))))
        up.sendall(req)
        while True:
            d = up.recv(65536)
            if not d:
                break
            c.sendall(d)
        up.close()
    except OSError:
        pass
    finally:
        c.close()


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((a.listen, 0))
ls.listen(16)
with open(a.port_file + ".tmp", "w") as f:
    f.write(str(ls.getsockname()[1]))
import os
os.rename(a.port_file + ".tmp", a.port_file)
while True:
    s, _ = ls.accept()
    threading.Thread(target=serve, args=(s,), daemon=True).start()
