"""A reference Web Push sender for the webpush-sim tests: pywebpush 2.x (py-vapid for VAPID, http_ece for RFC 8291).

Usage: webpush_pywebpush.py PLAN.json — PLAN is {"vapidKeyFile": PEM of the application server's P-256 key,
"sends": [{"case", "subscription": PushSubscription.toJSON(), "data", "ttl"?, "headers"?, "subject"?,
"tamper"?: "signature"}]}. "tamper": "signature" flips a bit of the token's signature after py-vapid signed it.
Prints one JSON line per send: {"case", "status", "location"?, "ttl"?, "body"?}.

Usage: webpush_pywebpush.py load --subscriptions FILE --vapid-key PEM --ca CA [--count N] [--encrypt-only] — the
benchmark's reference client: N messages at pywebpush's fastest, webpush_async over one shared aiohttp session
(connection pooling, 100 requests in flight), the same content-free signal mailboxd sends; prints the rate as JSON.
With --encrypt-only: pywebpush's encryption of one such body (its http_ece call, a fresh key each time), in
microseconds per message.
"""
import argparse
import asyncio
import json
import ssl
import sys
import time
from urllib.parse import urlparse

from py_vapid import Vapid02
from pywebpush import WebPushException, webpush


def conformance(plan_path):
    plan = json.load(open(plan_path))
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


def subscriptions(path):
    return [json.loads(line) for line in open(path) if line.strip()]


async def send(args):
    import aiohttp
    from py_vapid import Vapid
    from pywebpush import webpush_async
    subs = subscriptions(args.subscriptions)
    vapid = Vapid.from_file(args.vapid_key)
    context = ssl.create_default_context(cafile=args.ca)
    payload = json.dumps({"acct": "bench-alias-0001", "st": "Qk3xY0_bench-tag"}, separators=(",", ":"))
    connector = aiohttp.TCPConnector(ssl=context, limit=args.concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def run(n):
            ok, failed, sem = 0, 0, asyncio.Semaphore(args.concurrency)

            async def one(index):
                nonlocal ok, failed
                async with sem:
                    response = await webpush_async(
                        subs[index % len(subs)], data=payload, vapid_private_key=vapid,
                        vapid_claims={"sub": "mailto:bench@example.com"}, ttl=3600,
                        headers={"Urgency": "normal", "Topic": "bench-topic-0001"}, aiohttp_session=session)
                    if 200 <= response.status < 300:
                        ok += 1
                    else:
                        failed += 1
            await asyncio.gather(*(one(i) for i in range(n)))
            return ok, failed

        if args.warmup:
            await run(args.warmup)
        start = time.perf_counter()
        ok, failed = await run(args.count)
        seconds = time.perf_counter() - start
    print(json.dumps({"benchmark": "pywebpush-load", "signals": args.count, "succeeded": ok, "failed": failed,
                      "seconds": round(seconds, 3), "rate": round(ok / seconds, 1)}), flush=True)


def encrypt_only(args):
    from pywebpush import WebPusher
    sub = subscriptions(args.subscriptions)[0]
    payload = json.dumps({"acct": "bench-alias-0001", "st": "Qk3xY0_bench-tag"}, separators=(",", ":"))
    pusher = WebPusher(sub)
    for _ in range(max(10, args.count // 20)):
        pusher.encode(payload.encode(), "aes128gcm")
    start = time.perf_counter()
    for _ in range(args.count):
        pusher.encode(payload.encode(), "aes128gcm")
    seconds = time.perf_counter() - start
    print(json.dumps({"benchmark": "pywebpush-encrypt", "messages": args.count,
                      "microseconds": round(seconds * 1e6 / args.count, 1)}), flush=True)


def load(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", required=True, help="one PushSubscription.toJSON() per line")
    parser.add_argument("--vapid-key", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--encrypt-only", action="store_true")
    args = parser.parse_args(argv)
    if args.encrypt_only:
        encrypt_only(args)
    else:
        asyncio.run(send(args))


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        load(sys.argv[2:])
    else:
        conformance(sys.argv[1])
