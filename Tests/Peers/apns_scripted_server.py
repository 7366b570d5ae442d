"""A Python peer for APNsTests: an HTTP/2 server (h2) that answers APNs requests from a script of statuses, reasons and delays, with a stream limit, over TLS with an optional client-certificate CA."""
import asyncio, json, ssl, sys, uuid, argparse
import h2.config, h2.connection, h2.events, h2.settings

p = argparse.ArgumentParser()
p.add_argument("--cert"); p.add_argument("--key"); p.add_argument("--client-ca")
p.add_argument("--script"); p.add_argument("--max-streams", type=int, default=1000)
p.add_argument("--delay", type=float, default=0.0)
args = p.parse_args()
script = json.load(open(args.script)) if args.script else {}
stats = {"maxConcurrent": 0, "requests": []}
active = 0
first_auth = {}

waiters = {}

async def respond(conn, writer, sid, status, headers, body):
    hs = [(":status", str(status))] + headers + [("content-length", str(len(body)))]
    conn.send_headers(sid, hs, end_stream=not body)
    while body:
        room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        if room <= 0:
            event = asyncio.Event()
            waiters.setdefault(id(conn), []).append(event)
            writer.write(conn.data_to_send())
            await event.wait()
            continue
        chunk, body = body[:room], body[room:]
        conn.send_data(sid, chunk, end_stream=not body)
    writer.write(conn.data_to_send())

async def handle(conn, writer, sid, headers, body, peer_cert):
    global active
    path = headers.get(":path", "")
    if path.startswith("/stats"):
        body = stats if path == "/stats" else {"maxConcurrent": stats["maxConcurrent"], "requests": []}
        if path != "/stats": body["count"] = len(stats["requests"])
        await respond(conn, writer, sid, 200, [("content-type", "application/json")], json.dumps(body).encode())
        return
    stats["requests"].append({"path": path, "method": headers.get(":method"),
        "headers": {k: v for k, v in headers.items() if not k.startswith(":")},
        "body": body.decode("utf-8", "replace"), "clientCert": peer_cert})
    if args.delay: await asyncio.sleep(args.delay)
    token = path.rsplit("/", 1)[-1]
    entry = script.get(token, {})
    apns_id = headers.get("apns-id") or str(uuid.uuid4())
    out = [("apns-id", apns_id)]
    status = entry.get("status", 200)
    reason = entry.get("reason")
    if entry.get("expireFirstToken"):
        auth = headers.get("authorization", "")
        first = first_auth.setdefault(token, auth)
        status, reason = (403, "ExpiredProviderToken") if auth == first else (200, None)
    if status == 200:
        if "uniqueId" in entry: out.append(("apns-unique-id", entry["uniqueId"]))
        await respond(conn, writer, sid, 200, out, b"")
    else:
        if "retryAfter" in entry: out.append(("retry-after", str(entry["retryAfter"])))
        obj = {"reason": reason}
        if "timestamp" in entry: obj["timestamp"] = entry["timestamp"]
        await respond(conn, writer, sid, status, out + [("content-type", "application/json")], json.dumps(obj).encode())
    active -= 1

async def client(reader, writer):
    global active
    sslobj = writer.get_extra_info("ssl_object")
    peer_cert = bool(sslobj and sslobj.getpeercert())
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.local_settings = h2.settings.Settings(client=False, initial_values={
        h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: args.max_streams})
    conn.initiate_connection()
    writer.write(conn.data_to_send())
    pending = {}
    tasks = set()
    while True:
        data = await reader.read(65536)
        if not data: break
        try:
            events = conn.receive_data(data)
        except Exception as e:
            print("protocol error", e, file=sys.stderr, flush=True)
            writer.write(conn.data_to_send()); break
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                hs = dict(ev.headers)
                pending[ev.stream_id] = [hs, b""]
                if not hs.get(":path", "").startswith("/stats"):
                    active += 1
                    stats["maxConcurrent"] = max(stats["maxConcurrent"], active)
            elif isinstance(ev, h2.events.DataReceived):
                pending[ev.stream_id][1] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                hs, body = pending.pop(ev.stream_id)
                t = asyncio.ensure_future(handle(conn, writer, ev.stream_id, hs, body, peer_cert))
                tasks.add(t); t.add_done_callback(tasks.discard)
            elif isinstance(ev, h2.events.WindowUpdated):
                for event in waiters.pop(id(conn), []): event.set()
        writer.write(conn.data_to_send())
    waiters.pop(id(conn), None)
    writer.close()

async def main():
    ctx = None
    if args.cert:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["h2"])
        if args.client_ca:
            ctx.load_verify_locations(args.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
    server = await asyncio.start_server(client, "127.0.0.1", 0, ssl=ctx)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
