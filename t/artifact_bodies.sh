#!/usr/bin/env bash
# artifact_bodies.sh — manifests over the API's 1 MiB body bound (issue 14):
# `drover artifact push` of a tree of 6,000 files (one content, so one blob:
# the manifest is what is big, about 1.4 MiB) is accepted by the upload and
# create routes, which take up to 32 MiB from an authenticated caller; the
# bound stays 1 MiB for an anonymous body on those routes and for every
# other route; an absurd Content-Length (1 TB) is refused with 413 before
# any byte is read; nothing is created by a refused request.
. "$(dirname "$0")/lib/common.bash"

droverd_start "$TMP/d" || exit 1
n_artifacts() { api GET /v1/artifacts; jq '.items | length' <<<"$BODY"; }

# ---- a manifest over 1 MiB: 6,000 files --------------------------------------------------
T=$TMP/many
mkdir -p "$T"
python3 -S - "$T" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(60):
    sub = os.path.join(root, "layer-%02d-of-a-model-with-many-shards" % d)
    os.mkdir(sub)
    for f in range(100):
        with open(os.path.join(sub, "tensor-%03d.safetensors" % f), "w") as fh:
            fh.write("w\n")
PY
cli artifact push "$T" --id many
rc "push a tree of 6,000 files" 0
api GET /v1/artifacts/many
status "GET the artifact" 200
jqc "it lists 6,000 files" '.status.file_count == 6000 and (.manifest.files | length) == 6000'
MSIZE=$(jq -c .manifest <<<"$BODY" | wc -c)
eq "its manifest is over the API's 1 MiB ($MSIZE bytes)" "$((MSIZE > 1048576))" 1
before=$(n_artifacts)

# ---- the bound elsewhere, and for the anonymous -----------------------------------------------
jq -c '{id: "again", source: "drover://", manifest: .manifest}' <<<"$BODY" >"$TMP/big.json"
TOKEN_SAVED=$TOKEN
TOKEN=""
api POST /v1/artifacts --data-binary "@$TMP/big.json"
TOKEN=$TOKEN_SAVED
status "the same body, anonymous: 1 MiB bound" 413
contains "... naming 1 MiB" "$BODY" "larger than 1048576 bytes"
python3 -S -c 'import json; print(json.dumps({"id": "m", "runtime": {"command": ["x" * 1000] * 2000}}))' >"$TMP/model.json"
api POST /v1/models --data-binary "@$TMP/model.json"
status "a 2 MB body to another route (models): 1 MiB bound" 413
api GET /v1/models/m
status "... no model created" 404

# ---- an absurd Content-Length: refused before the body ------------------------------------------
absurd() {   # the answer's status line to a POST claiming 10^12 bytes (and sending none)
    python3 -S - "$URL" "$TOKEN" <<'PY'
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(("POST /v1/artifacts/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n" % sys.argv[2]).encode())
data = b""
while b"\r\n\r\n" not in data:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.split(b"\r\n", 1)[0].decode())
PY
}
contains "a Content-Length of 1 TB on the upload route: 413 before any byte" "$(absurd)" " 413 "
eq "nothing created" "$(n_artifacts)" "$before"

# ---- the big one again through the create route (authenticated): 32 MiB bound -------------------
api POST /v1/artifacts --data-binary "@$TMP/big.json"
status "the 1.4 MiB create body with a token" 201
api GET /v1/artifacts/again
jqc "... the same manifest" '.status.file_count == 6000'

droverd_finish "artifact_bodies"
t_done
