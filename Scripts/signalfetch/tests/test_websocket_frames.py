"""The jmap-ws benchmark's clients write RFC 6455 framing themselves: each frame they send is masked and reads back as
it was written, at every length encoding; a partial frame stays in the buffer until the rest arrives; fragments are
joined and control frames come out between them."""
import base64, hashlib, struct, unittest

from signalfetch.bench import jmap_ws


def server_frame(payload, opcode=0x1, fin=True):
    """An unmasked frame, as a server sends it."""
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 65536:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


class Frames(unittest.TestCase):
    def test_a_client_frame_is_masked_and_reads_back_at_every_length(self):
        for size in (0, 1, 125, 126, 65535, 65536, 70000):
            payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
            sent = jmap_ws.frame(payload)
            self.assertTrue(sent[1] & 0x80, "a client frame must be masked")
            if size >= 4:
                self.assertNotIn(payload, sent)
            buffer = bytearray(sent)
            self.assertEqual(jmap_ws.split_frames(buffer), [(True, 0x1, payload)])
            self.assertEqual(buffer, bytearray())

    def test_a_partial_frame_waits_for_the_rest(self):
        whole = server_frame(b"x" * 300)
        buffer = bytearray(whole[:3])
        self.assertEqual(jmap_ws.split_frames(buffer), [])
        buffer += whole[3:200]
        self.assertEqual(jmap_ws.split_frames(buffer), [])
        buffer += whole[200:] + server_frame(b"next")[:1]
        self.assertEqual(jmap_ws.split_frames(buffer), [(True, 0x1, b"x" * 300)])
        self.assertEqual(len(buffer), 1)

    def test_fragments_are_joined_and_a_ping_between_them_comes_out_first(self):
        buffer = bytearray(server_frame(b'{"@type":', fin=False) + server_frame(b"hi", opcode=0x9)
                           + server_frame(b'"Response"}', opcode=0x0) + server_frame(b"\x03\xe8", opcode=0x8))
        messages = jmap_ws.Messages().feed(jmap_ws.split_frames(buffer))
        self.assertEqual(messages, [(0x9, b"hi"), (0x1, b'{"@type":"Response"}'), (0x8, b"\x03\xe8")])

    def test_the_opening_names_the_key_the_accept_is_made_from(self):
        request, accept = jmap_ws.opening(8887, "token")
        key = next(line.split(b": ", 1)[1] for line in request.split(b"\r\n")
                   if line.startswith(b"Sec-WebSocket-Key: "))
        self.assertEqual(accept, base64.b64encode(hashlib.sha1(key + jmap_ws.GUID).digest()))
        self.assertIn(b"Sec-WebSocket-Protocol: jmap\r\n", request)
        self.assertIn(b"Authorization: Bearer token\r\n", request)
        jmap_ws.check_opening(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: "
                              + accept + b"\r\nSec-WebSocket-Protocol: jmap", accept)
        with self.assertRaises(RuntimeError):
            jmap_ws.check_opening(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0", accept)


if __name__ == "__main__":
    unittest.main()
