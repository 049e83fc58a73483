#!/usr/bin/env python3
"""oci_double.py — a test double of the OCI Core Services API (20160918)
compute instances, for t/oracle.sh (no OCI emulator exists). Python stdlib
HTTP server plus python3-cryptography (Debian) to verify request signatures.

  serve PORT DIR
      Serve on 127.0.0.1:PORT. DIR/config.json (read at every request):
        {"tenancy": OCID, "user": OCID, "fingerprint": "aa:bb:...",
         "public_key": "DIR/pub.pem", "compartment": OCID,
         "ads": ["Uocm:PHX-AD-1", ...], "shapes": ["VM.GPU.A10.1", ...],
         "images": [OCID], "subnets": [OCID], "provision_ms": 300,
         "terminate_ms": 300, "terminated_keep_s": 30,
         "boot": {"dir": D, "env": {NAME: VALUE}}}
      DIR/faults.json (read at every request): a list of rules
        {"call": "launch"|"terminate"|"list", "ad": AD, "shape": S,
         "preemptible": BOOL, "nodepool": NP, "error": E, "times": N}
      (every given field must match; "times" counts down, absent: always)
      where E is one of
        capacity     500 InternalError "Out of host capacity."
        limit        400 LimitExceeded (the tenancy's service limit)
        quota        400 QuotaExceeded (a compartment quota)
        throttle     429 TooManyRequests
        lost_answer  the launch is made, its answer is a 503
        auth         401 NotAuthenticated
      Every request is appended to DIR/calls.log as one JSON line (call,
      status, error injected, ad, shape, preemptible, nodepool, retry token,
      page, replayed).

What it checks, as the service does for what drover sends:
  every request: an Authorization header "Signature version="1",
    keyId="TENANCY/USER/FINGERPRINT",algorithm="rsa-sha256",headers=...,
    signature=..." whose keyId is the configured key's; headers naming at
    least date (or x-date), (request-target) and host, and for POST/PUT
    also content-length, content-type and x-content-sha256; the signing
    string rebuilt from the request as received, verified (RSA PKCS#1 v1.5,
    SHA-256) with the public key; x-content-sha256 the body's and
    content-length its length; the date within 5 minutes of the clock.
    Otherwise 401 NotAuthenticated, as OCI answers.
  LaunchInstance (POST /20160918/instances): only known fields of the right
    JSON types, at every depth below (400 InvalidParameter otherwise);
    availabilityDomain, shape, image and subnet exist (400 / 404
    NotAuthorizedOrNotFound); compartmentId is the configured one;
    shapeConfig only for .Flex shapes; preemptibleInstanceConfig needs
    preemptionAction.type TERMINATE and is refused on bare-metal (BM.)
    shapes; metadata.user_data strict base64; freeformTags strings;
    opc-retry-token (<= 64 chars): the same token with the same body
    returns the first instance and makes nothing, with another body 409
    Conflict. Instances go PROVISIONING -> RUNNING after provision_ms; at
    RUNNING the double boots the machine: it runs the decoded user_data
    with sh in a session of its own, with DROVER_AGENT_DIR=boot.dir/ID/agent
    and boot.env, logging to boot.dir/ID/agent.log (so real agents join).
  TerminateInstance (DELETE /20160918/instances/ID): TERMINATING, then after
    terminate_ms TERMINATED (its boot process group is killed); listed as
    TERMINATED for terminated_keep_s, as OCI does. Unknown ids 404.
  ListInstances (GET /20160918/instances?compartmentId=C&limit=N&page=P):
    compartmentId required; limit 1..1000; page only as issued in
    opc-next-page; a JSON array; no tag filter (the client filters).
  Test control (no auth): GET /_test/instances (user_data decoded), POST
    /_test/create {ad, tags}, POST /_test/remove {id}.
"""
import base64
import binascii
import email.utils
import hashlib
import http.server
import json
import os
import re
import signal
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

LOCK = threading.Lock()
DIR = None
INSTANCES = {}       # id -> instance dict
ORDER = []           # ids in creation order
TOKENS = {}          # retry token -> (body sha, instance id)
PAGES = {}           # issued page tokens -> (compartment, offset)
BOOTED = {}          # id -> Popen
SKEW_S = 300
AUTH_RE = re.compile(r'(\w+)="([^"]*)"')


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
        if r.get("call", "launch") != call:
            continue
        if any(k in r and r[k] != v for k, v in attrs.items()):
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


def err(status, code, message):
    return status, {"code": code, "message": message}


class Bad(Exception):
    pass


def expect(v, t, path):
    if not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
        raise Bad(f"{path}: expected {t.__name__}, got {json.dumps(v)}")


def only(obj, fields, path):
    expect(obj, dict, path)
    for k in obj:
        if k not in fields:
            raise Bad(f"Unrecognized field '{path}.{k}'")


def check_launch(b, c):
    only(b, {"availabilityDomain", "compartmentId", "shape", "shapeConfig", "displayName",
             "sourceDetails", "createVnicDetails", "metadata", "freeformTags",
             "preemptibleInstanceConfig"}, "launchInstanceDetails")
    for k in ("availabilityDomain", "compartmentId", "shape"):
        expect(b.get(k), str, k)
    if "displayName" in b:
        expect(b["displayName"], str, "displayName")
    if b["availabilityDomain"] not in c["ads"]:
        raise Bad(f"Invalid availabilityDomain '{b['availabilityDomain']}'")
    if b["shape"] not in c["shapes"]:
        raise Bad(f"Invalid shape '{b['shape']}'")
    if "shapeConfig" in b:
        only(b["shapeConfig"], {"ocpus", "memoryInGBs"}, "shapeConfig")
        if ".Flex" not in b["shape"]:
            raise Bad(f"shapeConfig is only for flexible shapes, not {b['shape']}")
        for k, v in b["shapeConfig"].items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise Bad(f"shapeConfig.{k}: expected a number")
    sd = b.get("sourceDetails")
    only(sd, {"sourceType", "imageId", "bootVolumeSizeInGBs"}, "sourceDetails")
    if sd.get("sourceType") != "image":
        raise Bad("sourceDetails.sourceType must be 'image'")
    expect(sd.get("imageId"), str, "sourceDetails.imageId")
    vn = b.get("createVnicDetails")
    only(vn, {"subnetId", "displayName", "assignPublicIp", "hostnameLabel", "nsgIds"},
         "createVnicDetails")
    if "nsgIds" in vn:
        expect(vn["nsgIds"], list, "createVnicDetails.nsgIds")
        for j, g in enumerate(vn["nsgIds"]):
            expect(g, str, f"createVnicDetails.nsgIds[{j}]")
            if not g.startswith("ocid1.networksecuritygroup."):
                raise Bad(f"createVnicDetails.nsgIds[{j}]: not a network security group OCID")
    expect(vn.get("subnetId"), str, "createVnicDetails.subnetId")
    if "assignPublicIp" in vn:
        expect(vn["assignPublicIp"], bool, "createVnicDetails.assignPublicIp")
    if "displayName" in vn:
        expect(vn["displayName"], str, "createVnicDetails.displayName")
    md = b.get("metadata", {})
    only(md, {"user_data", "ssh_authorized_keys"}, "metadata")
    for k, v in md.items():
        expect(v, str, f"metadata.{k}")
    if "user_data" in md:
        try:
            base64.b64decode(md["user_data"], validate=True)
        except (binascii.Error, ValueError):
            raise Bad("metadata.user_data is not valid base64")
    tags = b.get("freeformTags", {})
    expect(tags, dict, "freeformTags")
    for k, v in tags.items():
        expect(v, str, f"freeformTags.{k}")
        if not k or len(k) > 100 or " " in k or "." in k:
            raise Bad(f"Invalid freeform tag key '{k}'")
    pic = b.get("preemptibleInstanceConfig")
    if pic is not None:
        only(pic, {"preemptionAction"}, "preemptibleInstanceConfig")
        pa = pic.get("preemptionAction")
        only(pa, {"type", "preserveBootVolume"}, "preemptibleInstanceConfig.preemptionAction")
        if pa.get("type") != "TERMINATE":
            raise Bad("preemptionAction.type must be TERMINATE")
        if "preserveBootVolume" in pa:
            expect(pa["preserveBootVolume"], bool, "preemptionAction.preserveBootVolume")
        if b["shape"].startswith("BM."):
            raise Bad(f"Preemptible instances are not supported for shape {b['shape']}")


def boot(i, c):
    """The machine starts: run its user_data as the boot script."""
    bc = c.get("boot")
    ud = i.get("metadata", {}).get("user_data")
    if not bc or not ud or i["id"] in BOOTED:
        return
    script = base64.b64decode(ud).decode()
    if "drover-agent" not in script:
        return
    d = os.path.join(bc["dir"], i["id"][-12:])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "user_data"), "w") as f:
        f.write(script)
    env = dict(os.environ, DROVER_AGENT_DIR=os.path.join(d, "agent"), **bc.get("env", {}))
    out = open(os.path.join(d, "agent.log"), "w")
    BOOTED[i["id"]] = subprocess.Popen(["sh", os.path.join(d, "user_data")], env=env,
                                       stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)


def halt(iid):
    p = BOOTED.pop(iid, None)
    if p and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def advance(i, c):
    now = time.time()
    if i["lifecycleState"] == "PROVISIONING" and now >= i["_running_at"]:
        i["lifecycleState"] = "RUNNING"
        boot(i, c)
    if i["lifecycleState"] == "TERMINATING" and now >= i["_terminated_at"]:
        i["lifecycleState"] = "TERMINATED"
        halt(i["id"])


def view(i):
    return {k: v for k, v in i.items() if not k.startswith("_") and k != "metadata"} | {
        "metadata": {k: v for k, v in i.get("metadata", {}).items()}}


def sweep(c):
    keep = c.get("terminated_keep_s", 30)
    for iid in list(ORDER):
        i = INSTANCES[iid]
        advance(i, c)
        if i["lifecycleState"] == "TERMINATED" and time.time() - i["_terminated_at"] > keep:
            INSTANCES.pop(iid)
            ORDER.remove(iid)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, obj, headers=None):
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("opc-request-id", uuid.uuid4().hex.upper())
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.route("POST")

    def do_GET(self):
        self.route("GET")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PUT(self):
        self.route("PUT")

    def route(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        u = urllib.parse.urlsplit(self.path)
        with LOCK:
            c = cfg()
            if u.path.startswith("/_test/"):
                code, obj = self.control(method, u.path, raw, c)
                return self.send(code, obj)
            entry = {"method": method, "path": u.path}
            hdrs = {}
            bad = self.verify(method, raw, c)
            if bad:
                entry.update(call="unauthenticated", why=bad)
                code, obj = err(401, "NotAuthenticated", "The required information to complete "
                                "authentication was not provided or was incorrect.")
            else:
                code, obj, hdrs = self.api(method, u, raw, c, entry)
            entry["status"] = code
            log(entry)
            self.send(code, obj, hdrs)

    # --- signature --------------------------------------------------------
    def verify(self, method, raw, c):
        a = self.headers.get("Authorization") or ""
        if not a.startswith("Signature "):
            return "no Signature authorization"
        p = dict(AUTH_RE.findall(a))
        if p.get("version") != "1" or p.get("algorithm") != "rsa-sha256":
            return "version/algorithm"
        if p.get("keyId") != f"{c['tenancy']}/{c['user']}/{c['fingerprint']}":
            return "unknown keyId"
        names = p.get("headers", "date").split(" ")
        need = {"(request-target)", "host"}
        if method in ("POST", "PUT"):
            need |= {"content-length", "content-type", "x-content-sha256"}
        if not need <= set(names) or not ({"date", "x-date"} & set(names)):
            return "headers not signed: " + " ".join(sorted(need - set(names)))
        lines = []
        for h in names:
            if h == "(request-target)":
                lines.append(f"(request-target): {method.lower()} {self.path}")
            else:
                v = self.headers.get(h)
                if v is None:
                    return f"signed header {h} missing"
                lines.append(f"{h}: {v}")
        try:
            pub = serialization.load_pem_public_key(open(c["public_key"], "rb").read())
            pub.verify(base64.b64decode(p.get("signature", "")), "\n".join(lines).encode(),
                       padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError, binascii.Error):
            return "bad signature"
        d = self.headers.get("x-date") or self.headers.get("date")
        try:
            t = email.utils.parsedate_to_datetime(d).timestamp()
        except (TypeError, ValueError):
            return "bad date"
        if abs(time.time() - t) > SKEW_S:
            return "date skew"
        if method in ("POST", "PUT"):
            if self.headers.get("x-content-sha256") != base64.b64encode(
                    hashlib.sha256(raw).digest()).decode():
                return "x-content-sha256"
            if self.headers.get("content-length") != str(len(raw)):
                return "content-length"
        return None

    # --- API --------------------------------------------------------------
    def api(self, method, u, raw, c, entry):
        q = urllib.parse.parse_qs(u.query)
        if method == "POST" and u.path == "/20160918/instances":
            return self.launch(raw, c, entry)
        if method == "GET" and u.path == "/20160918/instances":
            return self.list(q, c, entry)
        m = re.match(r"^/20160918/instances/([^/]+)$", u.path)
        if m and method == "DELETE":
            return self.terminate(urllib.parse.unquote(m.group(1)), q, c, entry)
        return (*err(404, "NotAuthorizedOrNotFound", f"{method} {u.path}"), {})

    def launch(self, raw, c, entry):
        entry["call"] = "launch"
        try:
            b = json.loads(raw)
            expect(b, dict, "launchInstanceDetails")
        except ValueError:
            return (*err(400, "InvalidParameter", "The body is not JSON"), {})
        tags = b.get("freeformTags") if isinstance(b.get("freeformTags"), dict) else {}
        pre = "preemptibleInstanceConfig" in b
        entry.update(ad=b.get("availabilityDomain"), shape=b.get("shape"), preemptible=pre,
                     nodepool=tags.get("drover-nodepool"), tags=tags,
                     shape_config=b.get("shapeConfig"),
                     nsg_ids=(b.get("createVnicDetails") or {}).get("nsgIds"))
        tok = self.headers.get("opc-retry-token")
        entry["retry_token"] = tok
        try:
            check_launch(b, c)
        except Bad as e:
            return (*err(400, "InvalidParameter", str(e)), {})
        if b["compartmentId"] != c["compartment"]:
            return (*err(404, "NotAuthorizedOrNotFound", "Authorization failed or requested "
                         "resource not found."), {})
        if b["sourceDetails"]["imageId"] not in c["images"]:
            return (*err(404, "NotAuthorizedOrNotFound", "Image not found"), {})
        if b["createVnicDetails"]["subnetId"] not in c["subnets"]:
            return (*err(404, "NotAuthorizedOrNotFound", "Subnet not found"), {})
        if tok is not None and (not tok or len(tok) > 64):
            return (*err(400, "InvalidParameter", "opc-retry-token: at most 64 characters"), {})
        sha = hashlib.sha256(raw).hexdigest()
        if tok in TOKENS:
            first_sha, iid = TOKENS[tok]
            if first_sha != sha:
                return (*err(409, "Conflict", "The retry token was used with another "
                             "request"), {})
            entry["replayed"] = True
            return 200, view(INSTANCES[iid]), {"etag": iid}
        inj = fault("launch", ad=b["availabilityDomain"], shape=b["shape"], preemptible=pre,
                    nodepool=tags.get("drover-nodepool"))
        entry["injected"] = inj
        if inj == "capacity":
            return (*err(500, "InternalError", "Out of host capacity."), {})
        if inj == "limit":
            return (*err(400, "LimitExceeded", f"The following service limits were exceeded: "
                         f"{b['shape'].lower()}-count"), {})
        if inj == "quota":
            return (*err(400, "QuotaExceeded", "Compartment quota exceeded"), {})
        if inj == "throttle":
            return (*err(429, "TooManyRequests", "Too many requests for the tenant"), {})
        if inj == "auth":
            return (*err(401, "NotAuthenticated", "The required information to complete "
                         "authentication was not provided or was incorrect."), {})
        iid = "ocid1.instance.oc1.phx." + uuid.uuid4().hex + uuid.uuid4().hex[:28]
        now = time.time()
        i = {"id": iid, "compartmentId": b["compartmentId"],
             "availabilityDomain": b["availabilityDomain"], "shape": b["shape"],
             "displayName": b.get("displayName", iid), "lifecycleState": "PROVISIONING",
             "freeformTags": tags, "metadata": b.get("metadata", {}),
             "imageId": b["sourceDetails"]["imageId"], "region": "phx",
             "timeCreated": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now)),
             "_running_at": now + c.get("provision_ms", 300) / 1000.0, "_terminated_at": 0}
        if "shapeConfig" in b:
            i["shapeConfig"] = b["shapeConfig"]
        if pre:
            i["preemptibleInstanceConfig"] = b["preemptibleInstanceConfig"]
        INSTANCES[iid] = i
        ORDER.append(iid)
        if tok:
            TOKENS[tok] = (sha, iid)
        entry["id"] = iid
        if inj == "lost_answer":
            return (*err(503, "ServiceUnavailable", "lost"), {})
        return 200, view(i), {"etag": iid}

    def terminate(self, iid, q, c, entry):
        entry.update(call="terminate", id=iid)
        inj = fault("terminate")
        entry["injected"] = inj
        if inj == "throttle":
            return (*err(429, "TooManyRequests", "Too many requests"), {})
        i = INSTANCES.get(iid)
        if not i or i["compartmentId"] != c["compartment"]:
            return (*err(404, "NotAuthorizedOrNotFound", "Authorization failed or requested "
                         "resource not found."), {})
        pbv = q.get("preserveBootVolume", ["false"])[0]
        if pbv not in ("true", "false"):
            return (*err(400, "InvalidParameter", "preserveBootVolume"), {})
        if i["lifecycleState"] not in ("TERMINATING", "TERMINATED"):
            i["lifecycleState"] = "TERMINATING"
            i["_terminated_at"] = time.time() + c.get("terminate_ms", 300) / 1000.0
        return 204, None, {}

    def list(self, q, c, entry):
        entry["call"] = "list"
        comp = (q.get("compartmentId") or [None])[0]
        if not comp:
            return (*err(400, "MissingParameter", "compartmentId is required"), {})
        if comp != c["compartment"]:
            return (*err(404, "NotAuthorizedOrNotFound", "compartment"), {})
        try:
            limit = int((q.get("limit") or ["100"])[0])
        except ValueError:
            return (*err(400, "InvalidParameter", "limit"), {})
        if not 1 <= limit <= 1000:
            return (*err(400, "InvalidParameter", "limit must be 1..1000"), {})
        page = (q.get("page") or [""])[0]
        entry["page"] = page
        start = 0
        if page:
            if page not in PAGES or PAGES[page][0] != comp:
                return (*err(400, "InvalidParameter", "Invalid page token"), {})
            start = PAGES[page][1]
        sweep(c)
        ids = [x for x in ORDER if INSTANCES[x]["compartmentId"] == comp]
        out = [view(INSTANCES[x]) for x in ids[start:start + limit]]
        hdrs = {}
        if start + limit < len(ids):
            tok = uuid.uuid4().hex
            PAGES[tok] = (comp, start + limit)
            hdrs["opc-next-page"] = tok
        return 200, out, hdrs

    # --- test control -----------------------------------------------------
    def control(self, method, path, raw, c):
        if path == "/_test/instances":
            sweep(c)
            out = []
            for iid in ORDER:
                i = dict(view(INSTANCES[iid]))
                ud = i.get("metadata", {}).get("user_data")
                i["user_data"] = base64.b64decode(ud).decode() if ud else ""
                out.append(i)
            return 200, out
        b = json.loads(raw or b"{}")
        if path == "/_test/create":
            iid = "ocid1.instance.oc1.phx.test" + uuid.uuid4().hex
            INSTANCES[iid] = {"id": iid, "compartmentId": c["compartment"],
                              "availabilityDomain": b.get("ad", c["ads"][0]),
                              "shape": c["shapes"][0], "lifecycleState": "RUNNING",
                              "freeformTags": b.get("tags", {}), "metadata": {},
                              "_running_at": 0, "_terminated_at": 0}
            ORDER.append(iid)
            return 200, {"id": iid}
        if path == "/_test/remove":
            if b["id"] in INSTANCES:
                INSTANCES.pop(b["id"])
                ORDER.remove(b["id"])
                halt(b["id"])
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

    def stop(*_):
        for iid in list(BOOTED):
            halt(iid)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    srv = Server(("127.0.0.1", int(sys.argv[2])), Handler)
    # instances move through their states over time, listed or not (boots)
    def ticker():
        while True:
            time.sleep(0.1)
            with LOCK:
                try:
                    sweep(cfg())
                except (OSError, ValueError):
                    pass
    threading.Thread(target=ticker, daemon=True).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
