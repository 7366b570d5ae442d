"""A raw HTTP/1.1 peer for the framing tests: sends the bytes read from standard input to 127.0.0.1:PORT as they
are (over TLS when a CA file is given), then reads until the server closes the connection or 10 seconds pass.
Arguments: port [CA]. Prints {"received": <text>, "closed": <bool>} as JSON."""
import json, socket, ssl, sys

port = int(sys.argv[1])
ca = sys.argv[2] if len(sys.argv) > 2 else None
payload = sys.stdin.buffer.read()
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
if ca:
    sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="localhost")
sock.sendall(payload)
received, closed = b"", False
try:
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            closed = True
            break
        received += chunk
except (socket.timeout, TimeoutError):
    pass
except (ConnectionResetError, ssl.SSLError):
    closed = True
print(json.dumps({"received": received.decode("utf-8", "replace"), "closed": closed}))
