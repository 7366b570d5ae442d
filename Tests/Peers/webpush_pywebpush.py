"""A reference Web Push sender for the webpush-sim tests: pywebpush 2.x (py-vapid for VAPID, http_ece for RFC 8291).

Usage: webpush_pywebpush.py PLAN.json — PLAN is {"vapidKeyFile": PEM of the application server's P-256 key,
"sends": [{"case", "subscription": PushSubscription.toJSON(), "data", "ttl"?, "headers"?, "subject"?,
"tamper"?: "signature"}]}. "tamper": "signature" flips a bit of the token's signature after py-vapid signed it.
Prints one JSON line per send: {"case", "status", "location"?, "ttl"?, "body"?}.
"""
import json
import sys
from urllib.parse import urlparse

from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

plan = json.load(open(sys.argv[1]))
vapid = Vapid02.from_file(plan["vapidKeyFile"])

for send in plan["sends"]:
    subscription = send["subscription"]
    endpoint = urlparse(subscription["endpoint"])
    claims = {"sub": send.get("subject", "mailto:ops@example.com"),
              "aud": f"{endpoint.scheme}://{endpoint.netloc}"}
    headers = dict(send.get("headers", {}))
    arguments = {}
    if send.get("tamper") == "signature":
        signed = vapid.sign(claims)
        token = signed["Authorization"].split("t=", 1)[1].split(",", 1)[0]
        head, payload, signature = token.split(".")
        flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
        headers["Authorization"] = signed["Authorization"].replace(token, f"{head}.{payload}.{flipped}")
    else:
        arguments = {"vapid_private_key": vapid, "vapid_claims": claims}
    result = {"case": send["case"]}
    try:
        response = webpush(subscription, data=send.get("data"), ttl=send.get("ttl", 60), headers=headers,
                           timeout=10, **arguments)
    except WebPushException as error:
        response = error.response
    result.update(status=response.status_code, location=response.headers.get("location"),
                  ttl=response.headers.get("ttl"), body=response.text[:500])
    print(json.dumps(result), flush=True)
