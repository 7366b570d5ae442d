"""A real FCM sender for the fcm-sim tests: Google's firebase-admin SDK (messaging.send, over requests).

Usage: fcm_firebase_admin.py PLAN.json

PLAN: {"serviceAccount": PATH, "tokenURI": URL, "fcmBase": "https://127.0.0.1:PORT", "mode"?: "send"|"sendEachAsync",
       "sends": [{"case": NAME, "token": TOKEN, "data": {...}, "collapseKey"?: K, "ttl"?: SECONDS,
                  "priority"?: "normal"|"high", "sleepBefore"?: SECONDS}]}

The service account's token_uri is replaced by PLAN.tokenURI and the SDK's FCM URL by PLAN.fcmBase; TLS trust
comes from REQUESTS_CA_BUNDLE. Prints one JSON line per send:
{"case", "ok": true, "name"} or {"case", "ok": false, "error": <exception class>, "code"?, "message"}.
Mode `send` (the default) calls messaging.send once per entry (requests, HTTP/1.1); `sendEachAsync` sends every
entry in one messaging.send_each_async call (httpx with HTTP/2).
"""
import asyncio
import json
import sys
import time

import firebase_admin
import google.auth.exceptions
from firebase_admin import credentials, messaging

plan = json.load(open(sys.argv[1]))
info = json.load(open(plan["serviceAccount"]))
info["token_uri"] = plan["tokenURI"]
messaging._MessagingService.FCM_URL = plan["fcmBase"] + "/v1/projects/{0}/messages:send"
app = firebase_admin.initialize_app(credentials.Certificate(info), name="fcm-sim-test")



def make_message(send):
    android = messaging.AndroidConfig(
        priority=send.get("priority", "high"), ttl=send.get("ttl"), collapse_key=send.get("collapseKey"))
    return messaging.Message(token=send["token"], data=send.get("data", {}), android=android)


def describe(error):
    if isinstance(error, google.auth.exceptions.RefreshError):
        return dict(ok=False, error="RefreshError", message=str(error)[:300])
    response = getattr(error, "http_response", None)
    status = getattr(response, "status_code", None)
    return dict(ok=False, error=type(error).__name__, code=getattr(error, "code", None), message=str(error)[:300],
                status=status)


if plan.get("mode") == "sendEachAsync":
    batch = asyncio.run(messaging.send_each_async([make_message(send) for send in plan["sends"]], app=app))
    for send, response in zip(plan["sends"], batch.responses):
        result = {"case": send["case"]}
        if response.success:
            result.update(ok=True, name=response.message_id)
        else:
            result.update(describe(response.exception))
        print(json.dumps(result), flush=True)
    sys.exit(0)

for send in plan["sends"]:
    if send.get("sleepBefore"):
        time.sleep(send["sleepBefore"])
    result = {"case": send["case"]}
    try:
        result.update(ok=True, name=messaging.send(make_message(send), app=app))
    except (google.auth.exceptions.RefreshError, firebase_admin.exceptions.FirebaseError) as error:
        result.update(describe(error))
    print(json.dumps(result), flush=True)
