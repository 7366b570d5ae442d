"""Prints the SHA-256 (hex) of the certificate a TLS server at 127.0.0.1:PORT presents, for each PORT given, one per
line: which certificate a new connection gets. Nothing is verified (the point is to see the certificate, not to trust
it). Usage: tls_fingerprint.py PORT..."""

import hashlib
import socket
import ssl
import sys

context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
for port in sys.argv[1:]:
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            print(hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest(), flush=True)
