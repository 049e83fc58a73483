#!/usr/bin/env python3
"""gcp_double.py — a test double of Google's OAuth2 token endpoint and the
Compute Engine v1 API, for t/gcp.sh (no GCP emulator exists). Python
stdlib HTTP server plus python3-cryptography (Debian) for RS256.

  serve PORT DIR
      Serve on 127.0.0.1:PORT. DIR/config.json (read at every request):
        {"project": "P", "client_email": "E", "key_id": "K",
         "public_key": "DIR/pub.pem", "zones": ["us-central1-a", ...],
         "machine_types": ["g2-standard-4", ...], "token_ttl": 3600,
         "op_delay_ms": 400}
      DIR/faults.json (read at every request): a list of rules
        {"call": "insert"|"delete"|"list"|"token", "zone": Z,
         "provisioningModel": "SPOT"|"STANDARD", "machineType": T,
         "nodepool": NP, "name": INSTANCE (list), "error": E, "times": N}
      (every given field must match; "times" counts down, absent: always)
      where E is one of
        ZONE_RESOURCE_POOL_EXHAUSTED   the insert's operation ends DONE with it
        QUOTA_EXCEEDED                 ... with a regional GPU quota message
        QUOTA_EXCEEDED_ALL             ... naming GPUS_ALL_REGIONS
        rateLimitExceeded              HTTP 403 usageLimits/rateLimitExceeded
        lost_answer                    the insert is done, its answer is a 503
        forbidden                      HTTP 403 forbidden (a permission)
        invalid_grant                  token endpoint HTTP 400 invalid_grant
        omit                           (list) the instance is left out of the page
                                       that would show it: a listing that misses
                                       a live machine (lists are only eventually
                                       consistent; a page boundary moves under
                                       deletions)
      Every request is appended to DIR/calls.log as one JSON line (call, zone,
      name, request_id, status, error injected, machine type, provisioning
      model, labels, page token); every access token issued to DIR/tokens.log
      (so the test can check droverd never logs one).

What it checks, as the real services do for what drover sends:
  token endpoint (POST /token, RFC 7523 JWT bearer grant): form encoding;
    grant_type; a three-part JWT whose header says alg RS256 (and kid, when
    given, is the key's id); its RS256 signature verifies with the key's
    public half; iss is the service account; aud is this token URL; scope
    names compute or cloud-platform; iat no more than 5 min off the clock;
    exp after now and at most 1 h after iat. Otherwise 400 invalid_grant
    (or unsupported_grant_type / invalid_request) like Google.
  Compute API: a Bearer token issued here and not expired (401
    UNAUTHENTICATED otherwise); the project is the key's (403 forbidden);
    zones and machine types exist (404 notFound / 400 invalid);
    zoneOperations.get and .wait (POST; answers at DONE or its deadline);
    instances.insert: requestId is a UUID, a repeated requestId returns the
    first operation and makes nothing; the body has only known fields of
    the right JSON types (400 "Invalid JSON payload received. Unknown name"
    otherwise, at any depth checked below); name is RFC 1035 (<= 63); labels
    keys/values follow the label rules; machineType is zones/Z/machineTypes/T
    of the request's zone; exactly one boot disk with
    initializeParams.sourceImage; metadata items are {key, value} strings
    with unique keys; scheduling: provisioningModel STANDARD|SPOT,
    instanceTerminationAction only with SPOT, SPOT needs automaticRestart
    false, GPU machine types (a2, a3, g2) need onHostMaintenance TERMINATE;
    a name already in the zone is 409 alreadyExists. Operations finish
    (DONE) only after op_delay_ms; instances go PROVISIONING -> RUNNING, and
    on delete STOPPING -> gone. aggregatedList: filter must be
    `labels.KEY = "VALUE"` (400 otherwise), maxResults 0..500, pageToken
    only as issued for the same filter.
  Test control (no auth): GET /_test/instances, POST /_test/create
    {zone, name, labels}, POST /_test/remove {zone, name}.
"""
import base64
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

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

LOCK = threading.Lock()
DIR = None
PORT = 0
TOKENS = {}          # token -> expiry (epoch s)
INSTANCES = {}       # (zone, name) -> instance dict
OPS = {}             # (zone, op name) -> operation dict
REQUESTS = {}        # requestId -> (zone, op name)
NEXT_ID = [1000]
WAIT_CAP_S = 120.0
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VAL_RE = re.compile(r"^[a-z0-9_-]{0,63}$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
FILTER_RE = re.compile(r'^labels\.([a-z][a-z0-9_-]*)\s*=\s*"([^"]*)"$')


def cfg():
    with open(os.path.join(DIR, "config.json")) as f:
        return json.load(f)


def log(entry):
    with open(os.path.join(DIR, "calls.log"), "a") as f:
        f.write(json.dumps(entry) + "\n")


def fault(call, **attrs):
    """The error of the first rule matching call and attrs (counting down)."""
    path = os.path.join(DIR, "faults.json")
    try:
        with open(path) as f:
            rules = json.load(f)
    except (OSError, ValueError):
        return None
    hit = None
    for r in rules:
        if r.get("call", "insert") != call:
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


def b64url_dec(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000-00:00", time.gmtime())


def api_err(code, reason, message, status=None):
    e = {"code": code, "message": message,
         "errors": [{"message": message, "domain": "global", "reason": reason}]}
    if status:
        e["status"] = status
    return code, {"error": e}


class Bad(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.message = message


def expect(v, t, path):
    names = {dict: "object", list: "array", str: "string", bool: "boolean"}
    if not isinstance(v, t) or (t is not bool and isinstance(v, bool)):
        raise Bad(f"Invalid value at '{path}' ({names.get(t, t.__name__)}), {json.dumps(v)}")


def only(obj, fields, path):
    expect(obj, dict, path)
    for k in obj:
        if k not in fields:
            raise Bad(f"Invalid JSON payload received. Unknown name \"{k}\" at '{path}': "
                      "Cannot find field.")


GPU_FAMILIES = ("a2-", "a3-", "g2-")


def check_insert(body, zone, c):
    """Validate an instances.insert body like the API does; raises Bad."""
    only(body, {"name", "machineType", "labels", "metadata", "disks", "networkInterfaces",
                "scheduling", "tags", "description", "guestAccelerators", "serviceAccounts"},
         "instance")
    expect(body.get("name"), str, "instance.name")
    if not NAME_RE.match(body["name"]):
        raise Bad(f"Invalid value for field 'resource.name': '{body['name']}'. Must be a match "
                  "of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
    mt = body.get("machineType")
    expect(mt, str, "instance.machine_type")
    m = re.match(r"^(?:https://[^/]+/compute/v1/projects/[^/]+/)?zones/([^/]+)/machineTypes/([^/]+)$", mt)
    if not m or m.group(1) != zone:
        raise Bad(f"Invalid value for field 'resource.machineType': '{mt}'. Machine type "
                  f"must be in zone {zone}.")
    if m.group(2) not in c["machine_types"]:
        raise Bad(f"Invalid value for field 'resource.machineType': '{mt}'. Machine type "
                  f"with name '{m.group(2)}' does not exist in zone '{zone}'.")
    labels = body.get("labels", {})
    expect(labels, dict, "instance.labels")
    if len(labels) > 64:
        raise Bad("Too many labels (64 at most).")
    for k, v in labels.items():
        expect(v, str, f"instance.labels[{k}]")
        if not LABEL_KEY_RE.match(k) or not LABEL_VAL_RE.match(v):
            raise Bad(f"Invalid value for field 'resource.labels': label '{k}'='{v}'.")
    md = body.get("metadata", {})
    only(md, {"items", "fingerprint"}, "instance.metadata")
    items = md.get("items", [])
    expect(items, list, "instance.metadata.items")
    seen = set()
    for i, it in enumerate(items):
        only(it, {"key", "value"}, f"instance.metadata.items[{i}]")
        expect(it.get("key"), str, f"instance.metadata.items[{i}].key")
        expect(it.get("value"), str, f"instance.metadata.items[{i}].value")
        if it["key"] in seen:
            raise Bad(f"Invalid value for field 'resource.metadata': duplicate key '{it['key']}'")
        seen.add(it["key"])
    disks = body.get("disks")
    expect(disks, list, "instance.disks")
    boots = 0
    for i, d in enumerate(disks):
        only(d, {"boot", "autoDelete", "initializeParams", "type", "mode"}, f"instance.disks[{i}]")
        if "boot" in d:
            expect(d["boot"], bool, f"instance.disks[{i}].boot")
        if "autoDelete" in d:
            expect(d["autoDelete"], bool, f"instance.disks[{i}].auto_delete")
        ip = d.get("initializeParams", {})
        only(ip, {"sourceImage", "diskSizeGb", "diskType"}, f"instance.disks[{i}].initialize_params")
        if d.get("boot"):
            boots += 1
            expect(ip.get("sourceImage"), str, f"instance.disks[{i}].initialize_params.source_image")
    if boots != 1:
        raise Bad("Invalid value for field 'resource.disks': exactly one boot disk is required.")
    nics = body.get("networkInterfaces", [])
    expect(nics, list, "instance.network_interfaces")
    for i, n in enumerate(nics):
        only(n, {"network", "subnetwork", "accessConfigs"}, f"instance.network_interfaces[{i}]")
        for k in ("network", "subnetwork"):
            if k in n:
                expect(n[k], str, f"instance.network_interfaces[{i}].{k}")
        acs = n.get("accessConfigs", [])
        expect(acs, list, f"instance.network_interfaces[{i}].access_configs")
        for j, a in enumerate(acs):
            only(a, {"type", "name"}, f"instance.network_interfaces[{i}].access_configs[{j}]")
            if a.get("type") not in (None, "ONE_TO_ONE_NAT"):
                raise Bad(f"Invalid value for field 'resource.networkInterfaces[{i}]"
                          f".accessConfigs[{j}].type': '{a.get('type')}'")
    s = body.get("scheduling", {})
    only(s, {"provisioningModel", "instanceTerminationAction", "onHostMaintenance",
             "automaticRestart", "preemptible"}, "instance.scheduling")
    pm = s.get("provisioningModel", "STANDARD")
    if pm not in ("STANDARD", "SPOT"):
        raise Bad(f"Invalid value at 'instance.scheduling.provisioning_model' "
                  f"(type.googleapis.com/google.cloud.compute.v1.Scheduling.ProvisioningModel), "
                  f"\"{pm}\"")
    ita = s.get("instanceTerminationAction")
    if ita is not None:
        if ita not in ("STOP", "DELETE"):
            raise Bad(f"Invalid value at 'instance.scheduling.instance_termination_action', \"{ita}\"")
        if pm != "SPOT":
            raise Bad("Invalid value for field 'resource.scheduling.instanceTerminationAction': "
                      "only for SPOT VMs.")
    ohm = s.get("onHostMaintenance", "MIGRATE")
    if ohm not in ("MIGRATE", "TERMINATE"):
        raise Bad(f"Invalid value at 'instance.scheduling.on_host_maintenance', \"{ohm}\"")
    if "automaticRestart" in s:
        expect(s["automaticRestart"], bool, "instance.scheduling.automatic_restart")
    if pm == "SPOT" and s.get("automaticRestart", True):
        raise Bad("Invalid value for field 'resource.scheduling.automaticRestart': 'true'. "
                  "Spot VMs cannot be restarted automatically.")
    if m.group(2).startswith(GPU_FAMILIES) and ohm != "TERMINATE":
        raise Bad("Instances with guest accelerators do not support live migration.")
    tags = body.get("tags", {})
    only(tags, {"items"}, "instance.tags")
    for i, t in enumerate(tags.get("items", [])):
        expect(t, str, f"instance.tags.items[{i}]")
    return m.group(2), pm


def base_url():
    return f"http://127.0.0.1:{PORT}/compute/v1"


def op_view(op):
    """The operation, DONE once its delay passed (its effect applied then)."""
    if op["status"] != "DONE" and time.time() >= op["_done_at"]:
        op["status"] = "DONE"
        op["progress"] = 100
        op["endTime"] = now_rfc3339()
        eff = op.pop("_effect", None)
        if eff:
            eff()
    return {k: v for k, v in op.items() if not k.startswith("_")}


def new_op(project, zone, kind, name, delay_s, effect=None, error=None):
    NEXT_ID[0] += 1
    oname = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}"
    op = {"kind": "compute#operation", "id": str(NEXT_ID[0]), "name": oname,
          "zone": f"{base_url()}/projects/{project}/zones/{zone}", "operationType": kind,
          "targetLink": f"{base_url()}/projects/{project}/zones/{zone}/instances/{name}",
          "status": "RUNNING", "progress": 0, "insertTime": now_rfc3339(),
          "selfLink": f"{base_url()}/projects/{project}/zones/{zone}/operations/{oname}",
          "_done_at": time.time() + delay_s, "_effect": effect}
    if error:
        op["error"] = {"errors": [error[1]]}
        op["httpErrorStatusCode"] = error[0]
        op["httpErrorMessage"] = "SERVICE UNAVAILABLE" if error[0] == 503 else "FORBIDDEN"
    OPS[(zone, oname)] = op
    return op


def op_errors(kind, zone, mt):
    if kind == "ZONE_RESOURCE_POOL_EXHAUSTED":
        return 503, {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                     "message": f"The zone 'projects/p/zones/{zone}' does not have enough "
                                "resources available to fulfill the request.  Try a different "
                                "zone, or try again later."}
    if kind == "QUOTA_EXCEEDED":
        return 403, {"code": "QUOTA_EXCEEDED",
                     "message": f"Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region "
                                f"{zone.rsplit('-', 1)[0]}."}
    if kind == "QUOTA_EXCEEDED_ALL":
        return 403, {"code": "QUOTA_EXCEEDED",
                     "message": "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally."}
    return None


def inst_view(i):
    return {k: v for k, v in i.items() if not k.startswith("_")}


def advance(i):
    if i["status"] == "PROVISIONING" and time.time() >= i["_running_at"]:
        i["status"] = "RUNNING"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        self.route("POST")

    def do_GET(self):
        self.route("GET")

    def do_DELETE(self):
        self.route("DELETE")

    def route(self, method):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        raw = self.body()
        entry = {"method": method, "path": u.path}
        wm = re.match(r"^/compute/v1/projects/[^/]+/zones/([^/]+)/operations/([^/]+)/wait$", u.path)
        if wm and method == "POST":
            # zoneOperations.wait: answers once the operation is DONE, or near
            # its deadline (2 min; WAIT_CAP_S here), without holding the lock
            with LOCK:
                op = OPS.get((wm.group(1), wm.group(2)))
                until = op["_done_at"] if op and op["status"] != "DONE" else 0
            left = min(until - time.time(), WAIT_CAP_S)
            if left > 0:
                time.sleep(left)
        try:
            with LOCK:
                code, obj = self.dispatch(method, u.path, q, raw, entry)
        except Exception as e:  # a bug here must show, not hang the client
            code, obj = 500, {"error": {"code": 500, "message": f"double: {e!r}"}}
        entry["status"] = code
        if not u.path.startswith("/_test/"):
            log(entry)
        self.send(code, obj)

    # --- token endpoint -------------------------------------------------------
    def token(self, raw, entry, c):
        entry["call"] = "token"
        if not self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return 400, {"error": "invalid_request", "error_description": "form encoding required"}
        form = urllib.parse.parse_qs(raw.decode(), keep_blank_values=True)
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return 400, {"error": "unsupported_grant_type",
                         "error_description": "Invalid grant_type: " + str(form.get("grant_type"))}
        inj = fault("token")
        if inj:
            entry["injected"] = inj
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        parts = form.get("assertion", [""])[0].split(".")
        if len(parts) != 3:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT."}
        try:
            header = json.loads(b64url_dec(parts[0]))
            claims = json.loads(b64url_dec(parts[1]))
            sig = b64url_dec(parts[2])
        except ValueError:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT encoding."}
        if header.get("alg") != "RS256" or header.get("typ", "JWT") != "JWT":
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT header."}
        if "kid" in header and header["kid"] != c["key_id"]:
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        with open(c["public_key"], "rb") as f:
            pub = serialization.load_pem_public_key(f.read())
        try:
            pub.verify(sig, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                       hashes.SHA256())
        except InvalidSignature:
            entry["bad_signature"] = True
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if claims.get("iss") != c["client_email"]:
            return 400, {"error": "invalid_grant", "error_description": "Invalid issuer."}
        if claims.get("aud") != f"http://127.0.0.1:{PORT}/token":
            return 400, {"error": "invalid_grant", "error_description": "Invalid JWT audience."}
        scopes = str(claims.get("scope", "")).split()
        if not any(s in ("https://www.googleapis.com/auth/compute",
                         "https://www.googleapis.com/auth/cloud-platform") for s in scopes):
            return 400, {"error": "invalid_scope", "error_description": "Invalid scope."}
        if not isinstance(iat, int) or not isinstance(exp, int):
            return 400, {"error": "invalid_grant", "error_description": "iat and exp required."}
        if abs(iat - now) > 300 or exp <= now or exp - iat > 3600:
            return 400, {"error": "invalid_grant",
                         "error_description": "Invalid JWT: Token must be a short-lived token "
                                              "(60 minutes) and in a reasonable timeframe."}
        tok = "ya29.test-" + uuid.uuid4().hex
        ttl = int(c.get("token_ttl", 3600))
        TOKENS[tok] = now + ttl
        with open(os.path.join(DIR, "tokens.log"), "a") as f:
            f.write(tok + "\n")
        return 200, {"access_token": tok, "expires_in": ttl, "token_type": "Bearer"}

    # --- compute ---------------------------------------------------------------
    def dispatch(self, method, path, q, raw, entry):
        c = cfg()
        if path == "/token" and method == "POST":
            return self.token(raw, entry, c)
        if path.startswith("/_test/"):
            return self.control(method, path, raw, c)
        m = re.match(r"^/compute/v1/projects/([^/]+)/(.*)$", path)
        if not m:
            return api_err(404, "notFound", f"The requested URL {path} was not found.")
        project, rest = m.group(1), m.group(2)
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else ""
        if tok not in TOKENS or TOKENS[tok] <= time.time():
            entry["call"] = "unauthenticated"
            entry["expired"] = tok in TOKENS
            return api_err(401, "authError", "Request had invalid authentication credentials. "
                           "Expected OAuth 2 access token.", "UNAUTHENTICATED")
        if project != c["project"]:
            entry["call"] = "forbidden"
            return api_err(403, "forbidden", f"Required 'compute.instances.list' permission for "
                           f"'projects/{project}'", "PERMISSION_DENIED")
        m = re.match(r"^zones/([^/]+)/(instances|operations)(?:/([^/]+))?(/wait)?$", rest)
        if rest == "aggregated/instances" and method == "GET":
            return self.agg_list(q, entry, c)
        if not m:
            return api_err(404, "notFound", f"The resource '{path}' was not found")
        zone, coll, name, wait = m.group(1), m.group(2), m.group(3), m.group(4)
        entry["zone"] = zone
        if zone not in c["zones"]:
            return api_err(404, "notFound", f"The resource 'projects/{project}/zones/{zone}' was "
                           "not found")
        if coll == "operations" and name and ((method == "GET" and not wait) or
                                              (method == "POST" and wait)):
            entry["call"] = "op_wait" if wait else "op_get"
            op = OPS.get((zone, name))
            if not op:
                return api_err(404, "notFound", f"The resource 'projects/{project}/zones/{zone}"
                               f"/operations/{name}' was not found")
            return 200, op_view(op)
        if coll != "instances" or wait:
            return api_err(404, "notFound", "not found")
        if method == "POST" and not name:
            return self.insert(project, zone, q, raw, entry, c)
        if method == "DELETE" and name:
            return self.delete(project, zone, name, q, entry, c)
        if method == "GET" and name:
            entry["call"] = "get"
            i = INSTANCES.get((zone, name))
            if not i:
                return api_err(404, "notFound", f"The resource 'projects/{project}/zones/{zone}"
                               f"/instances/{name}' was not found")
            advance(i)
            return 200, inst_view(i)
        return api_err(400, "badRequest", "unsupported method")

    def insert(self, project, zone, q, raw, entry, c):
        entry["call"] = "insert"
        rid = (q.get("requestId") or [""])[0]
        entry["request_id"] = rid
        if rid and not UUID_RE.match(rid):
            return api_err(400, "invalid", f"Invalid value for field 'requestId': '{rid}'. "
                           "Must be a valid UUID.", "INVALID_ARGUMENT")
        try:
            body = json.loads(raw)
        except ValueError:
            return api_err(400, "parseError", "Invalid JSON payload received.", "INVALID_ARGUMENT")
        try:
            mt, pm = check_insert(body, zone, c)
        except Bad as e:
            entry["invalid"] = e.message
            return api_err(400, "invalid", e.message, "INVALID_ARGUMENT")
        labels = body.get("labels", {})
        entry.update({"name": body["name"], "machine_type": mt, "provisioning_model": pm,
                      "labels": labels, "scheduling": body.get("scheduling", {})})
        if rid and rid in REQUESTS:
            entry["replayed"] = True
            return 200, op_view(OPS[REQUESTS[rid]])
        inj = fault("insert", zone=zone, provisioningModel=pm, machineType=mt,
                    nodepool=labels.get("drover-nodepool"))
        if inj:
            entry["injected"] = inj
        if inj == "rateLimitExceeded":
            return 403, {"error": {"code": 403, "message": "Rate Limit Exceeded", "errors": [
                {"message": "Rate Limit Exceeded", "domain": "usageLimits",
                 "reason": "rateLimitExceeded"}]}}
        if inj == "forbidden":
            return api_err(403, "forbidden", f"Required 'compute.instances.create' permission "
                           f"for 'projects/{project}/zones/{zone}/instances/{body['name']}'",
                           "PERMISSION_DENIED")
        if (zone, body["name"]) in INSTANCES:
            return api_err(409, "alreadyExists", f"The resource 'projects/{project}/zones/{zone}"
                           f"/instances/{body['name']}' already exists", "ALREADY_EXISTS")
        delay = c.get("op_delay_ms", 400) / 1000.0
        err = op_errors(inj, zone, mt)
        if err:
            op = new_op(project, zone, "insert", body["name"], delay, error=err)
        else:
            NEXT_ID[0] += 1
            inst = dict(body)
            inst.update({"kind": "compute#instance", "id": str(NEXT_ID[0]),
                         "zone": f"{base_url()}/projects/{project}/zones/{zone}",
                         "machineType": f"{base_url()}/projects/{project}/zones/{zone}"
                                        f"/machineTypes/{mt}",
                         "status": "PROVISIONING", "creationTimestamp": now_rfc3339(),
                         "selfLink": f"{base_url()}/projects/{project}/zones/{zone}/instances/"
                                     f"{body['name']}",
                         "_running_at": time.time() + delay})
            INSTANCES[(zone, body["name"])] = inst
            op = new_op(project, zone, "insert", body["name"], delay)
        if rid:
            REQUESTS[rid] = (zone, op["name"])
        if inj == "lost_answer":
            return api_err(503, "backendError", "Backend Error", "UNAVAILABLE")
        return 200, op_view(op)

    def delete(self, project, zone, name, q, entry, c):
        entry.update({"call": "delete", "name": name})
        rid = (q.get("requestId") or [""])[0]
        if rid and not UUID_RE.match(rid):
            return api_err(400, "invalid", "requestId must be a valid UUID.", "INVALID_ARGUMENT")
        if rid and rid in REQUESTS:
            return 200, op_view(OPS[REQUESTS[rid]])
        inj = fault("delete", zone=zone)
        if inj == "rateLimitExceeded":
            entry["injected"] = inj
            return 403, {"error": {"code": 403, "message": "Rate Limit Exceeded", "errors": [
                {"message": "Rate Limit Exceeded", "domain": "usageLimits",
                 "reason": "rateLimitExceeded"}]}}
        i = INSTANCES.get((zone, name))
        if not i:
            return api_err(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/"
                           f"instances/{name}' was not found")
        i["status"] = "STOPPING"
        op = new_op(project, zone, "delete", name, c.get("op_delay_ms", 400) / 1000.0,
                    effect=lambda: INSTANCES.pop((zone, name), None))
        if rid:
            REQUESTS[rid] = (zone, op["name"])
        return 200, op_view(op)

    def agg_list(self, q, entry, c):
        entry["call"] = "list"
        for op in list(OPS.values()):
            op_view(op)   # deletions whose time came
        flt = (q.get("filter") or [""])[0]
        entry["filter"] = flt
        fm = FILTER_RE.match(flt.strip()) if flt else None
        if flt and not fm:
            return api_err(400, "invalid", f"Invalid value for field 'filter': '{flt}'. Invalid "
                           "list filter expression.", "INVALID_ARGUMENT")
        try:
            mx = int((q.get("maxResults") or ["500"])[0])
        except ValueError:
            return api_err(400, "invalid", "Invalid value for field 'maxResults'.")
        if mx < 0 or mx > 500:
            return api_err(400, "invalid", f"Invalid value for field 'maxResults': '{mx}'. "
                           "Must be less than or equal to 500")
        mx = mx or 500
        pt = (q.get("pageToken") or [""])[0]
        entry["page_token"] = pt
        start = 0
        if pt:
            try:
                tok = json.loads(b64url_dec(pt))
                start = int(tok["o"])
                if tok["f"] != flt:
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                return api_err(400, "invalid", "Invalid value for field 'pageToken'.")
        allv = sorted(INSTANCES.items())
        for _, i in allv:
            advance(i)
        if fm:
            allv = [(k, i) for k, i in allv if i.get("labels", {}).get(fm.group(1)) == fm.group(2)]
        page = [(k, i) for k, i in allv[start:start + mx] if fault("list", name=k[1]) != "omit"]
        items = {}
        for z in c["zones"]:
            got = [inst_view(i) for (zz, _), i in page if zz == z]
            items[f"zones/{z}"] = {"instances": got} if got else {
                "warning": {"code": "NO_RESULTS_ON_PAGE",
                            "message": "There are no results for scope 'zones/%s' on this page." % z}}
        out = {"kind": "compute#instanceAggregatedList", "items": items,
               "selfLink": f"{base_url()}/projects/{c['project']}/aggregated/instances"}
        if start + mx < len(allv):
            out["nextPageToken"] = base64.urlsafe_b64encode(
                json.dumps({"o": start + mx, "f": flt}).encode()).decode().rstrip("=")
        return 200, out

    # --- test control ------------------------------------------------------------
    def control(self, method, path, raw, c):
        if path == "/_test/instances":
            out = []
            for (z, n), i in sorted(INSTANCES.items()):
                advance(i)
                md = {it["key"]: it["value"] for it in i.get("metadata", {}).get("items", [])}
                out.append({"zone": z, "name": n, "status": i["status"],
                            "machine_type": i["machineType"].rsplit("/", 1)[-1],
                            "labels": i.get("labels", {}), "scheduling": i.get("scheduling", {}),
                            "startup_script": md.get("startup-script", "")})
            return 200, out
        body = json.loads(raw or b"{}")
        if path == "/_test/create":
            z, n = body["zone"], body["name"]
            INSTANCES[(z, n)] = {"kind": "compute#instance", "name": n, "id": "1",
                                 "zone": f"{base_url()}/projects/{c['project']}/zones/{z}",
                                 "machineType": f"zones/{z}/machineTypes/g2-standard-4",
                                 "status": "RUNNING", "labels": body.get("labels", {}),
                                 "_running_at": 0}
            return 200, {"name": n}
        if path == "/_test/remove":
            INSTANCES.pop((body["zone"], body["name"]), None)
            return 200, {}
        return 404, {}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global DIR, PORT
    if len(sys.argv) != 4 or sys.argv[1] != "serve":
        sys.exit(__doc__)
    PORT, DIR = int(sys.argv[2]), sys.argv[3]
    Server(("127.0.0.1", PORT), Handler).serve_forever()


if __name__ == "__main__":
    main()
