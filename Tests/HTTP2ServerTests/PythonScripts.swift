/// Python peers used by the tests (written into a temporary directory and run with the test venv).
enum PythonScripts {
    /// HTTP/2 over TLS with Python's `ssl` and `h2`, deliberately offering no ALPN (as aioapns does).
    /// Arguments: port, CA file. Prints `alpn`, `status` and `body` lines.
    static let noALPN = """
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
        """

    /// httpx with HTTP/2. Arguments: `tls URL CA` or `h2c URL`. Prints `<http_version> <status> <body>`.
    static let httpx = """
        import sys
        import httpx

        mode, url = sys.argv[1], sys.argv[2]
        if mode == "tls":
            client = httpx.Client(http2=True, verify=sys.argv[3])
        else:
            client = httpx.Client(http1=False, http2=True)
        with client:
            response = client.post(url, content=b"ping" * 8)
            print(response.http_version, response.status_code, response.text)
        """

    /// Uploads a body of unknown length (no content-length) over h2c. Arguments: URL, size.
    /// Prints `<status> <body>`, or `error <type>` if the exchange failed.
    static let streamingUpload = """
        import sys
        import httpx

        url, size = sys.argv[1], int(sys.argv[2])

        def chunks():
            sent = 0
            while sent < size:
                piece = min(16384, size - sent)
                sent += piece
                yield b"x" * piece

        with httpx.Client(http1=False, http2=True) as client:
            try:
                response = client.post(url, content=chunks())
                print(response.status_code, response.text)
            except Exception as error:
                print("error", type(error).__name__)
        """

    /// Makes one h2c request, then stays silent and reports how the server ends the connection.
    /// Arguments: port. Prints `status`, then `goaway <error code>` and/or `closed` (or `timeout`).
    static let idle = """
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
        """
}
