#!/usr/bin/env python3
"""http_echo.py — a raw HTTP/1.1 server for t/http_tool.sh, which sends the
same requests through t/http_tool and curl and compares what each got.
Answers are written byte for byte (no Date header), by path:
  /echo...   200, body: the request as JSON (method, target, the headers but
             User-Agent, body) with Content-Length
  /chunked   200, a chunked body of three chunks
  /nocontent 204
  /continue  a 100 Continue, then 200 with a body
  /close     closes without an answer
  /eof       200 without Content-Length, the body ends at the close
  /slow      answers after 3 s
usage: http_echo.py PORTFILE  (binds 127.0.0.1:0, writes the port there)"""
import json
import socket
import sys
import threading
import time


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = [tuple(x.split(":", 1)) for x in lines[1:]]
    length = 0
    for name, value in headers:
        if name.lower() == "content-length":
            length = int(value)
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return method, target, headers, rest[:length]


def answer(conn, req):
    method, target, headers, body = req
    if target.startswith("/echo"):
        doc = json.dumps({"method": method, "target": target,
                          "headers": [[n, v.strip()] for n, v in headers if n.lower() != "user-agent"],
                          "body": body.decode("latin-1")}, sort_keys=True).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(doc) + doc)
    elif target == "/chunked":
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5\r\nhello\r\n1\r\n \r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n")
    elif target == "/nocontent":
        conn.sendall(b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n")
    elif target == "/continue":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
    elif target == "/close":
        pass
    elif target == "/eof":
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
    elif target == "/slow":
        time.sleep(3)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow")
    else:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


def serve(conn):
    try:
        req = read_request(conn)
        if req:
            answer(conn, req)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
