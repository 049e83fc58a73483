#!/usr/bin/env python3
"""odd_replica.py — a model server for t/gateway_upstream.sh that answers
the way real servers sometimes do, chosen per request by the JSON body's
"mode" (the replica contract: listens on 127.0.0.1:$PORT, GET /health):

  ok            200, Content-Length, kept alive
  chunked       200, Transfer-Encoding: chunked, several chunks
  close         200, no length: the body ends when the connection closes
  drop          200 with a length, kept alive by its headers, then the
                connection is closed at once (the gateway's kept-alive copy
                is stale: the next request on it must be retried)
  big           200, "size" bytes (a repeating pattern), Content-Length
  malformed     a status line that is not HTTP
  reset         the connection is closed without a byte of answer
  hang          nothing, until the client gives up
  half          a head promising 1000 bytes, 10 of them, then the close
  headers       200 with extra headers: X-Odd (passed on), Connection-ish
                ones (dropped), a Set-Cookie of "cookie" bytes (2 KiB)
Every answer carries X-Mode: <mode>. GET /stats tells reuse from
reconnecting: "connections" counts the connections that carried at least
one request other than /health and /stats (the gateway's), "accepted" all
of them (the agent's health probes open their own).
"""
import json
import os
import socket
import sys
import threading

CONNS = 0
USED = 0
LOCK = threading.Lock()


def read_request(f):
    line = f.readline()
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, v = h.decode("latin-1").split(":", 1)
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    body = f.read(n) if n else b""
    return method, target, headers, body


def send(c, status, body, extra=b"", ctype=b"application/json"):
    c.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype +
              b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra +
              b"\r\n" + body)


def serve(c):
    global USED
    f = c.makefile("rb")
    counted = False
    try:
        while True:
            rq = read_request(f)
            if rq is None:
                return
            method, target, headers, body = rq
            if method == "GET" and target == "/health":
                send(c, b"200 OK", b'{"ok":true}')
                continue
            if method == "GET" and target == "/stats":
                with LOCK:
                    st = {"connections": USED, "accepted": CONNS}
                send(c, b"200 OK", json.dumps(st).encode())
                continue
            if not counted:
                counted = True
                with LOCK:
                    USED += 1
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                req = {}
            mode = req.get("mode", "ok")
            tag = b"X-Mode: " + mode.encode() + b"\r\n"
            if mode == "ok":
                send(c, b"200 OK", json.dumps({"mode": mode, "echo": req}).encode(), tag)
            elif mode == "chunked":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + tag +
                          b"Transfer-Encoding: chunked\r\n\r\n")
                for part in (b"alpha ", b"beta ", b"gamma"):
                    c.sendall(b"%x\r\n%s\r\n" % (len(part), part))
                c.sendall(b"0\r\n\r\n")
            elif mode == "close":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + tag +
                          b"Connection: close\r\n\r\nuntil the end")
                return
            elif mode == "drop":
                send(c, b"200 OK", b'{"mode":"drop"}', tag)
                return
            elif mode == "big":
                size = int(req.get("size", 0))
                pat = b"0123456789abcdef"
                data = (pat * (size // len(pat) + 1))[:size]
                send(c, b"200 OK", data, tag, b"application/octet-stream")
            elif mode == "malformed":
                c.sendall(b"HTTP/1.1 2xx What\r\n\r\n")
                return
            elif mode == "reset":
                return
            elif mode == "hang":
                f.read()   # until the client closes
                return
            elif mode == "half":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n" + tag + b"\r\n0123456789")
                return
            elif mode == "headers":
                cookie = b"Set-Cookie: c=" + b"x" * int(req.get("cookie", 2048)) + b"\r\n"
                send(c, b"200 OK", b'{"mode":"headers"}',
                     tag + b"X-Odd: yes\r\nKeep-Alive: timeout=5\r\nProxy-Connection: x\r\n" + cookie)
            else:
                send(c, b"400 Bad Request", b'{"error":"unknown mode"}', tag)
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        c.close()


def main():
    global CONNS
    port = int(os.environ.get("PORT", "0"))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    print("odd_replica listening on", s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        with LOCK:
            CONNS += 1
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
