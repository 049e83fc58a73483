#!/usr/bin/env python3
"""vultr_double.py — a test double of the Vultr API v2 for t/vultr.sh (no
Vultr emulator exists). Python stdlib only.

  serve PORT DIR
      Serve on 127.0.0.1:PORT. DIR/config.json (read at every request):
        {"api_key": "K", "regions": {"ewr": ["vcg-a16-2c-8g-2vram", ...]},
         "rate_per_s": 20, "boot_delay_ms": 400}
      DIR/faults.json: a list of rules {"call": "create"|"availability"|"list"
        |"delete", "plan": P, "error": "rate_limited"|"unavailable",
        "times": N} ("unavailable": the region's availability omits the plan)
      Every request is appended to DIR/calls.log as one JSON line.

What it checks, as the API does for what drover sends:
  Authorization: Bearer with the configured key (401 "Invalid API token.");
  a rate: more than rate_per_s requests in a second are answered 429 (and
  injected 429s); POST /v2/instances: a JSON object with only known fields
  of the right types (400 otherwise); region known; plan offered and
  available in the region (400 "Plan is not available in the selected
  region"); exactly one of os_id, snapshot_id, image_id; user_data strict
  base64; tags an array of strings; label/hostname strings. Instances go
  pending -> active after boot_delay_ms. DELETE /v2/instances/{id} (404 for
  an unknown id). GET /v2/instances: tag filter (exact), per_page 1..500,
  cursor only as issued for the same tag (meta.links.next). GET
  /v2/regions/{id}/availability.
  Test control (no auth): GET /_test/instances, POST /_test/create
  {region, tags}, POST /_test/remove {id}.
"""
import base64
import binascii
import http.server
import json
import os
import re
import socketserver
import sys
import threading
import time
import urllib.parse
import uuid

LOCK = threading.Lock()
DIR = None
INSTANCES = {}        # id -> instance
ORDER = []            # ids in creation order
HITS = []             # request times (rate)

CREATE_FIELDS = {"region": str, "plan": str, "os_id": int, "snapshot_id": str, "image_id": str,
                 "label": str, "hostname": str, "tags": list, "user_data": str,
                 "attach_vpc": list, "firewall_group_id": str, "enable_ipv6": bool,
                 "backups": str, "sshkey_id": list, "script_id": str}


def cfg():
    with open(os.path.join(DIR, "config.json")) as f:
        return json.load(f)


def log(entry):
    with open(os.path.join(DIR, "calls.log"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def fault(call, **attrs):
    path = os.path.join(DIR, "faults.json")
    try:
        with open(path) as f:
            rules = json.load(f)
    except (OSError, ValueError):
        return None
    hit = None
    for r in rules:
        if r.get("call") != call or any(k in r and r[k] != v for k, v in attrs.items()):
            continue
        if "times" in r:
            if r["times"] <= 0:
                continue
            r["times"] -= 1
        hit = r["error"]
        break
    if hit:
        with open(path + ".tmp", "w") as f:
            json.dump(rules, f)
        os.replace(path + ".tmp", path)
    return hit


def err(code, msg):
    return code, {"error": msg, "status": code}


def view(i, c):
    if i["status"] == "pending" and time.time() >= i["_active_at"]:
        i["status"] = "active"
        i["server_status"] = "ok"
    return {k: v for k, v in i.items() if not k.startswith("_")}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj):
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    def route(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        entry = {"method": method, "path": u.path}
        try:
            with LOCK:
                code, obj = self.dispatch(method, u.path, q, raw, entry)
        except Exception as e:
            code, obj = 500, {"error": f"double: {e!r}", "status": 500}
        entry["status"] = code
        if not u.path.startswith("/_test/"):
            log(entry)
        self.reply(code, obj)

    def dispatch(self, method, path, q, raw, entry):
        c = cfg()
        if path.startswith("/_test/"):
            return self.control(path, raw, c)
        if self.headers.get("Authorization") != "Bearer " + c["api_key"]:
            entry["call"] = "unauthorized"
            return err(401, "Invalid API token.")
        now = time.time()
        HITS[:] = [t for t in HITS if now - t < 1.0]
        HITS.append(now)
        if len(HITS) > c.get("rate_per_s", 20):
            entry["call"] = "rate_limited"
            return err(429, "Rate limit exceeded.")
        m = re.match(r"^/v2/regions/([^/]+)/availability$", path)
        if m and method == "GET":
            entry.update({"call": "availability", "region": m.group(1)})
            if m.group(1) not in c["regions"]:
                return err(404, "Invalid region.")
            plans = [p for p in c["regions"][m.group(1)]
                     if fault("availability", plan=p) != "unavailable"]
            return 200, {"available_plans": plans}
        if path == "/v2/instances" and method == "POST":
            return self.create(raw, entry, c)
        if path == "/v2/instances" and method == "GET":
            return self.list(q, entry)
        m = re.match(r"^/v2/instances/([^/]+)$", path)
        if m and method == "DELETE":
            entry.update({"call": "delete", "id": m.group(1)})
            if m.group(1) not in INSTANCES:
                return err(404, "Invalid instance-id.")
            INSTANCES.pop(m.group(1))
            ORDER.remove(m.group(1))
            return 204, None
        if m and method == "GET":
            i = INSTANCES.get(m.group(1))
            return (200, {"instance": view(i, c)}) if i else err(404, "Invalid instance-id.")
        return err(404, "Not found.")

    def create(self, raw, entry, c):
        entry["call"] = "create"
        try:
            b = json.loads(raw)
        except ValueError:
            return err(400, "Invalid JSON.")
        if not isinstance(b, dict):
            return err(400, "Invalid JSON.")
        for k, v in b.items():
            t = CREATE_FIELDS.get(k)
            if t is None:
                return err(400, f"Invalid field: {k}")
            if not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
                return err(400, f"Invalid type for field {k}")
        entry.update({"plan": b.get("plan"), "region": b.get("region"), "tags": b.get("tags"),
                      "label": b.get("label")})
        inj = fault("create", plan=b.get("plan"))
        if inj == "rate_limited":
            entry["injected"] = inj
            return err(429, "Rate limit exceeded.")
        if b.get("region") not in c["regions"]:
            return err(400, "Invalid region.")
        if b.get("plan") not in c["regions"][b["region"]]:
            return err(400, "Plan is not available in the selected region.")
        if sum(k in b for k in ("os_id", "snapshot_id", "image_id")) != 1:
            return err(400, "Exactly one of os_id, snapshot_id, image_id is required.")
        if any(not isinstance(t, str) for t in b.get("tags", [])):
            return err(400, "Invalid tags.")
        ud = ""
        if "user_data" in b:
            try:
                ud = base64.b64decode(b["user_data"], validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return err(400, "Invalid user_data: must be base64.")
        iid = str(uuid.uuid4())
        i = {"id": iid, "region": b["region"], "plan": b["plan"], "label": b.get("label", ""),
             "hostname": b.get("hostname", ""), "tags": b.get("tags", []), "status": "pending",
             "power_status": "running", "server_status": "none",
             "date_created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
             "_user_data": ud, "_active_at": time.time() + c.get("boot_delay_ms", 400) / 1000.0}
        INSTANCES[iid] = i
        ORDER.append(iid)
        entry["id"] = iid
        return 202, {"instance": view(i, c)}

    def list(self, q, entry):
        entry["call"] = "list"
        tag = (q.get("tag") or [""])[0]
        entry["tag"] = tag
        try:
            pp = int((q.get("per_page") or ["100"])[0])
        except ValueError:
            return err(400, "Invalid per_page.")
        if pp < 1 or pp > 500:
            return err(400, "Invalid per_page: 1..500.")
        cur = (q.get("cursor") or [""])[0]
        entry["cursor"] = cur
        start = 0
        if cur:
            try:
                t = json.loads(base64.urlsafe_b64decode(cur + "=" * (-len(cur) % 4)))
                start = int(t["o"])
                if t["t"] != tag:
                    raise ValueError
            except (ValueError, KeyError, TypeError, binascii.Error):
                return err(400, "Invalid cursor.")
        c = cfg()
        ids = [i for i in ORDER if not tag or tag in INSTANCES[i]["tags"]]
        page = [view(INSTANCES[i], c) for i in ids[start:start + pp]]
        nxt = ""
        if start + pp < len(ids):
            nxt = base64.urlsafe_b64encode(json.dumps({"o": start + pp, "t": tag}).encode()).decode().rstrip("=")
        return 200, {"instances": page, "meta": {"total": len(ids), "links": {"next": nxt, "prev": ""}}}

    def control(self, path, raw, c):
        if path == "/_test/instances":
            return 200, [dict(view(INSTANCES[i], c), user_data=INSTANCES[i]["_user_data"])
                         for i in ORDER]
        b = json.loads(raw or b"{}")
        if path == "/_test/create":
            iid = str(uuid.uuid4())
            INSTANCES[iid] = {"id": iid, "region": b["region"], "plan": "vcg-a16-2c-8g-2vram",
                              "tags": b.get("tags", []), "status": "active",
                              "power_status": "running", "_user_data": "", "_active_at": 0}
            ORDER.append(iid)
            return 200, {"id": iid}
        if path == "/_test/remove":
            if b["id"] in INSTANCES:
                INSTANCES.pop(b["id"])
                ORDER.remove(b["id"])
            return 200, {}
        return 404, {}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global DIR
    if len(sys.argv) != 4 or sys.argv[1] != "serve":
        sys.exit(__doc__)
    DIR = sys.argv[3]
    Server(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()


if __name__ == "__main__":
    main()
