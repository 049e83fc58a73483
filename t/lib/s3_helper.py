#!/usr/bin/env python3
"""s3_helper.py — the S3 side of t/s3.sh: a checking, counting proxy in
front of moto_server on loopback.

  proxy LISTEN_PORT MOTO_PORT LOG KEYS
      moto_server in S3 mode stores and answers like S3 but checks no
      signature (and with its IAM checks on it refuses every presigned URL,
      which carries no Authorization header), so this proxy does what S3
      does first: every request must be signed, either in the Authorization
      header (SigV4, with x-amz-content-sha256 matching the body) or in the
      query (a presigned URL: X-Amz-Credential, -Date, -Expires,
      -SignedHeaders, -Signature). Signatures are recomputed with botocore
      (S3SigV4Auth, S3SigV4QueryAuth: an implementation independent of
      drover's) from the secret that KEYS (a JSON file {"ACCESS_KEY":
      "SECRET"}) holds for the key id; a presigned URL past X-Amz-Date +
      X-Amz-Expires is refused as S3 refuses it (403 AccessDenied, "Request
      has expired"); an unknown key is 403 InvalidAccessKeyId, a wrong
      signature 403 SignatureDoesNotMatch, all in S3's error XML. What passes
      goes to moto (a presigned URL's X-Amz-* parameters removed). Every
      request is appended to LOG as one JSON line: method, path, auth
      ("header", "query" or "none"), status, bytes of body in and out.
"""
import datetime
import hashlib
import http.client
import http.server
import json
import sys
import urllib.parse

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def s3_error(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s'
            '</Message><RequestId>proxy</RequestId></Error>' % (code, message)).encode()


def check(method, path, headers, body, keys):
    """(auth kind, None) when the request may pass, else (kind, (status, code, message))."""
    split = urllib.parse.urlsplit(path)
    pairs = [p.partition("=") for p in split.query.split("&") if p]
    params = {k: urllib.parse.unquote(v) for k, _, v in pairs}
    host = headers.get("Host", "")
    if "X-Amz-Signature" in params:
        kind = "query"
        cred = params.get("X-Amz-Credential", "").split("/")
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or len(cred) != 5:
            return kind, (400, "AuthorizationQueryParametersError", "bad X-Amz-* parameters")
        if cred[0] not in keys:
            return kind, (403, "InvalidAccessKeyId", "The AWS Access Key Id you provided "
                          "does not exist in our records.")
        when = datetime.datetime.strptime(params.get("X-Amz-Date", ""), "%Y%m%dT%H%M%SZ")
        expires = int(params.get("X-Amz-Expires", "0"))
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        if now > when + datetime.timedelta(seconds=expires):
            return kind, (403, "AccessDenied", "Request has expired")
        if params.get("X-Amz-SignedHeaders") != "host":
            return kind, (403, "AccessDenied", "only host is expected to be signed")
        unsigned = "&".join(f"{k}={v}" for k, _, v in pairs if k != "X-Amz-Signature")
        req = AWSRequest(method=method, url=f"http://{host}{split.path}?{unsigned}",
                         headers={"host": host})
        req.context["timestamp"] = params["X-Amz-Date"]
        auth = S3SigV4QueryAuth(Credentials(cred[0], keys[cred[0]]), cred[3], cred[2],
                                expires=expires)
        got = params["X-Amz-Signature"]
    elif "Authorization" in headers:
        kind = "header"
        a = headers["Authorization"]

        def between(first, second):
            return a.partition(first)[2].partition(second)[0]
        cred = between("Credential=", ",").split("/")
        if len(cred) != 5:
            return kind, (400, "AuthorizationHeaderMalformed", "bad Authorization header")
        if cred[0] not in keys:
            return kind, (403, "InvalidAccessKeyId", "The AWS Access Key Id you provided "
                          "does not exist in our records.")
        sha = headers.get("X-Amz-Content-SHA256", "")
        if sha != "UNSIGNED-PAYLOAD" and sha != hashlib.sha256(body).hexdigest():
            return kind, (400, "XAmzContentSHA256Mismatch", "the body does not match "
                          "x-amz-content-sha256")
        signed = between("SignedHeaders=", ",").split(";")
        hs = {k: v for k, v in headers.items() if k.lower() in signed}
        req = AWSRequest(method=method, url=path, data=body, headers=hs)
        req.context["timestamp"] = headers.get("X-Amz-Date", "")
        auth = S3SigV4Auth(Credentials(cred[0], keys[cred[0]]), cred[3], cred[2])
        got = between("Signature=", ",")
    else:
        return "none", (403, "AccessDenied", "Anonymous access is forbidden")
    creq = auth.canonical_request(req)
    want = auth.signature(auth.string_to_sign(req, creq), req)
    if got != want:
        return kind, (403, "SignatureDoesNotMatch", "The request signature we calculated "
                      "does not match the signature you provided.")
    return kind, None


def proxy(listen, moto_port, log, keys_file):
    with open(keys_file) as f:
        keys = json.load(f)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def relay(self):
            if "chunked" in self.headers.get("Transfer-Encoding", ""):
                # S3 wants a Content-Length on a PUT (411 MissingContentLength)
                data = s3_error("MissingContentLength", "You must provide the Content-Length")
                self.send_response(411)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            kind, refusal = check(self.command, self.path, self.headers, body, keys)
            entry = {"method": self.command, "path": self.path.split("?")[0],
                     "query": self.path.partition("?")[2], "auth": kind, "in": len(body)}
            if refusal:
                status, code, message = refusal
                data = s3_error(code, message) if self.command != "HEAD" else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                entry.update(status=status, out=len(data), code=code)
            else:
                split = urllib.parse.urlsplit(self.path)
                q = "&".join(p for p in split.query.split("&")
                             if p and not p.startswith("X-Amz-"))
                conn = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=120)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length")}
                headers["Host"] = self.headers.get("Host", "")
                if kind == "query":
                    # checked above; moto refuses an anonymous read of a
                    # private object, so it gets a header it does not check
                    cred = urllib.parse.parse_qs(split.query).get("X-Amz-Credential", [""])[0]
                    headers["Authorization"] = ("AWS4-HMAC-SHA256 Credential=%s, "
                                                "SignedHeaders=host, Signature=proxy" % cred)
                conn.request(self.command, split.path + ("?" + q if q else ""),
                             body=body if body or self.command in ("PUT", "POST") else None,
                             headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                length = None
                for k, v in resp.getheaders():
                    if k.lower() == "content-length":
                        length = v
                    elif k.lower() not in ("transfer-encoding", "connection", "server", "date"):
                        self.send_header(k, v)
                if self.command == "HEAD":
                    self.send_header("Content-Length", length or "0")
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()
                entry.update(status=resp.status, out=len(data))
            with open(log, "a") as f:
                f.write(json.dumps(entry) + "\n")

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(listen)), Handler)
    srv.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "proxy":
        proxy(*sys.argv[2:6])
    else:
        sys.exit("usage: s3_helper.py proxy LISTEN_PORT MOTO_PORT LOG KEYS")
