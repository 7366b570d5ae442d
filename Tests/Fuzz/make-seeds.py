# Writes the seed corpora of Tests/Fuzz/<target>/ (run from Tests/Fuzz with the test venv's python3).
# The JWT seeds are signed with the fixed key the jwt target verifies with.
import os, json, base64, time
from cryptography.hazmat.primitives import serialization, hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils
root = "."
def put(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    if isinstance(data, str): data = data.encode()
    open(os.path.join(root, target, name), "wb").write(data)

# payload guard and apns-sim scan
payloads = {
    "badge": '{"aps":{"badge":3,"content-available":1},"acct":"Ab-_09","st":"0123456789abcdef-42"}',
    "background": '{"aps":{"content-available":1}}',
    "nested": '{"aps":{"alert":{"title":"x","body":"y"},"sound":"default"},"custom":[1,2.5,true,null,"s\\u00e9"]}',
    "escapes": '{"aps":{"badge":1},"st":"a\\"b\\\\c\\n"}',
    "duplicate": '{"aps":{"badge":1},"aps":{"badge":2}}',
    "number-edges": '{"aps":{"badge":1e2,"content-available":1.0}}',
    "deep": '{"a":' * 20 + '1' + '}' * 20,
    "not-object": '[1,2,3]',
    "empty": '',
    "whitespace": ' \n\t{ "aps" : { "content-available" : 1 } } ',
}
for name, text in payloads.items():
    put("payload-guard", name, text); put("payload-check", name, text)

# API bodies: first byte picks the operation
ops = {0: ['{"username":"fuzz","password":"fuzz-password","deviceName":"d"}', '{"username":1}'],
       1: ['{"token":"' + "cd" * 32 + '","topic":"com.example.fuzz","environment":"sandbox"}',
           '{"token":"zz","topic":"com.other","environment":"staging","x":1}'],
       2: ['{"seen":true,"flagged":false,"mailbox":"archive"}', '{"mailbox":7}'],
       3: ['{"to":"fuzz","from":"a@example.com","subject":"s","body":"b"}', '{"to":"nobody","from":"","subject":"","body":""}'],
       4: ['since=0000000000000000-0&max=5', 'since=&max=-1'],
       5: ['mailbox=inbox&limit=2', 'cursor=&limit=99999'],
       6: ['cd' * 32, '..%2f'],
       7: ['{id}', 'missing'],
       8: ['nothing'],
       9: ['']}
for op, bodies in ops.items():
    for i, body in enumerate(bodies):
        put("api-bodies", f"op{op}-{i}", bytes([op]) + body.encode())

# state strings
for i, s in enumerate(["0123456789abcdef-0", "0123456789abcdef-9223372036854775807", "0123456789ABCDEF-1",
                       "0123456789abcdef-01", "-1", "0123456789abcdef-", "0123456789abcdef--1"]):
    put("state", f"s{i}", s)

# JWTs with the fixed key
pem = b"""-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgeea6W2AEi+1nz2Ie
53OHE+VcFug14dCo0z04VZMtJC2hRANCAASJgCyQiFj/Zoonql3HQT0fOVk/+VYi
4pDsyeY8jIWGKgbALcnYEfglshj5OsE72nc7mL9+y+1NqfoTlopAjrOW
-----END PRIVATE KEY-----"""
key = serialization.load_pem_private_key(pem, None)
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def jwt(header, claims):
    signing = b64(json.dumps(header, separators=(",", ":")).encode()) + "." + b64(json.dumps(claims, separators=(",", ":")).encode())
    der = key.sign(signing.encode(), ec.ECDSA(hashes.SHA256()))
    r, s = utils.decode_dss_signature(der)
    return signing + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
put("jwt", "valid", jwt({"alg": "ES256", "kid": "FUZZKEY123"}, {"iss": "FUZZTEAM12", "iat": 1799999000}))
put("jwt", "other-kid", jwt({"alg": "ES256", "kid": "OTHER"}, {"iss": "FUZZTEAM12", "iat": 1799999000}))
put("jwt", "alg-none", b64(b'{"alg":"none","kid":"FUZZKEY123"}') + "." + b64(b'{"iss":"FUZZTEAM12","iat":1}') + ".")
put("jwt", "string-iat", jwt({"alg": "ES256", "kid": "FUZZKEY123"}, {"iss": "FUZZTEAM12", "iat": "1799999000"}))
put("jwt", "garbage", "a.b.c")

# Server-Sent Events
put("sse", "basic", "event: message\ndata: {\"a\":1}\nid: 7\n\n: comment\ndata: two\ndata: lines\n\n")
put("sse", "crlf", "data: x\r\n\r\nretry: 1500\r\nid\r\ndata\r\n\r\n")
put("sse", "bom", "\ufeffdata: first\n\ndata:no-space\nevent:\n\n")
put("sse", "partial", "data: never ended")

# APNs responses: first byte is where the body ends
for i, (body, retry) in enumerate([('{"reason":"BadDeviceToken"}', ""), ('{"reason":"Unregistered","timestamp":1700000000000}', "120"),
                                    ('{"reason":"\u0001\u00ffweird"}', "Wed, 21 Oct 2026 07:28:00 GMT"), ("not json", "-5")]):
    b = body.encode()
    put("apns-response", f"r{i}", bytes([len(b) % 256]) + b + retry.encode())

# provider requests ({token} and {jwt} are substituted by the target)
heads = [
    "POST /3/device/{token}\nauthorization: bearer {jwt}\napns-topic: com.example.fuzz\napns-push-type: background\napns-priority: 5\n\n{\"aps\":{\"content-available\":1}}",
    "POST /3/device/{token}\nauthorization: bearer {jwt}\napns-topic: com.example.fuzz\napns-push-type: alert\napns-collapse-id: sync\napns-expiration: 0\n\n{\"aps\":{\"badge\":2}}",
    "POST /3/device/abc\nauthorization: bearer x\n\n{}",
    "GET /3/device/{token}\n\n",
    "POST /3/device/{token}\nauthorization: bearer {jwt}\napns-topic: com.example.fuzz\napns-topic: com.example.fuzz\napns-id: 123e4567-e89b-12d3-a456-426655440000\n\n[]",
]
for i, h in enumerate(heads): put("provider-request", f"p{i}", h)

# HTTP/2 frames after the client preface: SETTINGS, HEADERS (HPACK literal), DATA, PING, GOAWAY
def frame(t, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([t, flags]) + stream.to_bytes(4, "big") + payload
def lit(name, value):
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value
hdrs = lit(b":method", b"POST") + lit(b":path", b"/") + lit(b":scheme", b"http") + lit(b":authority", b"x")
put("http2-frames", "get", frame(4, 0, 0, b"") + frame(1, 0x5, 1, hdrs))
put("http2-frames", "post", frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64") + frame(1, 0x4, 1, hdrs) + frame(0, 0x1, 1, b"hello"))
put("http2-frames", "ping-goaway", frame(4, 0, 0, b"") + frame(6, 0, 0, b"12345678") + frame(7, 0, 0, b"\x00\x00\x00\x00\x00\x00\x00\x00"))
put("http2-frames", "bad-stream", frame(4, 0, 0, b"") + frame(0, 0x1, 2, b"data on an idle even stream"))
put("http2-frames", "window", frame(4, 0, 0, b"") + frame(8, 0, 0, b"\x7f\xff\xff\xff") + frame(3, 0, 1, b"\x00\x00\x00\x08"))

# HTTP/1.1 requests to mailboxd's router
reqs = [
    "POST /v1/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n{\"username\":\"fuzz\",\"password\":\"fuzz-password\",\"deviceName\":\"d\"}",
    "GET /v1/changes?since=0000000000000000-0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-session-token\r\n\r\n",
    "PATCH /v1/messages/x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-session-token\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"see\r\n0\r\n\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /v1/deliveries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer fuzz-delivery-token\r\nContent-Length: 3\r\n\r\n{\"t",
]
for i, r in enumerate(reqs): put("http1-requests", f"h{i}", r)

# IMAP sessions over the fuzz target's in-memory mailbox (password "pw").
imap = {
    "login-select-fetch": "a LOGIN u pw\r\nb SELECT INBOX\r\nc FETCH 1:* (FLAGS UID RFC822.SIZE ENVELOPE BODYSTRUCTURE)\r\n"
                          "d UID FETCH 7 (BODY.PEEK[1] BODY[2.MIME] BODY[HEADER.FIELDS (SUBJECT)]<0.5>)\r\ne LOGOUT\r\n",
    "literals": "a LOGIN {1}\r\nu {2+}\r\npw\r\nb LIST \"\" *\r\nc STATUS INBOX (MESSAGES UIDNEXT UNSEEN)\r\n",
    "store-move-expunge": "a AUTHENTICATE PLAIN AHUAcHc=\r\nb SELECT INBOX (CONDSTORE)\r\n"
                          "c UID STORE 3 (UNCHANGEDSINCE 5) +FLAGS.SILENT (\\Seen \\Deleted)\r\nd UID MOVE 7 Archive\r\n"
                          "e EXPUNGE\r\nf CLOSE\r\n",
    "qresync-idle-search": "a LOGIN u pw\r\nb ENABLE QRESYNC\r\nc SELECT INBOX (QRESYNC (42 1 1:9))\r\n"
                           "d UID SEARCH OR SEEN NOT FLAGGED MODSEQ 2\r\ne SEARCH RETURN () 1:*\r\nf IDLE\r\nDONE\r\n",
    "append-copy-search": "a LOGIN u pw\r\nb SELECT INBOX\r\n"
                          "c APPEND Archive (\\Seen) \"05-Dec-2026 19:01:31 +0100\" {21}\r\nSubject: hi\r\n\r\nbody\r\n\r\n"
                          "d APPEND INBOX {5+}\r\nhello\r\ne UID COPY 3,7 Archive\r\nf COPY 1 Nowhere\r\n"
                          "g SEARCH CHARSET UTF-8 OR FROM a SUBJECT \"hello\" NOT BODY x SINCE 1-Feb-2026 LARGER 3\r\n"
                          "h UID SEARCH RETURN (MIN MAX COUNT) HEADER X-A \"\" SENTBEFORE 1-Jan-2100 TEXT body\r\n",
    "refusals": "a FETCH 1 FLAGS\r\nb LOGIN {4096}\r\nc " + "x" * 600 + "\r\nd NOOP\r\ne LOGIN {9999+}\r\nxx",
    "garbage": "\r\n* \r\n(((\r\na \"unterminated\r\nb LOGIN \"\\q\" x\r\n",
}
for name, text in imap.items():
    put("imap", name, text)

# websocket: a JMAP WebSocket's opening handshake, then client frames (masked, as RFC 6455 §5.3 requires)
ws_head = (b"GET /jmap/ws HTTP/1.1\r\nHost: 127.0.0.1:8444\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: jmap\r\n\r\n")
def ws_frame(op, payload, fin=True, masked=True):
    n = len(payload)
    mask = 0x80 if masked else 0
    out = bytes([(0x80 if fin else 0) | op])
    if n < 126: out += bytes([mask | n])
    elif n < 65536: out += bytes([mask | 126]) + n.to_bytes(2, "big")
    else: out += bytes([mask | 127]) + n.to_bytes(8, "big")
    if not masked: return out + payload
    key = b"\x12\x34\x56\x78"
    return out + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))
ws_request = json.dumps({"@type": "Request", "id": "r1", "using": ["urn:ietf:params:jmap:core"],
                         "methodCalls": [["Core/echo", {}, "e"]]}).encode()
for name, data in {
    "request": ws_head + ws_frame(1, ws_request),
    "push-enable": ws_head + ws_frame(1, b'{"@type":"WebSocketPushEnable","dataTypes":null,"pushState":"x"}')
                   + ws_frame(1, b'{"@type":"WebSocketPushDisable"}'),
    "fragmented-with-ping": ws_head + ws_frame(1, ws_request[:10], fin=False) + ws_frame(9, b"ping")
                            + ws_frame(0, ws_request[10:]),
    "close": ws_head + ws_frame(8, b"\x03\xe8bye"),
    "binary-and-unmasked": ws_head + ws_frame(2, b"\x00\x01") + ws_frame(1, b"hi", masked=False),
    "not-json-and-bad-utf8": ws_head + ws_frame(1, b"not json") + ws_frame(1, b"\xc3\x28"),
    "pipelined-head-only": ws_head,
    "garbage": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(40)),
}.items():
    put("websocket", name, data)
