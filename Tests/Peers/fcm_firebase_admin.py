"""A real FCM sender for the fcm-sim tests: Google's firebase-admin SDK (messaging.send, over requests).

Usage: fcm_firebase_admin.py PLAN.json
       fcm_firebase_admin.py load --endpoint URL --token-uri URL --ca CA --service-account FILE --tokens FILE [--count N]

PLAN: {"serviceAccount": PATH, "tokenURI": URL, "fcmBase": "https://127.0.0.1:PORT", "mode"?: "send"|"sendEachAsync",
       "sends": [{"case": NAME, "token": TOKEN, "data": {...}, "collapseKey"?: K, "ttl"?: SECONDS,
                  "priority"?: "normal"|"high", "sleepBefore"?: SECONDS}]}

The service account's token_uri is replaced by PLAN.tokenURI and the SDK's FCM URL by PLAN.fcmBase; TLS trust
comes from REQUESTS_CA_BUNDLE. Prints one JSON line per send:
{"case", "ok": true, "name"} or {"case", "ok": false, "error": <exception class>, "code"?, "message"}.
Mode `send` (the default) calls messaging.send once per entry (requests, HTTP/1.1); `sendEachAsync` sends every
entry in one messaging.send_each_async call (httpx with HTTP/2).

`load` is the benchmark's reference client: N data-only messages at the SDK's fastest, messaging.send_each_async in
batches of 500 (the API's limit) sent concurrently; it prints the rate as JSON.
"""
import argparse
import asyncio
import json
import os
import sys
import time

import firebase_admin
import google.auth.exceptions
from firebase_admin import credentials, messaging


def conformance(plan_path):
    plan = json.load(open(plan_path))
    info = json.load(open(plan["serviceAccount"]))
    info["token_uri"] = plan["tokenURI"]
    messaging._MessagingService.FCM_URL = plan["fcmBase"] + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(info), name="fcm-sim-test")
    if plan.get("mode") == "sendEachAsync":
        batch = asyncio.run(messaging.send_each_async([make_message(send) for send in plan["sends"]], app=app))
        for send, response in zip(plan["sends"], batch.responses):
            result = {"case": send["case"]}
            if response.success:
                result.update(ok=True, name=response.message_id)
            else:
                result.update(describe(response.exception))
            print(json.dumps(result), flush=True)
        return

    for send in plan["sends"]:
        if send.get("sleepBefore"):
            time.sleep(send["sleepBefore"])
        result = {"case": send["case"]}
        try:
            result.update(ok=True, name=messaging.send(make_message(send), app=app))
        except (google.auth.exceptions.RefreshError, firebase_admin.exceptions.FirebaseError) as error:
            result.update(describe(error))
        print(json.dumps(result), flush=True)


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


async def load(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--token-uri", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--service-account", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--batches", type=int, default=4, help="batches of 500 in flight at once")
    args = parser.parse_args(argv)
    os.environ["SSL_CERT_FILE"] = os.environ["REQUESTS_CA_BUNDLE"] = args.ca
    info = json.load(open(args.service_account))
    info["token_uri"] = args.token_uri
    messaging._MessagingService.FCM_URL = args.endpoint + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(info), name="bench")
    tokens = [t for t in open(args.tokens).read().split() if t]
    android = messaging.AndroidConfig(priority="normal", ttl=3600, collapse_key="bench-alias-0001")

    def message(index):
        return messaging.Message(token=tokens[index % len(tokens)],
                                 data={"acct": "bench-alias-0001", "st": "Qk3xY0_bench-tag"}, android=android)

    async def send_all(n):
        ok, sem = 0, asyncio.Semaphore(args.batches)

        async def batch(start):
            async with sem:
                result = await messaging.send_each_async([message(i) for i in range(start, min(n, start + 500))],
                                                         app=app)
                return result.success_count

        for count in await asyncio.gather(*(batch(s) for s in range(0, n, 500))):
            ok += count
        return ok

    if args.warmup:
        await send_all(args.warmup)
    start = time.monotonic()
    ok = await send_all(args.count)
    elapsed = time.monotonic() - start
    print(json.dumps({"benchmark": "firebase-admin-load", "signals": args.count, "succeeded": ok,
                      "seconds": round(elapsed, 3), "rate": round(ok / elapsed, 1)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        asyncio.run(load(sys.argv[2:]))
    else:
        conformance(sys.argv[1])
