#!/usr/bin/env python3
"""ref.py — the reference of bench/providers/run: how long the service
itself takes to make one machine, called directly (no drover), in seconds.

  gcp PORT KEY_JSON      token grant (RS256 JWT) + instances.insert + the
                         zone operation polled to DONE (50 ms polls)
  vultr PORT API_KEY     region availability + POST /v2/instances
  oracle PORT DIR        LaunchInstance signed with DIR/key.pem (OCI HTTP
                         Signatures), the ids in DIR/config.json
  aws PORT               RunInstances (boto3) against moto
Prints one float (seconds) per call.
"""
import base64
import json
import sys
import time
import urllib.parse
import urllib.request
import uuid


def http(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"{}")


def b64u(b):
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def gcp(port, key_path):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    key = json.load(open(key_path))
    t0 = time.monotonic()
    now = int(time.time())
    h = b64u(json.dumps({"alg": "RS256", "typ": "JWT", "kid": key["private_key_id"]}).encode())
    c = b64u(json.dumps({"iss": key["client_email"], "scope": "https://www.googleapis.com/auth/compute",
                         "aud": key["token_uri"], "iat": now, "exp": now + 3600}).encode())
    pk = serialization.load_pem_private_key(key["private_key"].encode(), None)
    sig = b64u(pk.sign(f"{h}.{c}".encode(), padding.PKCS1v15(), hashes.SHA256()))
    form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                   "assertion": f"{h}.{c}.{sig}"}).encode()
    tok = http("POST", key["token_uri"], form,
               {"Content-Type": "application/x-www-form-urlencoded"})["access_token"]
    auth = {"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
    base = f"http://127.0.0.1:{port}/compute/v1/projects/{key['project_id']}/zones/us-central1-a"
    name = "ref-" + uuid.uuid4().hex[:12]
    body = {"name": name, "machineType": "zones/us-central1-a/machineTypes/g2-standard-4",
            "disks": [{"boot": True, "autoDelete": True,
                       "initializeParams": {"sourceImage": "projects/x/global/images/y"}}],
            "scheduling": {"onHostMaintenance": "TERMINATE"}}
    op = http("POST", f"{base}/instances?requestId={uuid.uuid4()}", json.dumps(body).encode(), auth)
    while op["status"] != "DONE":
        time.sleep(0.05)
        op = http("GET", f"{base}/operations/{op['name']}", None, auth)
    t = time.monotonic() - t0
    http("DELETE", f"{base}/instances/{name}", None, auth)
    return t


def vultr(port, api_key):
    auth = {"Authorization": "Bearer " + api_key, "Content-Type": "application/json"}
    base = f"http://127.0.0.1:{port}/v2"
    t0 = time.monotonic()
    http("GET", f"{base}/regions/ewr/availability", None, auth)
    r = http("POST", f"{base}/instances", json.dumps({
        "region": "ewr", "plan": "vcg-a16-2c-8g-2vram", "snapshot_id": "s", "label": "ref",
        "user_data": base64.b64encode(b"#!/bin/sh\n").decode(), "tags": ["ref"]}).encode(), auth)
    t = time.monotonic() - t0
    http("DELETE", f"{base}/instances/{r['instance']['id']}", None, auth)
    return t


def oracle(port, d):
    import email.utils
    import hashlib
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    c = json.load(open(f"{d}/config.json"))
    pk = serialization.load_pem_private_key(open(f"{d}/key.pem", "rb").read(), None)
    host = f"127.0.0.1:{port}"

    def signed(method, target, body=None):
        date = email.utils.formatdate(usegmt=True)
        h = {"date": date, "host": host}
        names = ["date", "(request-target)", "host"]
        if body is not None:
            h.update({"content-length": str(len(body)), "content-type": "application/json",
                      "x-content-sha256": base64.b64encode(hashlib.sha256(body).digest()).decode()})
            names += ["content-length", "content-type", "x-content-sha256"]
        s = "\n".join(f"{n}: {method.lower()} {target}" if n == "(request-target)" else f"{n}: {h[n]}"
                      for n in names)
        sig = base64.b64encode(pk.sign(s.encode(), padding.PKCS1v15(), hashes.SHA256())).decode()
        h["Authorization"] = (f'Signature version="1",headers="{" ".join(names)}",keyId="{c["tenancy"]}/'
                              f'{c["user"]}/{c["fingerprint"]}",algorithm="rsa-sha256",signature="{sig}"')
        h["opc-retry-token"] = uuid.uuid4().hex
        return http(method, f"http://{host}{target}", body, h)
    body = json.dumps({"availabilityDomain": c["ads"][0], "compartmentId": c["compartment"],
                       "shape": c["shapes"][0], "displayName": "ref",
                       "sourceDetails": {"sourceType": "image", "imageId": c["images"][0]},
                       "createVnicDetails": {"subnetId": c["subnets"][0]},
                       "metadata": {"user_data": base64.b64encode(b"#!/bin/sh\n").decode()},
                       "freeformTags": {"ref": "1"}}).encode()
    t0 = time.monotonic()
    r = signed("POST", "/20160918/instances", body)
    t = time.monotonic() - t0
    signed("DELETE", f"/20160918/instances/{r['id']}?preserveBootVolume=false")
    return t


def aws(port, image):
    import boto3
    c = boto3.client("ec2", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                     aws_access_key_id="AKIDREF", aws_secret_access_key="ref")
    # image: the one bench/providers/run gives drover. Looked up alone
    # before the clock starts (a describe_images of all moto's takes it
    # seconds): the client's first call also pays boto3's and moto's warm-up,
    # which the timed call must not (drover's client is warm too)
    c.describe_images(ImageIds=[image])
    t0 = time.monotonic()
    r = c.run_instances(ImageId=image, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1)
    t = time.monotonic() - t0
    c.terminate_instances(InstanceIds=[r["Instances"][0]["InstanceId"]])
    return t


if __name__ == "__main__":
    kind = sys.argv[1]
    print("%.4f" % {"gcp": lambda: gcp(int(sys.argv[2]), sys.argv[3]),
                    "vultr": lambda: vultr(int(sys.argv[2]), sys.argv[3]),
                    "oracle": lambda: oracle(int(sys.argv[2]), sys.argv[3]),
                    "aws": lambda: aws(int(sys.argv[2]), sys.argv[3])}[kind]())
