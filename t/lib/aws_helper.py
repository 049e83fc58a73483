#!/usr/bin/env python3
"""aws_helper.py — the EC2 side of t/aws.sh, against moto_server on loopback.

  proxy LISTEN_PORT MOTO_PORT LOG FAULTS
      An HTTP proxy in front of moto_server. Every request's Action, signing
      key id (and for RunInstances the InstanceType, market type and
      drover:nodepool tag) is appended to LOG as one JSON line, so the test
      counts calls. Fault injection, for what
      moto cannot do by itself: when the JSON file FAULTS holds
      {"spot": "CODE"}, a RunInstances asking for spot capacity is answered
      with the EC2 error CODE (HTTP 400, the EC2 error XML) instead of being
      forwarded. Nothing else is altered.
  instances MOTO_PORT
      Every instance moto knows, as a JSON array: id, state, type, lifecycle,
      tags (a dict), user_data (decoded).
  terminate MOTO_PORT ID
      Terminate an instance behind drover's back (a spot interruption).
  orphan MOTO_PORT HEAD OWNER NODE
      Launch an instance tagged as if this head had made it for NODE (a node
      that does not exist): prints its id.
  serve LISTEN_PORT MOTO_PORT
      The three above as an HTTP server on 127.0.0.1 (GET /instances, POST
      /terminate?id=ID, POST /orphan?head=&owner=&node=), answering what the
      command would print: the test polls instances many times, and one
      process with boto3 loaded once costs far less than a python3 start
      and a boto3 import per poll. Talks to moto directly, as the commands do.
"""
import base64
import http.client
import http.server
import json
import sys
import urllib.parse


def ec2(port):
    import boto3
    return boto3.client("ec2", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                        aws_access_key_id="AKIDTESTHELPER", aws_secret_access_key="helper")


def instances(port, c=None):
    c = c or ec2(port)
    out = []
    for page in c.get_paginator("describe_instances").paginate():
        for r in page["Reservations"]:
            for i in r["Instances"]:
                ud = c.describe_instance_attribute(InstanceId=i["InstanceId"],
                                                   Attribute="userData")
                raw = ud.get("UserData", {}).get("Value", "")
                text = ""
                if raw:
                    text = base64.b64decode(raw).decode("utf-8", "replace")
                out.append({"id": i["InstanceId"], "state": i["State"]["Name"],
                            "type": i["InstanceType"],
                            "lifecycle": i.get("InstanceLifecycle", "on-demand"),
                            "tags": {t["Key"]: t["Value"] for t in i.get("Tags", [])},
                            "user_data": text})
    return json.dumps(out)


def orphan(port, head, owner, node, c=None, image=None):
    c = c or ec2(port)
    image = image or c.describe_images()["Images"][0]["ImageId"]
    tags = [{"Key": "drover:head", "Value": head}, {"Key": "drover:owner", "Value": owner},
            {"Key": "drover:cluster", "Value": "gone"}, {"Key": "drover:nodepool", "Value": "gone"},
            {"Key": "drover:node", "Value": node}]
    r = c.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="g4dn.xlarge",
                        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    return r["Instances"][0]["InstanceId"]


def serve(listen, moto_port):
    c = ec2(moto_port)
    # moto's describe_images lists every built-in image (about a second):
    # look one up once, not per orphan
    image = c.describe_images()["Images"][0]["ImageId"]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, text):
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def run(self, method):
            url = urllib.parse.urlsplit(self.path)
            q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
            try:
                if method == "GET" and url.path == "/instances":
                    return self.answer(200, instances(moto_port, c))
                if method == "POST" and url.path == "/terminate":
                    c.terminate_instances(InstanceIds=[q["id"]])
                    return self.answer(200, "")
                if method == "POST" and url.path == "/orphan":
                    return self.answer(200, orphan(moto_port, q["head"], q["owner"], q["node"],
                                                   c, image))
            except Exception as e:  # the test sees a 500 and its text, never a hang
                return self.answer(500, f"{type(e).__name__}: {e}")
            return self.answer(404, "no such helper call")

        def do_GET(self):
            self.run("GET")

        def do_POST(self):
            self.run("POST")

    # one request at a time: boto3 clients are not meant to be shared by threads
    http.server.HTTPServer(("127.0.0.1", int(listen)), Handler).serve_forever()


def proxy(listen, moto_port, log, faults):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            action = form.get("Action", [""])[0]
            market = form.get("InstanceMarketOptions.MarketType", ["on-demand"])[0]
            auth = self.headers.get("Authorization", "")
            key = auth.split("Credential=", 1)[1].split("/", 1)[0] if "Credential=" in auth else ""
            entry = {"action": action, "type": form.get("InstanceType", [""])[0],
                     "market": market, "key": key,
                     "nodepool": form.get("TagSpecification.1.Tag.5.Value", [""])[0],
                     "next_token": "NextToken" in form}
            try:
                with open(faults) as f:
                    rules = json.load(f)
            except (OSError, ValueError):
                rules = {}
            code = rules.get("spot") if action == "RunInstances" and market == "spot" else None
            entry["injected"] = code or ""
            with open(log, "a") as f:
                f.write(json.dumps(entry) + "\n")
            if code:
                err = ('<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
                       f'<Code>{code}</Code><Message>injected by the test: no spot capacity'
                       '</Message></Error></Errors><RequestID>test</RequestID></Response>')
                self.send_response(400)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(err)))
                self.end_headers()
                self.wfile.write(err.encode())
                return
            conn = http.client.HTTPConnection("127.0.0.1", moto_port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            headers["Host"] = self.headers.get("Host", "")
            conn.request("POST", self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                     "server", "date"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(listen)), Handler)
    srv.serve_forever()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "proxy":
        proxy(*sys.argv[2:6])
    elif cmd == "serve":
        serve(*sys.argv[2:4])
    elif cmd == "instances":
        print(instances(sys.argv[2]))
    elif cmd == "orphan":
        print(orphan(*sys.argv[2:6]))
    elif cmd == "terminate":
        ec2(sys.argv[2]).terminate_instances(InstanceIds=[sys.argv[3]])
    else:
        sys.exit(f"unknown command {cmd}")
