"""Waits on a JMAP WebSocket (RFC 8887) for a StateChange: opens URL with Basic credentials (or, when USERNAME is
`--bearer`, with the bearer token PASSWORD) and the `jmap` subprotocol, turns push on for Email, makes one request so
push is known to be on once it is answered, prints "listening" (flushed) and waits up to 60 seconds for a StateChange.
Arguments: URL, CA file, username, password.
Prints the StateChange as JSON, or {"closed": CODE} when the server closes the socket first, or {"error": "..."} and
exits 1."""

import asyncio
import base64
import json
import ssl
import sys

import websockets


async def main(url: str, ca: str, user: str, password: str) -> int:
    if user == "--bearer":
        authorization = "Bearer " + password
    else:
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    tls = ssl.create_default_context(cafile=ca)
    async with websockets.connect(
        url, ssl=tls, subprotocols=["jmap"], additional_headers={"Authorization": authorization}
    ) as socket:
        await socket.send(json.dumps({"@type": "WebSocketPushEnable", "dataTypes": ["Email"]}))
        await socket.send(
            json.dumps(
                {
                    "@type": "Request",
                    "id": "ready",
                    "using": ["urn:ietf:params:jmap:core"],
                    "methodCalls": [["Core/echo", {}, "e"]],
                }
            )
        )
        answer = json.loads(await asyncio.wait_for(socket.recv(), 30))
        if answer.get("requestId") != "ready":
            print(json.dumps({"error": f"unexpected first answer {answer}"}))
            return 1
        print("listening", flush=True)
        try:
            while True:
                message = json.loads(await asyncio.wait_for(socket.recv(), 60))
                if message.get("@type") == "StateChange":
                    print(json.dumps(message), flush=True)
                    return 0
        except websockets.ConnectionClosed as closed:
            print(json.dumps({"closed": closed.rcvd.code if closed.rcvd else None}), flush=True)
            return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(*sys.argv[1:5])))
    except Exception as error:  # reported for the test to show
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        sys.exit(1)
