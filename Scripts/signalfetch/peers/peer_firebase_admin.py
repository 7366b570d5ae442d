#!/usr/bin/env python3
"""Sends N data-only messages with Google's firebase-admin SDK at its fastest: messaging.send_each_async (httpx over
HTTP/2), batches of 500 (the API's limit) sent concurrently, to a local FCM (fcm-sim), and prints the rate as JSON.

The service account's token_uri is replaced by --token-uri and the SDK's FCM URL by --endpoint; TLS trust comes
from SSL_CERT_FILE / REQUESTS_CA_BUNDLE (set to --ca here)."""
import argparse, asyncio, json, os, time


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--token-uri", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--service-account", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--batches", type=int, default=4, help="batches of 500 in flight at once")
    args = parser.parse_args()
    os.environ["SSL_CERT_FILE"] = os.environ["REQUESTS_CA_BUNDLE"] = args.ca
    import firebase_admin
    from firebase_admin import credentials, messaging
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
    asyncio.run(main())
