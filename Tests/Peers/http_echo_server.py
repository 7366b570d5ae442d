r"""A small threaded HTTP/1.1 server, the real peer of the HTTPClient tests (HTTP/1.1, streaming, lifecycle).

Usage: http_echo_server.py — binds 127.0.0.1 port 0 and prints the port on its first line of output. Routes:
- any method on /echo: {"method", "path", "headers": [[name, value], …], "body"} as JSON;
- /delay?ms=N: answers `delayed` after N milliseconds (1000 without ms);
- /gated: sends `first\n`, waits until /release is requested, then sends `second\n` (chunked);
- /release: opens the gate of /gated;
- /sse: a short Server-Sent Events stream with comments, multi-line data, ids, then ends;
- /sse-forever: one event, then a comment heartbeat every 50 ms until the client goes away;
- /stats: {"openStreams": N, "delaying": M}, the number of /sse-forever responses still being written and of
  /delay requests still waiting to answer.
Fixed-length answers carry `X-Echo-Server: yes`; anything else is a 404 with `{}`.
"""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

gate = threading.Event()
lock = threading.Lock()
open_streams = 0
delaying = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Echo-Server", "yes")
        self.end_headers()
        self.wfile.write(body)

    def start_chunked(self, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def handle_any(self):
        global open_streams, delaying
        url = urlparse(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/echo":
            payload = {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": body.decode("utf-8", "replace"),
            }
            self.send_body(200, json.dumps(payload).encode())
        elif url.path == "/delay":
            with lock:
                delaying += 1
            try:
                time.sleep(int(query.get("ms", ["1000"])[0]) / 1000)
            finally:
                with lock:
                    delaying -= 1
            self.send_body(200, b"delayed", "text/plain")
        elif url.path == "/gated":
            gate.clear()
            self.start_chunked("text/plain")
            self.chunk(b"first\n")
            gate.wait(30)
            self.chunk(b"second\n")
            self.end_chunks()
        elif url.path == "/release":
            gate.set()
            self.send_body(200, b"released", "text/plain")
        elif url.path == "/sse":
            self.start_chunked("text/event-stream")
            self.chunk(b": comment line\n\n")
            self.chunk(b"event: greeting\nid: 1\ndata: hello\n\n")
            self.chunk(b"data: line one\ndata: line two\n\n")
            self.chunk(b"id: 2\nevent: done\ndata: {\"n\":")
            self.chunk(b" 2}\n\n")
            self.end_chunks()
        elif url.path == "/sse-forever":
            with lock:
                open_streams += 1
            try:
                self.start_chunked("text/event-stream")
                self.chunk(b"data: ready\n\n")
                while True:
                    time.sleep(0.05)
                    self.chunk(b": heartbeat\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with lock:
                    open_streams -= 1
                self.close_connection = True
        elif url.path == "/stats":
            with lock:
                stats = {"openStreams": open_streams, "delaying": delaying}
            self.send_body(200, json.dumps(stats).encode())
        else:
            self.send_body(404, b"{}")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
