#!/usr/bin/env python3
"""cut_proxy.py — a TCP proxy that stands for a peer that dies mid-transfer
(t/artifact_peers.sh): it forwards connections on 127.0.0.1:PORT (written
to --port-file) to --target HOST:PORT both ways, counting the bytes sent
back to its clients once --arm-file exists. Once that count reaches --pause-after, it forwards
nothing more, creates --paused-file and waits for --go-file to appear;
then it cuts every connection (RST) and refuses new ones: whatever the
client had asked for arrives truncated, as from a node that died.
"""
import argparse
import os
import select
import socket
import struct
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--target", required=True)
ap.add_argument("--port-file", required=True)
ap.add_argument("--pause-after", type=int, required=True)
ap.add_argument("--paused-file", required=True)
ap.add_argument("--go-file", required=True)
ap.add_argument("--arm-file", required=True)
a = ap.parse_args()
th, tp = a.target.rsplit(":", 1)

lock = threading.Lock()
sent = 0
paused = threading.Event()
conns = []


def cut(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    except OSError:
        pass


def pump(c):
    global sent
    try:
        u = socket.create_connection((th, int(tp)))
    except OSError:
        cut(c)
        return
    with lock:
        conns.extend([c, u])
    live = [c, u]   # a side that said EOF is half-closed towards the other
    while not paused.is_set() and live:
        r, _, _ = select.select(live, [], [], 0.1)
        for s in r:
            if paused.is_set():
                break
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            other = c if s is u else u
            if not data:
                live.remove(s)
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            if s is u and os.path.exists(a.arm_file):
                with lock:
                    room = a.pause_after - sent
                    data = data[:max(room, 0)]
                    sent += len(data)
                    if sent >= a.pause_after:
                        paused.set()
            try:
                if data:
                    other.sendall(data)
            except OSError:
                live = []
                break
    if not paused.is_set():
        c.close()
        u.close()


def watch():
    paused.wait()
    open(a.paused_file, "w").write("%d\n" % sent)
    while not os.path.exists(a.go_file):
        time.sleep(0.05)
    with lock:
        for s in conns:
            cut(s)
    cut(ls)   # a dead node: refused from now on
    os._exit(0)


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
with open(a.port_file + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(a.port_file + ".tmp", a.port_file)
threading.Thread(target=watch, daemon=True).start()
while True:
    try:
        c, _ = ls.accept()
    except OSError:
        break
    if paused.is_set():
        cut(c)
        continue
    threading.Thread(target=pump, args=(c,), daemon=True).start()
