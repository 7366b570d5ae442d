"""Holds idle TLS connections to a server, as many awake devices would.

Usage: hold_tls_connections.py HOST PORT CA_FILE COUNT

Opens COUNT connections, completes each TLS handshake (verifying the server against CA_FILE), sends nothing, and
prints "held COUNT". On SIGTERM it looks at every connection without blocking and prints one JSON line,
{"open": N, "closed": M}: a connection is closed when the server ended it (end of stream, TLS close or a reset).
Exit status 0, or 1 if the connections could not all be opened.
"""
import json
import resource
import select
import signal
import socket
import ssl
import sys


def still_open(connection):
    """Whether the server has not ended this connection; never blocks."""
    try:
        poller = select.poll()
        poller.register(connection, select.POLLIN)
        if not poller.poll(0) and connection.pending() == 0:
            return True
        connection.setblocking(False)
        return connection.recv(1) != b""
    except (ssl.SSLWantReadError, BlockingIOError):
        return True
    except (OSError, ssl.SSLError):
        return False


def main():
    host, port, ca_file, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 256)), hard))
    context = ssl.create_default_context(cafile=ca_file)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    held = []
    for index in range(count):
        try:
            raw = socket.create_connection((host, port), timeout=30)
            held.append(context.wrap_socket(raw, server_hostname=host))
        except OSError as error:
            print(f"connection {index + 1} of {count} failed: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
    print(f"held {len(held)}", flush=True)
    signal.sigwait([signal.SIGTERM])
    open_count = sum(1 for connection in held if still_open(connection))
    print(json.dumps({"open": open_count, "closed": len(held) - open_count}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
