"""A real browser for the console test: headless Chromium (Debian's, driven by its chromedriver through selenium)
on mailboxd's /console, through a TCP relay this script can cut.

Usage: console_chromium.py --api https://127.0.0.1:PORT --ca ca.pem --console-token-file F
                           --delivery-token-file F --metrics http://127.0.0.1:PORT/metrics --account alice
                           --hostile-account NAME --home DIR [--screenshot PNG] [--timeout S]

Chromium trusts the dev CA through an NSS database under DIR (its HOME). The script:
1. signs in with a wrong token (the form shows the refusal), then with the console token;
2. delivers a message to --account (whose device, run by the caller, is signalled and fetches), and waits until
   that device's row shows the change, its signal and its fetch, with the lag;
3. checks the page's freshness figures against the server's: the total against mailboxd_freshness_seconds_count,
   the percentiles against the snapshot's;
4. cuts every connection through the relay (the event stream too), delivers while the page is cut off, lets it
   reconnect, and checks the event log: every id once, none missing, up to the server's newest;
5. delivers to --hostile-account (a username that is markup) and checks it is shown as text and ran nothing.
Prints one JSON line per step ({"step": …}), then {"event":"done",…}. A failure prints {"event":"error",…} and the
page's text to stderr, and exits 1. Chromium and chromedriver are stopped on every exit (selenium quits them).
"""
import argparse
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

driver = None


def emit(event):
    print(json.dumps(event), flush=True)


def fail(message):
    emit({"event": "error", "message": message})
    try:
        print("---- page text ----\n" + driver.find_element(By.TAG_NAME, "body").text[:4000], file=sys.stderr)
        for entry in driver.get_log("browser")[-30:]:
            print("console:", entry.get("message"), file=sys.stderr)
    except Exception as error:  # the browser may be gone
        print(f"page unavailable: {error}", file=sys.stderr)
    sys.exit(1)


def wait_for(what, condition, timeout):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # the element may not be there yet
            last = error
        time.sleep(0.05)
    fail(f"timed out waiting for {what}" + (f" ({last})" if last else ""))


class Relay:
    """A TCP relay on loopback to the API: the browser's only way to the server, so cutting it cuts the stream."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.connections = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.listener.accept()
            with self.lock:
                if not self.open:
                    client.close()
                    continue
                upstream = socket.create_connection(self.target)
                self.connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source, target):
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, seconds):
        """Closes every connection and refuses new ones for `seconds`."""
        with self.lock:
            self.open = False
            for s in self.connections:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.connections = []
        time.sleep(seconds)
        with self.lock:
            self.open = True


def main():
    global driver
    # The test stops this peer with SIGTERM once it has read the result: exit through `finally`, so selenium quits
    # chromedriver and Chromium instead of leaving them running without a parent.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser()
    for name in ["--api", "--ca", "--console-token-file", "--delivery-token-file", "--metrics", "--account",
                 "--hostile-account", "--home"]:
        parser.add_argument(name, required=True)
    parser.add_argument("--screenshot")
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    api_port = int(args.api.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=args.ca)
    token = open(args.console_token_file).read().strip()
    delivery_token = open(args.delivery_token_file).read().strip()

    def deliver(to, subject):
        request = urllib.request.Request(
            args.api + "/v1/deliveries", method="POST",
            data=json.dumps({"to": to, "from": "sender@example.com", "subject": subject, "body": "x"}).encode(),
            headers={"Authorization": f"Bearer {delivery_token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return json.load(answer)

    # Chromium reads the CAs it trusts from $HOME/.pki/nssdb.
    nss = "sql:" + os.path.join(args.home, ".pki/nssdb")
    os.makedirs(os.path.join(args.home, ".pki/nssdb"), exist_ok=True)
    subprocess.run(["certutil", "-N", "-d", nss, "--empty-password"], check=True, capture_output=True)
    subprocess.run(["certutil", "-A", "-d", nss, "-n", "signalfetch-dev", "-t", "C,,", "-i", args.ca],
                   check=True, capture_output=True)
    relay = Relay(api_port)
    base = f"https://127.0.0.1:{relay.port}"
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--user-data-dir={os.path.join(args.home, 'profile')}", "--window-size=1400,1000",
                 "--no-first-run", "--disable-background-networking"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service("/usr/bin/chromedriver", env={**os.environ, "HOME": args.home})
    driver = webdriver.Chrome(service=service, options=options)
    try:
        # 1. Sign in: a wrong token is refused on the form, the right one opens the console.
        driver.get(base + "/console")
        wait_for("the sign-in form", lambda: driver.find_element(By.ID, "token"), args.timeout)
        driver.find_element(By.ID, "token").send_keys("not-the-token")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        refusal = wait_for("the refusal", lambda: driver.find_element(By.ID, "signin-error").text, args.timeout)
        emit({"step": "wrong token refused", "message": refusal})
        field = driver.find_element(By.ID, "token")
        field.clear()
        field.send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for("the console, live", lambda: driver.find_element(By.ID, "status").get_attribute("data-state") == "live",
                 args.timeout)
        cookie = driver.get_cookie("signalfetch_console")
        if not cookie or not cookie.get("httpOnly") or not cookie.get("secure") or cookie.get("sameSite") != "Strict":
            fail(f"the console cookie is not HttpOnly, Secure and SameSite=Strict: {cookie}")
        emit({"step": "signed in"})

        def snapshot():
            request = urllib.request.Request(
                args.api + "/console/snapshot", headers={"Cookie": f"signalfetch_console={cookie['value']}"})
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return json.load(answer)

        # 2. A delivery: the device's row gains the change, its signal and its fetch, with the lag.
        receipt = deliver(args.account, "Console check")
        modseq = int(receipt["state"].rsplit("-", 1)[1])

        def row():
            for tr in driver.find_elements(By.CSS_SELECTOR, "#devices tbody tr"):
                cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                if cells and cells[0] == args.account and f"(#{modseq})" in cells[7] and cells[8] != "–":
                    return cells
            return None

        cells = wait_for("the device's row with its signal and fetch", row, args.timeout)
        if "sent" not in cells[6]:
            fail(f"the signal is not shown as sent: {cells}")
        emit({"step": "row", "cells": cells})

        # 2b. Every table fits its card (no column runs past it) at the widths operators' screens have.
        for width in [1280, 1400, 1600, 1920]:
            driver.set_window_size(width, 1000)
            overflow = driver.execute_script("""
                return Array.from(document.querySelectorAll('table')).map(t => {
                    const card = t.parentElement;
                    return [t.id, t.getBoundingClientRect().width, card.clientWidth, t.scrollWidth];
                }).filter(([id, table, card, scroll]) => table > card + 0.5 || scroll > card + 0.5);
            """)
            if overflow:
                fail(f"at {width} px these tables run past their cards (id, width, card, scroll): {overflow}")
        driver.set_window_size(1400, 1000)
        emit({"step": "tables fit their cards", "widths": [1280, 1400, 1600, 1920]})

        # 3. Freshness on the page is the server's.
        def figures():
            return {key: driver.find_element(By.ID, f"fresh-{key}").text for key in ["count", "total", "p50", "p90", "p99"]}

        with urllib.request.urlopen(args.metrics, timeout=10) as answer:
            metrics = answer.read().decode()
        match = re.search(r"^mailboxd_freshness_seconds_count (\d+)", metrics, re.M)
        if not match:
            fail("no mailboxd_freshness_seconds_count in /metrics")
        server = snapshot()["freshness"]
        page = figures()
        if int(page["total"]) != int(match.group(1)) or int(page["count"]) != server["windowCount"]:
            fail(f"freshness counts differ: page {page}, metric {match.group(1)}, snapshot {server}")
        for key in ["p50", "p90", "p99"]:
            if page[key] != f"{server[key + 'Ms']} ms" and page[key] != f"{round(server[key + 'Ms'])} ms":
                fail(f"freshness {key} differs: page {page[key]}, server {server[key + 'Ms']} ms")
        emit({"step": "freshness", "page": page, "metric": int(match.group(1))})

        # 4. Cut the stream, change things meanwhile, reconnect: nothing lost, nothing twice.
        cutter = threading.Thread(target=relay.cut, args=(1.5,))
        cutter.start()
        time.sleep(0.2)
        deliver(args.account, "While cut off")
        cutter.join()
        wait_for("the stream to reconnect",
                 lambda: driver.find_element(By.ID, "status").get_attribute("data-state") == "live", args.timeout)
        newest = snapshot()["lastEventId"]

        def complete():
            ids = [int(li.get_attribute("data-id")) for li in driver.find_elements(By.CSS_SELECTOR, "#events li")]
            return ids if ids and max(ids) >= newest else None

        ids = wait_for("every event up to the server's newest", complete, args.timeout)
        if len(ids) != len(set(ids)):
            fail(f"an event is shown twice: {sorted(ids)}")
        if sorted(ids) != list(range(min(ids), max(ids) + 1)):
            fail(f"an event is missing: {sorted(ids)}")
        emit({"step": "reconnected", "events": len(ids), "newest": max(ids)})

        # 5. Markup in a username is text.
        deliver(args.hostile_account, "Hostile")
        wait_for("the hostile username as text",
                 lambda: any(args.hostile_account in li.text for li in driver.find_elements(By.CSS_SELECTOR, "#events li")),
                 args.timeout)
        if driver.execute_script("return window.__pwned === undefined") is not True:
            fail("a username's markup ran")
        if driver.find_elements(By.CSS_SELECTOR, "#events img, #events script"):
            fail("a username's markup became elements")
        emit({"step": "markup shown as text"})
        if args.screenshot:
            driver.save_screenshot(args.screenshot)
        emit({"event": "done", "row": cells, "freshness": figures()})
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
