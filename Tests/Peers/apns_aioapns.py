"""aioapns, Apple's protocol as a Python app server speaks it, against apns-sim over TLS with a provider token.

    apns_aioapns.py PORT CA KEY TOKEN
        APNsSimulatorTests' conformance run: a background and a badge push, a bad token and an oversized payload;
        prints the results as JSON.
    apns_aioapns.py load --port P --ca CA --key P8 --key-id K --team-id T --topic TOPIC --payload FILE [--count N]
        The benchmark's reference client: the benchmark notification N times with aioapns's default concurrency
        (every request at once, one pooled connection up to the server's stream limit); prints the rate as JSON.

aioapns connects to `protocol_class.APNS_SERVER:APNS_PORT`; both are pointed at the local endpoint, and the dev CA is
trusted through the SSL context."""
import argparse, asyncio, json, ssl, sys, time, uuid

import aioapns.connection as connection
from aioapns import APNs, NotificationRequest, PushType


async def conformance(argv):
    port, ca, key_path, token = int(argv[0]), argv[1], argv[2], argv[3]
    connection.APNsDevelopmentClientProtocol.APNS_SERVER = "127.0.0.1"
    connection.APNsTLSClientProtocol.APNS_PORT = port
    context = ssl.create_default_context(cafile=ca)
    client = APNs(key=open(key_path).read(), key_id="KEY1234567", team_id="TEAM123456",
                  topic="com.example.mail", use_sandbox=True, ssl_context=context)
    requests = {
        "background": NotificationRequest(device_token=token, message={"aps": {"content-available": 1}, "st": "s1"},
                                          priority=5, push_type=PushType.BACKGROUND, time_to_live=3600),
        "badge": NotificationRequest(device_token=token, message={"aps": {"badge": 4}},
                                     push_type=PushType.ALERT, time_to_live=3600),
        "badToken": NotificationRequest(device_token="00" * 31 + "zz", message={"aps": {"badge": 1}},
                                        push_type=PushType.ALERT),
        "tooLarge": NotificationRequest(device_token=token, message={"aps": {"badge": 1}, "pad": "x" * 5000},
                                        push_type=PushType.ALERT),
    }
    results = {}
    for name, request in requests.items():
        result = await client.send_notification(request)
        results[name] = {"status": result.status, "reason": result.description, "id": result.notification_id}
    print(json.dumps(results))


async def load(argv):
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
    args = parser.parse_args(argv)
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
    if sys.argv[1:2] == ["load"]:
        asyncio.run(load(sys.argv[2:]))
    else:
        asyncio.run(asyncio.wait_for(conformance(sys.argv[1:]), 60))
