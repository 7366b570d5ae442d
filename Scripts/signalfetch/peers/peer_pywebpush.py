#!/usr/bin/env python3
"""Sends N Web Push messages with pywebpush at its fastest: webpush_async over one shared aiohttp session
(connection pooling, 100 requests in flight), aes128gcm and VAPID as pywebpush does them, to a local push service
(webpush-sim), and prints the rate as JSON. The payload is the same content-free signal mailboxd sends.

Also, with --encrypt-only: pywebpush's encryption of one such body (its http_ece call, with a fresh key each
time), in microseconds per message."""
import argparse, asyncio, json, ssl, time


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", required=True, help="one PushSubscription.toJSON() per line")
    parser.add_argument("--vapid-key", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--encrypt-only", action="store_true")
    args = parser.parse_args()
    if args.encrypt_only:
        encrypt_only(args)
    else:
        asyncio.run(send(args))


if __name__ == "__main__":
    main()
