"""A browser on Mozilla's WebSocket push protocol for the webpush-sim tests, as Firefox speaks it
(websocket-client for the socket, its own P-256 keys, http_ece to decrypt, pywebpush as the sender).

Usage: webpush_mozilla.py PLAN.json — PLAN is {"url": "ws://HOST:PORT/", "vapidKeyFile": PEM of the application
server's key, "applicationServerKey": its public point (base64url), "abuse"?: true}. Runs: hello, register with the key (padded
base64url, as Firefox sends it), a push that arrives as a notification and decrypts, an ack; a push left unacked
and sent again after a reconnect with the uaid; unregister, then a push that gets 410. Prints one JSON line per
step: {"case", …}. With "abuse", then on fresh sockets: a binary frame, a 70 KB frame, a register before hello
and a frame that is not JSON, each reported with the close status the server sent ({"case": "abuse-…",
"closeStatus"}).
"""
import base64
import json
import sys
import uuid
from urllib.parse import urlparse

import http_ece
import websocket
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02
from pywebpush import WebPushException, webpush

plan = json.load(open(sys.argv[1]))
vapid = Vapid02.from_file(plan["vapidKeyFile"])


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def report(case, **fields):
    print(json.dumps({"case": case, **fields}), flush=True)


def connect():
    return websocket.create_connection(plan["url"], subprotocols=["push-notification"], timeout=10)


def exchange(socket, message):
    socket.send(json.dumps(message))
    return json.loads(socket.recv())


private_key = ec.generate_private_key(ec.SECP256R1())
public_point = private_key.public_key().public_bytes(
    serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
auth = uuid.uuid4().bytes


def push(endpoint, text, ttl=60):
    target = urlparse(endpoint)
    subscription = {"endpoint": endpoint, "keys": {"p256dh": b64url(public_point), "auth": b64url(auth)}}
    claims = {"sub": "mailto:ops@example.com", "aud": f"{target.scheme}://{target.netloc}"}
    try:
        return webpush(subscription, data=text, ttl=ttl, vapid_private_key=vapid, vapid_claims=claims,
                       timeout=10).status_code
    except WebPushException as error:
        return error.response.status_code


def decrypt(notification):
    body = unb64url(notification["data"])
    return http_ece.decrypt(body, private_key=private_key, auth_secret=auth, version="aes128gcm").decode()


socket = connect()
hello = exchange(socket, {"messageType": "hello", "broadcasts": {}, "use_webpush": True})
uaid = hello.get("uaid")
report("hello", status=hello.get("status"), uaid=uaid, use_webpush=hello.get("use_webpush"),
       broadcasts=hello.get("broadcasts"))

channel = str(uuid.uuid4())
padded_key = base64.urlsafe_b64encode(unb64url(plan["applicationServerKey"])).decode()
register = exchange(socket, {"channelID": channel, "messageType": "register", "key": padded_key})
endpoint = register.get("pushEndpoint")
report("register", status=register.get("status"), channelID=register.get("channelID"), endpoint=endpoint)

status = push(endpoint, "first signal")
notification = json.loads(socket.recv())
report("notification", pushStatus=status, messageType=notification.get("messageType"),
       channelID=notification.get("channelID"), headers=notification.get("headers"),
       plaintext=decrypt(notification))
socket.send(json.dumps({"messageType": "ack", "updates": [
    {"channelID": channel, "version": notification["version"], "code": 100}]}))

ping = exchange(socket, {})
report("ping", answer=ping)
# A 20 KB frame arrives in pieces on the server (its receive buffer is 4 KB) and is read whole.
large = exchange(socket, {"messageType": "ping", "padding": "p" * 20_000})
report("largePing", answer=large)

status = push(endpoint, "unacked signal")
unacked = json.loads(socket.recv())
socket.close()
socket = connect()
again = exchange(socket, {"messageType": "hello", "uaid": uaid, "channelIDs": [channel], "use_webpush": True,
                          "broadcasts": {}})
redelivered = json.loads(socket.recv())
report("redelivered", pushStatus=status, uaid=again.get("uaid"), sameVersion=redelivered.get("version") ==
       unacked.get("version"), plaintext=decrypt(redelivered))
socket.send(json.dumps({"messageType": "ack", "updates": [
    {"channelID": channel, "version": redelivered["version"], "code": 100}]}))

unregister = exchange(socket, {"messageType": "unregister", "channelID": channel, "code": 200})
report("unregister", status=unregister.get("status"), pushStatus=push(endpoint, "too late"))
socket.close()

if plan.get("abuse"):
    def close_status(send):
        probe = connect()
        send(probe)
        try:
            while True:
                opcode, data = probe.recv_data(control_frame=True)
                if opcode == websocket.ABNF.OPCODE_CLOSE:
                    return int.from_bytes(data[:2], "big") if len(data) >= 2 else None
        except websocket.WebSocketConnectionClosedException:
            return None
        finally:
            probe.close()

    report("abuse-binary", closeStatus=close_status(lambda probe: probe.send_binary(b"\x00\x01")))
    report("abuse-oversize", closeStatus=close_status(lambda probe: probe.send("x" * 70_000)))
    report("abuse-beforeHello", closeStatus=close_status(lambda probe: probe.send(json.dumps(
        {"messageType": "register", "channelID": str(uuid.uuid4())}))))
    report("abuse-notJSON", closeStatus=close_status(lambda probe: probe.send("hello?")))

