#!/usr/bin/env python3
"""Simulated apns-sim devices for benchmarks: registers N devices (POST /sim/devices), holds every
notification stream (GET /sim/devices/{token}/notifications, Server-Sent Events) and counts the events.

Prints {"ready": N, "seconds": S} once every stream is connected (tokens written to --tokens-out), and
{"events": N, "connected": N} when it gets SIGTERM. Standard library only.

The streams are read with one epoll loop over non-blocking sockets (large reads, no per-stream task), so
the consumer costs little CPU next to the simulator it measures: every stream's chunked body is decoded
and every `data:` line of every event is counted."""
import argparse, asyncio, json, resource, select, signal, socket, sys, time


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


class Stream:
    """One notification stream: the response head, then the chunked body, decoded as it arrives."""
    __slots__ = ("sock", "head", "buf", "remaining", "crlf", "tail", "done")

    def __init__(self, sock):
        self.sock = sock
        self.head = True  # still reading the response head
        self.buf = b""  # undecoded bytes
        self.remaining = 0  # bytes left in the current chunk
        self.crlf = False  # the CRLF after a chunk's data is due
        self.tail = b""  # the last bytes of the body, so a `data:` split across reads is counted once
        self.done = False


class Devices:
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.epoll = select.epoll()
        self.streams = {}
        self.events = 0
        self.connected = 0
        self.connecting = 0

    def open(self, token):
        sock = socket.create_connection((self.host, self.port))
        sock.sendall(f"GET /sim/devices/{token}/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Accept: text/event-stream\r\n\r\n".encode())
        sock.setblocking(False)
        self.streams[sock.fileno()] = Stream(sock)
        self.epoll.register(sock.fileno(), select.EPOLLIN)
        self.connecting += 1

    def poll(self, timeout):
        for fd, _ in self.epoll.poll(timeout, 1024):
            stream = self.streams.get(fd)
            if stream is None:
                continue
            try:
                chunk = stream.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.close(fd, stream)
                continue
            self.feed(stream, chunk)

    def close(self, fd, stream):
        self.epoll.unregister(fd)
        stream.sock.close()
        del self.streams[fd]
        if stream.head:
            raise RuntimeError("notification stream closed before its response")
        self.connected -= 1

    def feed(self, stream, chunk):
        buf = stream.buf + chunk if stream.buf else chunk
        pos = 0
        if stream.head:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                stream.buf = buf
                return
            if int(buf.split(b" ", 2)[1]) != 200:
                raise RuntimeError("notification stream refused")
            stream.head = False
            self.connecting -= 1
            self.connected += 1
            pos = end + 4
        size = len(buf)
        while pos < size:
            if stream.remaining:
                take = min(stream.remaining, size - pos)
                data = stream.tail + buf[pos:pos + take]
                self.events += data.count(b"data:")
                stream.tail = data[-4:]
                pos += take
                stream.remaining -= take
                stream.crlf = stream.remaining == 0
            elif stream.crlf:
                if size - pos < 2:
                    break
                pos += 2
                stream.crlf = False
            else:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                length = int(buf[pos:end].split(b";", 1)[0], 16)
                pos = end + 2
                if length == 0:
                    stream.done = True
                    pos = size
                    break
                stream.remaining = length
        stream.buf = buf[pos:] if pos < size else b""


def main():
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
    tokens = asyncio.run(register(host, port, args.count, args.topic))
    if args.tokens_out:
        with open(args.tokens_out, "w") as f:
            f.write("\n".join(tokens) + "\n")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    devices = Devices(host, port)
    pending = list(reversed(tokens))
    while (pending or devices.connecting) and not stop:
        while pending and devices.connecting < 200:  # listen backlogs are finite
            devices.open(pending.pop())
        devices.poll(0.05)
    print(json.dumps({"ready": devices.connected, "seconds": round(time.monotonic() - start, 2)}), flush=True)
    while not stop:
        devices.poll(0.2)
    print(json.dumps({"events": devices.events, "connected": devices.connected}), flush=True)
    for stream in devices.streams.values():
        stream.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        stream.sock.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
