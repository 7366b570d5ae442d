#!/usr/bin/env python3
"""Sends the benchmark notification N times with aioapns (its default concurrency: every request at once,
one pooled connection with up to the server's stream limit) to a local gateway and prints the rate as JSON.

aioapns connects to `protocol_class.APNS_SERVER:APNS_PORT`; the benchmark points both at the local endpoint
and trusts the dev CA through the SSL context."""
import argparse, asyncio, json, ssl, time, uuid

import aioapns.connection as connection
from aioapns import APNs, NotificationRequest, PushType


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--payload", required=True, help="JSON file: the payload to send")
    parser.add_argument("--token", default="ab" * 32)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    for cls in (connection.APNsProductionClientProtocol, connection.APNsDevelopmentClientProtocol):
        cls.APNS_SERVER = "127.0.0.1"
        cls.APNS_PORT = args.port
    message = json.load(open(args.payload))
    client = APNs(key=open(args.key).read(), key_id=args.key_id, team_id=args.team_id, topic=args.topic,
                  ssl_context=ssl.create_default_context(cafile=args.ca))

    async def send_all(n):
        requests = [NotificationRequest(device_token=args.token, message=message, notification_id=str(uuid.uuid4()),
                                        time_to_live=3600, priority=10, push_type=PushType.ALERT)
                    for _ in range(n)]
        results = await asyncio.gather(*(client.send_notification(r) for r in requests))
        return sum(1 for r in results if r.is_successful)

    if args.warmup:
        await send_all(args.warmup)
    start = time.monotonic()
    ok = await send_all(args.count)
    elapsed = time.monotonic() - start
    print(json.dumps({"benchmark": "aioapns-load", "notifications": args.count, "succeeded": ok,
                      "seconds": round(elapsed, 3), "rate": round(args.count / elapsed, 1)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
