"""A real browser for the Web Push integration test: headless Firefox ESR running mailboxd's web client.

Usage: webpush_firefox.py --page https://127.0.0.1:PORT/web/ --ca ca.pem --push-server ws://127.0.0.1:PORT/
                          --username U --profile-dir DIR [--timeout S]
The password is the first line of stdin.

Makes a fresh Firefox profile in DIR (prefs pointing Firefox's push service at webpush-sim's Mozilla WebSocket
listener, the dev CA trusted), starts headless Firefox with Marionette on a free port, signs in through the page's
form and waits until the page says it is subscribed, then prints {"event":"subscribed"}. After that each stdin line
{"expect":"<subject>"} is answered {"event":"seen","subject":…,"ms":…} once a message with that subject is in the
page's list. The page is never reloaded: only a push (the service worker's sync) can bring it. Any failure prints
{"event":"error","message":…}, the page's status and Firefox's console output to stderr, and exits 1.
Firefox is stopped by its pid on every exit; nothing outside DIR is written or deleted.
"""
import argparse
import json
import os
import signal
import sys
import time

import mozilla_headless

MARKER = ".webpush-firefox-profile"   # only a directory holding this file (or an empty one) is ever cleared
CA_NICKNAME = "signalfetch-dev"

firefox = None          # the Popen of Firefox
client = None           # the Marionette client
log_path = None         # Firefox's stdout/stderr (console output included, see prefs)


def emit(event):
    print(json.dumps(event), flush=True)


def fail(message):
    """Reports an error on stdout, debugging help on stderr, and exits 1 (Firefox is stopped by cleanup)."""
    emit({"event": "error", "message": message})
    try:
        print("page status: " + repr(page_status()), file=sys.stderr)
    except Exception as error:  # the browser may be gone
        print(f"page status unavailable: {error}", file=sys.stderr)
    if log_path and os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            lines = f.readlines()
        # Console messages and errors, then the push service's last debug lines (its frames on the WebSocket).
        print("---- Firefox output (without debug lines) ----", file=sys.stderr)
        sys.stderr.writelines([line for line in lines if not line.startswith("console.debug:")][-100:])
        print("---- Firefox push service, last debug lines ----", file=sys.stderr)
        sys.stderr.writelines([line[:400] + "\n" for line in lines if line.startswith("console.debug: Push")][-40:])
    sys.exit(1)


def prepare_profile(directory, push_server, marionette_port, ca):
    """A fresh profile: user.js prefs and an NSS database that trusts the dev CA for TLS servers."""
    prefs = {
        # Firefox's push service, pointed at a local Mozilla-protocol server (plain ws:// on loopback).
        "dom.push.enabled": True,
        "dom.push.connection.enabled": True,
        "dom.push.serverURL": push_server,
        "dom.push.testing.allowInsecureServerURL": True,
        "dom.push.testing.ignorePermission": True,   # no notification-permission prompt for subscribe()
        "dom.push.loglevel": "Debug",                # PushService logs go to Firefox's stdout
        "dom.serviceWorkers.enabled": True,
        # Console messages of pages and workers on stdout, for debugging failures.
        "devtools.console.stdout.content": True,
        "devtools.console.stdout.chrome": True,
        "browser.dom.window.dump.enabled": True,
        # A quiet, offline-friendly browser (beside mozilla_headless.QUIET_PREFS).
        "browser.shell.checkDefaultBrowser": False,
        "browser.startup.homepage_override.mstone": "ignore",
        "browser.startup.page": 0,
        "browser.aboutwelcome.enabled": False,
        "app.normandy.enabled": False,
        "app.shield.optoutstudies.enabled": False,
        "messaging-system.rsexperimentloader.enabled": False,
        "browser.safebrowsing.malware.enabled": False,
        "browser.safebrowsing.phishing.enabled": False,
        "browser.safebrowsing.downloads.enabled": False,
        "browser.safebrowsing.update.enabled": False,
        "network.prefetch-next": False,
    }
    mozilla_headless.fresh_profile(directory, MARKER, prefs, ca, CA_NICKNAME, marionette_port)


def start_firefox(directory, marionette_port, deadline, url="about:blank"):
    global firefox, client, log_path
    log_path = os.path.join(directory, "firefox.log")
    try:
        firefox, client = mozilla_headless.start(
            ["firefox-esr", "--headless", "--no-remote", "--marionette", "--profile", directory, url], log_path,
            marionette_port, deadline)
    except RuntimeError as error:
        fail(str(error))


def stop_firefox():
    """Stops Firefox by pid: SIGTERM, then SIGKILL to its process group (its content processes) if it lingers."""
    global firefox
    process, firefox = firefox, None
    mozilla_headless.stop(process)


def on_signal(number, _frame):
    stop_firefox()
    sys.exit(128 + number)


def js(script, args=None):
    return client.execute_script(script, script_args=args or [], sandbox=None)


def page_status():
    if client is None:
        return None
    return js("""const s = document.getElementById('status');
                 return s ? {push: s.dataset.push || null, state: s.dataset.state || null, text: s.textContent} : null;""")


def wait_for(condition, timeout, what):
    """Polls condition() until it returns a true value or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page", required=True, help="the web client, e.g. https://127.0.0.1:8443/web/")
    parser.add_argument("--ca", required=True, help="PEM of the CA that issued the page's certificate")
    parser.add_argument("--push-server", required=True, help="Mozilla push protocol URL, ws://127.0.0.1:PORT/")
    parser.add_argument("--username", required=True)
    parser.add_argument("--profile-dir", required=True)
    parser.add_argument("--timeout", type=float, default=60, help="seconds for startup+subscribe and per expect")
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    password = sys.stdin.readline().rstrip("\n")
    directory = os.path.abspath(args.profile_dir)
    deadline = time.monotonic() + args.timeout
    try:
        marionette_port = mozilla_headless.free_port()
        prepare_profile(directory, args.push_server, marionette_port, os.path.abspath(args.ca))
        started = time.monotonic()
        start_firefox(directory, marionette_port, deadline)
        client.navigate(args.page)
        wait_for(lambda: js("return !!document.getElementById('signin-form') && "
                            "!document.getElementById('signin-form').hidden"),
                 max(1, deadline - time.monotonic()), "the sign-in form")
        client.find_element("id", "username").send_keys(args.username)
        client.find_element("id", "password").send_keys(password)
        client.find_element("css selector", "#signin-form button[type=submit]").click()
        # A marker on the window: if the page were reloaded it would be gone, and a "seen" would prove nothing.
        js("window.__webpushHarness = true;")
        wait_for(lambda: (page_status() or {}).get("push") == "subscribed",
                 max(1, deadline - time.monotonic()), "the page to report it is subscribed")
        print(f"subscribed {time.monotonic() - started:.1f}s after Firefox started", file=sys.stderr, flush=True)
        emit({"event": "subscribed"})

        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                subject = json.loads(line)["expect"]
            except (ValueError, KeyError, TypeError):
                fail(f"bad input line: {line[:200]}")
            began = time.monotonic()

            def seen():
                found = js("""if (!window.__webpushHarness) return 'reloaded';
                              return Array.from(document.querySelectorAll('#messages [data-id] .subject'))
                                          .some(e => e.textContent === arguments[0]);""", [subject])
                if found == "reloaded":
                    fail("the page was reloaded")
                return found

            wait_for(seen, args.timeout, f"subject {subject!r} in the list")
            emit({"event": "seen", "subject": subject, "ms": round((time.monotonic() - began) * 1000)})
    except SystemExit:
        raise
    except Exception as error:
        fail(f"{type(error).__name__}: {error}")
    finally:
        stop_firefox()


if __name__ == "__main__":
    main()
