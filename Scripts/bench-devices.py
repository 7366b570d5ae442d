#!/usr/bin/env python3
"""Simulated apns-sim devices for benchmarks: registers N devices (POST /sim/devices), holds every
notification stream (GET /sim/devices/{token}/notifications, Server-Sent Events) and counts the events.

Prints {"ready": N, "seconds": S} once every stream is connected (tokens written to --tokens-out), and
{"events": N, "connected": N} when it gets SIGTERM. Standard library only (asyncio)."""
import argparse, asyncio, json, resource, signal, sys, time


async def http_request(reader, writer, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    writer.write((f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n").encode() + data)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    payload = await reader.readexactly(length) if length else b""
    return status, payload


async def register(host, port, count, topic, workers=16):
    tokens = []

    async def worker(n):
        reader, writer = await asyncio.open_connection(host, port)
        for _ in range(n):
            status, payload = await http_request(reader, writer, "POST", "/sim/devices",
                                                 {"topic": topic, "environment": "sandbox"})
            if status != 201:
                raise RuntimeError(f"registration: HTTP {status}")
            tokens.append(json.loads(payload)["deviceToken"])
        writer.close()

    per = [count // workers + (1 if i < count % workers else 0) for i in range(workers)]
    await asyncio.gather(*(worker(n) for n in per if n))
    return tokens


class Streams:
    def __init__(self):
        self.events = 0
        self.connected = 0
        self.writers = []

    async def hold(self, host, port, token, ready):
        reader, writer = await asyncio.open_connection(host, port)
        self.writers.append(writer)
        writer.write(f"GET /sim/devices/{token}/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Accept: text/event-stream\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if int(head.split(b" ", 2)[1]) != 200:
            raise RuntimeError("notification stream refused")
        self.connected += 1
        ready.release()
        tail = b""
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                self.connected -= 1
                return
            buf = tail + chunk
            self.events += buf.count(b"data:")
            tail = chunk[-4:]


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sim", required=True, help="device API host:port")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--topic", default="com.example.signalfetch")
    parser.add_argument("--tokens-out")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = args.sim.rsplit(":", 1)
    port = int(port)
    start = time.monotonic()
    tokens = await register(host, port, args.count, args.topic)
    if args.tokens_out:
        with open(args.tokens_out, "w") as f:
            f.write("\n".join(tokens) + "\n")
    streams = Streams()
    ready = asyncio.Semaphore(0)
    gate = asyncio.Semaphore(200)  # connect at most 200 at a time (listen backlogs are finite)
    tasks = []

    async def connect(token):
        async with gate:
            local = asyncio.Semaphore(0)
            task = asyncio.create_task(streams.hold(host, port, token, local))
            tasks.append(task)
            waiter = asyncio.create_task(local.acquire())
            done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task in done and task.exception():
                waiter.cancel()
                raise task.exception()
            ready.release()

    await asyncio.gather(*(connect(t) for t in tokens))
    print(json.dumps({"ready": streams.connected, "seconds": round(time.monotonic() - start, 2)}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    print(json.dumps({"events": streams.events, "connected": streams.connected}), flush=True)
    for writer in streams.writers:
        writer.transport.abort()
    sys.exit(0)


if __name__ == "__main__":
    asyncio.run(main())
