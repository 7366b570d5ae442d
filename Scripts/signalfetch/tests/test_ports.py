"""Servers the harness starts bind port 0 and the harness reads the ports they got from the line they write, rather
than picking a port first (a port picked and released can be taken by another process before the server binds it)."""
import socket, sys, tempfile, textwrap, unittest

from signalfetch import harness

# A server as our binaries are one: it binds port 0, then names the port it got on standard error.
SERVER = textwrap.dedent("""
    import signal, socket, sys
    provider, device = socket.socket(), socket.socket()
    for s in (provider, device):
        s.bind(("127.0.0.1", 0))
        s.listen()
    print("starting up", file=sys.stderr, flush=True)
    print(f"fake-sim listening provider=127.0.0.1:{provider.getsockname()[1]} "
          f"device=127.0.0.1:{device.getsockname()[1]}", file=sys.stderr, flush=True)
    signal.pause()
""")


class ListeningLines(unittest.TestCase):
    def test_each_form_of_a_listening_line_gives_its_ports(self):
        self.assertEqual(harness.parse_ports("apns-sim listening provider=127.0.0.1:4431 device=127.0.0.1:8081 "
                                             "sandbox=127.0.0.1:4432\n"),
                         {"provider": 4431, "device": 8081, "sandbox": 4432})
        self.assertEqual(harness.parse_ports("mailboxd listening on https://127.0.0.1:8443 (data /tmp/d, store x)"),
                         {"url": 8443})
        self.assertEqual(harness.parse_ports("mailboxd: metrics on http://127.0.0.1:9100/metrics"), {"url": 9100})
        self.assertEqual(harness.parse_ports("mailboxd: LMTP on 127.0.0.1:2424 as mx.example"), {"address": 2424})
        self.assertEqual(harness.parse_ports("mailboxd: IMAP on imaps://[::1]:9933"), {"url": 9933})
        self.assertEqual(harness.parse_ports("mailboxd: JMAP WebSocket on wss://127.0.0.1:8887/jmap/ws"),
                         {"url": 8887})
        self.assertEqual(harness.parse_ports("nothing to see: here"), {})


class ReadingPortsBack(unittest.TestCase):
    def test_the_ports_a_server_names_are_the_ones_it_listens_on(self):
        work = tempfile.mkdtemp()
        proc = harness.Proc("fake-sim", [sys.executable, "-c", SERVER], work)
        try:
            ports = proc.listening_ports("fake-sim listening ")
            self.assertEqual(set(ports), {"provider", "device"})
            for port in ports.values():
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
        finally:
            proc.stop()

    def test_a_server_started_again_is_read_from_its_own_lines(self):
        work = tempfile.mkdtemp()
        first = harness.Proc("fake-sim", [sys.executable, "-c", SERVER], work)
        try:
            old = first.listening_ports("fake-sim listening ")
        finally:
            first.stop()
        # The second run appends to the same file: the first run's line must not be taken for its own.
        second = harness.Proc("fake-sim", [sys.executable, "-c", "import time, sys; time.sleep(0.3); " + SERVER], work)
        try:
            new = second.listening_ports("fake-sim listening ")
            for port in new.values():
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
            self.assertEqual(set(new), set(old))
        finally:
            second.stop()

    def test_a_server_that_exits_before_listening_is_an_error_naming_it(self):
        work = tempfile.mkdtemp()
        proc = harness.Proc("broken-sim", [sys.executable, "-c", "import sys; sys.exit('bad flag')"], work)
        with self.assertRaises(RuntimeError) as raised:
            proc.listening_ports("broken-sim listening ")
        self.assertIn("broken-sim exited", str(raised.exception))
        self.assertIn("bad flag", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
