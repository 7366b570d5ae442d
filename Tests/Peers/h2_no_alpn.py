"""A Python peer for HTTP2ServerTests: HTTP/2 over TLS with Python's `ssl` and `h2`, deliberately offering no ALPN (as aioapns does). Arguments: port, CA file. Prints `alpn`, `status` and `body` lines."""
import socket, ssl, sys
import h2.config, h2.connection, h2.events

port, ca = int(sys.argv[1]), sys.argv[2]
context = ssl.create_default_context(cafile=ca)  # no set_alpn_protocols on purpose
raw = socket.create_connection(("127.0.0.1", port), timeout=15)
sock = context.wrap_socket(raw, server_hostname="localhost")
print("alpn", sock.selected_alpn_protocol())
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
sock.sendall(conn.data_to_send())
stream = conn.get_next_available_stream_id()
conn.send_headers(stream, [(":method", "GET"), (":path", "/hello"), (":authority", "localhost"),
                           (":scheme", "https")], end_stream=True)
sock.sendall(conn.data_to_send())
status, body, done = None, b"", False
while not done:
    data = sock.recv(65535)
    if not data:
        break
    for event in conn.receive_data(data):
        if isinstance(event, h2.events.ResponseReceived):
            status = dict(event.headers)[b":status"].decode()
        elif isinstance(event, h2.events.DataReceived):
            body += event.data
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            done = True
    sock.sendall(conn.data_to_send())
print("status", status)
print("body", body.decode())
conn.close_connection()
sock.sendall(conn.data_to_send())
sock.close()
