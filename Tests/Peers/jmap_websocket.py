"""JMAP over WebSocket (RFC 8887) driven by two real clients: `websockets` at the frame level and jmaplib's
WebSocketClient as an application uses it.

With `websockets` it opens the socket the Session names (Basic, a bearer token, a ticket), sends a Request and reads
its Response by `requestId`, turns push on and hears a delivery as a StateChange, and sends what must be refused: a
text that is not JSON, an unknown `@type`, a binary frame (closed 1003), a message over the limit (closed 1009), a
reused ticket, no credentials and another subprotocol (HTTP 4xx, nothing opened). With jmaplib it runs a batch over
the socket and hears the next delivery through `notifications()`.

Usage: jmap_websocket.py PLAN.json — PLAN is {"api", "ca": <PEM path>, "username", "password", "deliveryUrl",
"deliveryToken", "maxMessageBytes"}. Prints one JSON object of what the clients saw, for the test to check; exits 1
after printing it (with "error") when a step could not run.
"""

import asyncio
import base64
import json
import ssl
import sys
import threading

import httpx
import websockets

from jmap.auth.credentials import BasicAuth
from jmap.client import JMAPClient
from jmap.push.websocket_client import WebSocketClient

#: How long an answer, a push or a close may take.
ARRIVAL_SECONDS = 15.0

CORE = "urn:ietf:params:jmap:core"
MAIL = "urn:ietf:params:jmap:mail"


async def refused(url: str, tls: ssl.SSLContext, **options) -> dict:
    """Opens a socket that must be refused: the HTTP status and JSON body it was refused with."""
    try:
        async with websockets.connect(url, ssl=tls, **options):
            return {"opened": True}
    except websockets.InvalidStatus as refusal:
        body = bytes(refusal.response.body or b"")
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {"raw": body.decode("utf-8", "replace")}
        return {"status": refusal.response.status_code, "body": parsed}


async def closed_by(socket, payload) -> int | None:
    """Sends `payload` and waits for the server's close: its code."""
    await socket.send(payload)
    try:
        while True:
            await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS)
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


async def frames(plan: dict, tls: ssl.SSLContext, seen: dict) -> None:
    basic = "Basic " + base64.b64encode(f"{plan['username']}:{plan['password']}".encode()).decode()
    async with httpx.AsyncClient(verify=tls, timeout=ARRIVAL_SECONDS) as http:
        session = (await http.get(plan["api"] + "/.well-known/jmap", headers={"Authorization": basic})).json()
        capability = session["capabilities"]["urn:ietf:params:jmap:websocket"]
        seen["capability"] = capability
        url = capability["url"]
        account = session["primaryAccounts"][MAIL]
        token = (
            await http.post(
                plan["api"] + "/v1/session", json={"username": plan["username"], "password": plan["password"]}
            )
        ).json()["accessToken"]

        async with websockets.connect(
            url, ssl=tls, subprotocols=["jmap"], additional_headers={"Authorization": "Bearer " + token}
        ) as socket:
            seen["subprotocol"] = socket.subprotocol
            await socket.send(
                json.dumps(
                    {
                        "@type": "Request",
                        "id": "first",
                        "using": [CORE, MAIL],
                        "methodCalls": [["Mailbox/get", {"accountId": account}, "m"]],
                    }
                )
            )
            answer = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS))
            seen["response"] = {
                "type": answer.get("@type"),
                "requestId": answer.get("requestId"),
                "method": answer["methodResponses"][0][0],
                "sameSessionState": answer.get("sessionState") == session["state"],
            }
            await socket.send("this is not JSON")
            seen["notJSON"] = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS))
            await socket.send(json.dumps({"@type": "Subscribe", "id": "odd"}))
            seen["unknownType"] = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS))

            await socket.send(json.dumps({"@type": "WebSocketPushEnable", "dataTypes": ["Email"]}))
            # A request after the enable: once it is answered, push is on.
            await socket.send(
                json.dumps({"@type": "Request", "id": "echo", "using": [CORE], "methodCalls": [["Core/echo", {}, "e"]]})
            )
            seen["afterEnable"] = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS)).get("requestId")
            delivered = await http.post(
                plan["deliveryUrl"],
                headers={"Authorization": "Bearer " + plan["deliveryToken"]},
                json={"to": plan["username"], "from": "carol@example.com", "subject": "over the socket", "body": "hi"},
            )
            seen["delivered"] = delivered.status_code
            seen["stateChange"] = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS))
            seen["binaryClose"] = await closed_by(socket, b"\x00\x01")

        async with websockets.connect(
            url, ssl=tls, subprotocols=["jmap"], additional_headers={"Authorization": basic}, max_size=None
        ) as socket:
            seen["oversizeClose"] = await closed_by(socket, "x" * (plan["maxMessageBytes"] + 1))

        ticket = (await http.post(plan["api"] + "/jmap/ws-ticket", headers={"Authorization": "Bearer " + token})).json()
        seen["ticketExpiresIn"] = ticket.get("expiresIn")
        async with websockets.connect(ticket["url"], ssl=tls, subprotocols=["jmap"]) as socket:
            await socket.send(
                json.dumps({"@type": "Request", "id": "t", "using": [CORE], "methodCalls": [["Core/echo", {}, "e"]]})
            )
            seen["ticketAnswer"] = json.loads(await asyncio.wait_for(socket.recv(), ARRIVAL_SECONDS)).get("requestId")
        seen["reusedTicket"] = await refused(ticket["url"], tls, subprotocols=["jmap"])
        seen["noCredentials"] = await refused(url, tls, subprotocols=["jmap"])
        seen["otherSubprotocol"] = await refused(
            url, tls, subprotocols=["chat"], additional_headers={"Authorization": basic}
        )
        seen["basicTicket"] = (
            await http.post(plan["api"] + "/jmap/ws-ticket", headers={"Authorization": basic})
        ).status_code


def with_jmaplib(plan: dict, tls: ssl.SSLContext, seen: dict) -> None:
    """jmaplib's WebSocketClient: a batch over the socket, then the next delivery through notifications()."""
    http = httpx.Client(verify=tls, timeout=ARRIVAL_SECONDS)
    client = JMAPClient.connect(
        plan["api"] + "/.well-known/jmap", auth=BasicAuth(plan["username"], plan["password"]), http=http
    )
    with WebSocketClient(client) as socket:
        with socket.batch() as batch:
            got = batch.mail.email.get(ids=[])
        seen["jmaplibEmailState"] = got.result.state is not None
        socket.enable_push(["Email"], resume=False)
        with socket.batch() as batch:
            batch.mail.email.get(ids=[])

        def deliver() -> None:
            httpx.post(
                plan["deliveryUrl"],
                headers={"Authorization": "Bearer " + plan["deliveryToken"]},
                json={"to": plan["username"], "from": "dave@example.com", "subject": "jmaplib", "body": "hello"},
                verify=tls,
            )

        threading.Thread(target=deliver).start()
        change = next(socket.notifications())
        seen["jmaplibChange"] = sorted(next(iter(change.changed.values())).keys())
        seen["jmaplibPushState"] = socket.push_state is not None


def main() -> int:
    plan = json.load(open(sys.argv[1]))
    tls = ssl.create_default_context(cafile=plan["ca"])
    seen: dict = {}
    try:
        asyncio.run(frames(plan, tls, seen))
        with_jmaplib(plan, tls, seen)
    except Exception as error:  # reported with what was seen so far
        seen["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(seen))
        return 1
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
