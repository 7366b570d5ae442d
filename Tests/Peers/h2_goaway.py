"""A Python peer for APNsSimulatorTests: a raw h2 client opens streams until apns-sim's GOAWAY fault ends the connection. Arguments: port, path, authorization, topic."""
import json, socket, sys
import h2.config, h2.connection, h2.events

port, path, auth, topic = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
conn.initiate_connection()
sock.sendall(conn.data_to_send())
statuses, goaway = [], None
for n in range(3):
    if goaway is not None:
        break
    stream = conn.get_next_available_stream_id()
    conn.send_headers(stream, [(":method", "POST"), (":scheme", "http"), (":authority", "sim"),
                               (":path", path), ("authorization", auth), ("apns-topic", topic)])
    conn.send_data(stream, b'{"aps":{"badge":1}}', end_stream=True)
    sock.sendall(conn.data_to_send())
    done = False
    while not done:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                statuses.append(int(dict(event.headers)[b":status"]))
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                done = True
            elif isinstance(event, h2.events.ConnectionTerminated):
                goaway = {"afterResponses": len(statuses), "lastStreamId": event.last_stream_id,
                          "debug": (event.additional_data or b"").decode()}
        sock.sendall(conn.data_to_send())
    if goaway is None:
        sock.settimeout(0.5)
        try:
            data = sock.recv(65536)
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ConnectionTerminated):
                    goaway = {"afterResponses": len(statuses), "lastStreamId": event.last_stream_id,
                              "debug": (event.additional_data or b"").decode()}
        except socket.timeout:
            pass
        sock.settimeout(10)
print(json.dumps({"statuses": statuses, "goaway": goaway}))
