"""A Python peer for HTTP2ServerTests: Makes one h2c request, then stays silent and reports how the server ends the connection. Arguments: port. Prints `status`, then `goaway <error code>` and/or `closed` (or `timeout`)."""
import socket, sys
import h2.config, h2.connection, h2.events

port = int(sys.argv[1])
sock = socket.create_connection(("127.0.0.1", port), timeout=30)
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
stream = conn.get_next_available_stream_id()
conn.send_headers(stream, [(":method", "GET"), (":path", "/hello"), (":authority", "localhost"),
                           (":scheme", "http")], end_stream=True)
sock.sendall(conn.data_to_send())
try:
    while True:
        data = sock.recv(65535)
        if not data:
            print("closed")
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                print("status", dict(event.headers)[b":status"].decode())
            elif isinstance(event, h2.events.ConnectionTerminated):
                print("goaway", event.error_code)
        sock.sendall(conn.data_to_send())
except socket.timeout:
    print("timeout")
except ConnectionError:
    print("closed")
