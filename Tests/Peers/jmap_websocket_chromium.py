"""A browser on JMAP over WebSocket (RFC 8887): headless Chromium (Debian's, through its chromedriver and selenium)
opens the socket the way a web client must, with a single-use ticket in the URL (a browser cannot put an
`Authorization` header on a WebSocket), asks for pushes, makes a request, and hears a delivery; the same ticket
opens nothing a second time.
Usage: jmap_websocket_chromium.py --api https://127.0.0.1:PORT --ca ca.pem --home DIR --username U --password P
                                  --delivery-token-file F [--timeout S]
Chromium trusts the dev CA through an NSS database under DIR (its HOME). Prints one JSON object of what the page
saw; on a failure it carries "error" and the script exits 1. Chromium and chromedriver are stopped on every exit.
"""

import argparse
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

#: The page's side: open the socket, record every message and how it closed.
OPEN_SOCKET = """
const [url, done] = [arguments[0], arguments[arguments.length - 1]];
window.jmap = {messages: [], opened: false, closed: null};
const socket = new WebSocket(url, "jmap");
window.jmapSocket = socket;
socket.onopen = () => {
  window.jmap.opened = true;
  window.jmap.protocol = socket.protocol;
  socket.send(JSON.stringify({"@type": "WebSocketPushEnable", "dataTypes": ["Email"]}));
  socket.send(JSON.stringify({"@type": "Request", "id": "from-the-page",
    "using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {"hello": "browser"}, "e"]]}));
};
socket.onmessage = (event) => {
  const message = JSON.parse(event.data);
  window.jmap.messages.push(message);
  if (message["@type"] === "Response") done(window.jmap);
};
socket.onclose = (event) => { window.jmap.closed = event.code; done(window.jmap); };
socket.onerror = () => { window.jmap.error = true; done(window.jmap); };
"""

#: A second socket on a URL whose ticket was used: it must close without opening.
REUSE_TICKET = """
const [url, done] = [arguments[0], arguments[arguments.length - 1]];
const socket = new WebSocket(url, "jmap");
let opened = false;
socket.onopen = () => { opened = true; };
socket.onclose = (event) => done({opened: opened, code: event.code});
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ["--api", "--ca", "--home", "--username", "--password", "--delivery-token-file"]:
        parser.add_argument(name, required=True)
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.ca)
    delivery_token = open(args.delivery_token_file).read().strip()

    def post(path: str, body: dict, token: str) -> dict:
        request = urllib.request.Request(
            args.api + path, data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=args.timeout) as answer:
            return json.load(answer)

    seen: dict = {}
    signin = urllib.request.Request(
        args.api + "/v1/session", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"username": args.username, "password": args.password}).encode())
    with urllib.request.urlopen(signin, context=context, timeout=args.timeout) as answer:
        token = json.load(answer)["accessToken"]
    ticket = post("/jmap/ws-ticket", {}, token)
    seen["ticketUrlHasNoToken"] = token not in ticket["url"]

    # Chromium reads the CAs it trusts from $HOME/.pki/nssdb.
    nss = "sql:" + os.path.join(args.home, ".pki/nssdb")
    os.makedirs(os.path.join(args.home, ".pki/nssdb"), exist_ok=True)
    subprocess.run(["certutil", "-N", "-d", nss, "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-d", nss, "-n", "signalfetch-dev", "-t", "C,,", "-i", args.ca],
                   check=True, capture_output=True)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--user-data-dir={os.path.join(args.home, 'profile')}", "--no-first-run",
                 "--disable-background-networking"]:
        options.add_argument(flag)
    service = Service("/usr/bin/chromedriver", env={**os.environ, "HOME": args.home})
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_script_timeout(args.timeout)
        # A page of mailboxd's origin without a CSP of its own (the web client's forbids other origins, and the
        # socket's listener is one); a page from the internet would meet Chromium's local network access checks.
        driver.get(args.api + "/healthz")
        first = driver.execute_async_script(OPEN_SOCKET, ticket["url"])
        seen["opened"] = first["opened"]
        seen["protocol"] = first.get("protocol")
        seen["response"] = next((m for m in first["messages"] if m.get("@type") == "Response"), None)
        post("/v1/deliveries", {"to": args.username, "from": "erin@example.com", "subject": "to the page",
                                "body": "x"}, delivery_token)
        deadline = time.time() + args.timeout
        change = None
        while change is None and time.time() < deadline:
            messages = driver.execute_script("return window.jmap.messages;")
            change = next((m for m in messages if m.get("@type") == "StateChange"), None)
            if change is None:
                time.sleep(0.05)
        seen["stateChange"] = change
        driver.execute_script("window.jmapSocket.close(1000);")
        seen["reused"] = driver.execute_async_script(REUSE_TICKET, ticket["url"])
    except Exception as error:  # reported with what was seen so far
        seen["error"] = f"{type(error).__name__}: {error}"
    finally:
        driver.quit()
    print(json.dumps(seen))
    return 1 if "error" in seen else 0


if __name__ == "__main__":
    sys.exit(main())
