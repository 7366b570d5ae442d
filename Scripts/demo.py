#!/usr/bin/env python3
"""Drives the SignalFetch demo: real processes, real TLS, a readable timeline. Standard library only."""
import argparse, json, os, queue, shutil, signal, smtplib, socket, ssl, subprocess, sys, tempfile, threading, time
import urllib.request
from email.message import EmailMessage

TOPIC = "com.example.signalfetch"
T0 = time.monotonic()


def stamp():
    return f"{(time.monotonic() - T0) * 1000:8.1f} ms"


def say(who, text):
    print(f"{stamp()}  {who:<14} {text}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"demo: nothing listening on port {port}")


class API:
    def __init__(self, base, ca):
        self.base = base
        self.ctx = ssl.create_default_context(cafile=ca)

    def call(self, method, path, token=None, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def fetch(self, path, token):
        """The raw bytes of a GET (for parts and raw messages)."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
            return r.read()


class Device:
    """One `mail-client run` process; its JSON event lines are collected and shown on the timeline."""

    def __init__(self, name, user, bin_dir, api, sim, ca, state_dir, environment="sandbox", service="apns"):
        self.name, self.user, self.environment, self.state_dir = name, user, environment, state_dir
        self.service = service
        self.events = queue.Queue()
        self.last_sync = None
        self.badge = None
        self.token = None
        push = {"fcm": ["--service", "fcm", "--app", TOPIC], "webpush": ["--service", "webpush"]}.get(
            service, ["--topic", TOPIC, "--environment", environment])
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "mail-client"), "run", "--server", api, "--ca", ca, "--sim", sim,
             "--username", user, "--state-dir", state_dir, "--device-name", name, "--fallback-interval", "30"]
            + push,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.proc.stdin.write(f"password-{user}\n")
        self.proc.stdin.close()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.events.put(event)
            kind = event.get("event")
            if kind == "signal":
                say(self.name, "signal  " + json.dumps(event.get("payload"), separators=(",", ":")))
            elif kind == "sync-done":
                self.last_sync = event
                say(self.name, f"fetched +{event.get('created', 0)} ~{event.get('updated', 0)} "
                               f"-{event.get('destroyed', 0)} in {event.get('ms', 0)} ms "
                               f"(cache {event.get('messages')} messages, state {event.get('state')})")
            elif kind == "badge":
                self.badge = event.get("badge")
                say(self.name, f"badge   {self.badge}")
            elif kind == "registered":
                self.token = event.get("deviceToken")
                where = {"fcm": "fcm-sim", "webpush": "webpush-sim (a browser subscription)"}.get(
                    self.service, f"apns-sim ({self.environment})")
                say(self.name, f"registered with {where}, token {str(event.get('deviceToken'))[:12]}…")
            elif kind == "error":
                say(self.name, f"error   {event.get('code')}: {event.get('message')}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--keep", action="store_true",
                        help="leave everything running for a person to watch (the console), until Ctrl-C; keep the data")
    parser.add_argument("--screenshot", default="demo-console.png",
                        help="where to save the console's screenshot (headless Chromium; '' for none)")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="signalfetch-demo-")
    data = os.path.join(work, "data")
    procs, devices = [], []
    mailboxd = os.path.join(args.bin, "mailboxd")
    try:
        say("setup", f"dev-setup into {data}")
        subprocess.run([mailboxd, "dev-setup", "--data-dir", data], check=True, stdout=subprocess.DEVNULL)
        for user in ["alice", "bob"]:
            subprocess.run([mailboxd, "account", "add", user, "--data-dir", data], input=f"password-{user}\n",
                           text=True, check=True, stdout=subprocess.DEVNULL)
            say("setup", f"account {user}")
        key_id = open(os.path.join(data, "apns/key-id")).read().strip()
        team_id = open(os.path.join(data, "apns/team-id")).read().strip()
        ca = os.path.join(data, "tls/ca.pem")
        p_port, s_port, d_port, a_port, l_port = free_port(), free_port(), free_port(), free_port(), free_port()
        f_port, fd_port = free_port(), free_port()
        w_port, wd_port = free_port(), free_port()
        logs = open(os.path.join(work, "servers.log"), "w")
        mailboxd_log_path = os.path.join(work, "mailboxd.log")
        mailboxd_log = open(mailboxd_log_path, "w")
        procs.append(subprocess.Popen(
            [os.path.join(args.bin, "apns-sim"), "--listen", f"127.0.0.1:{p_port}", "--sandbox-listen",
             f"127.0.0.1:{s_port}", "--device-listen",
             f"127.0.0.1:{d_port}", "--tls-cert", os.path.join(data, "tls/server.pem"), "--tls-key",
             os.path.join(data, "tls/server.key"), "--provider-key",
             f"{key_id}:{team_id}:{os.path.join(data, 'apns/key.pub.pem')}", "--topic", TOPIC],
            stdout=logs, stderr=logs))
        wait_port(d_port)
        say("apns-sim", f"provider API https://127.0.0.1:{p_port} (production) and https://127.0.0.1:{s_port} "
                        f"(sandbox), HTTP/2; devices http://127.0.0.1:{d_port}")
        service_account = os.path.join(data, "fcm/service-account.json")
        procs.append(subprocess.Popen(
            [os.path.join(args.bin, "fcm-sim"), "--listen", f"127.0.0.1:{f_port}", "--device-listen",
             f"127.0.0.1:{fd_port}", "--tls-cert", os.path.join(data, "tls/server.pem"), "--tls-key",
             os.path.join(data, "tls/server.key"), "--service-account", service_account],
            stdout=logs, stderr=logs))
        wait_port(fd_port)
        say("fcm-sim", f"FCM HTTP v1 and OAuth https://127.0.0.1:{f_port}; devices http://127.0.0.1:{fd_port}")
        procs.append(subprocess.Popen(
            [os.path.join(args.bin, "webpush-sim"), "--listen", f"127.0.0.1:{w_port}", "--device-listen",
             f"127.0.0.1:{wd_port}", "--tls-cert", os.path.join(data, "tls/server.pem"), "--tls-key",
             os.path.join(data, "tls/server.key")],
            stdout=logs, stderr=logs))
        wait_port(wd_port)
        say("webpush-sim", f"push resources https://127.0.0.1:{w_port} (RFC 8030, VAPID); devices "
                           f"http://127.0.0.1:{wd_port}")
        fcm_config = os.path.join(work, "fcm-config.json")
        with open(fcm_config, "w") as file:
            json.dump({"endpoint": f"https://127.0.0.1:{f_port}", "tokenURI": f"https://127.0.0.1:{f_port}/token",
                       "ca": ca, "apps": [{"app": TOPIC, "serviceAccountFile": service_account}]}, file)
        procs.append(subprocess.Popen(
            [mailboxd, "serve", "--data-dir", data, "--listen", f"127.0.0.1:{a_port}", "--apns-url",
             f"https://127.0.0.1:{p_port}", "--apns-sandbox-url", f"https://127.0.0.1:{s_port}", "--apns-ca", ca,
             "--apns-topic", TOPIC, "--fcm-config", fcm_config, "--lmtp-listen", f"127.0.0.1:{l_port}",
             "--webpush-ca", ca, "--webpush-allow-host", f"127.0.0.1:{w_port}",
             "--webpush-subject", "mailto:demo@example.com", "--access-log"],
            stdout=mailboxd_log, stderr=mailboxd_log))
        wait_port(a_port)
        wait_port(l_port)
        api_url, sim_url = f"https://127.0.0.1:{a_port}", f"http://127.0.0.1:{d_port}"
        say("mailboxd", f"API {api_url} (TLS, dev CA); LMTP 127.0.0.1:{l_port} for an MTA")
        console_url = f"{api_url}/console"
        say("console", f"{console_url} (sign in with the token in {os.path.join(data, 'console-token')})")
        api = API(api_url, ca)
        issued = []  # every access token the demo is given, searched for in mailboxd's log at the end

        def sign_in(user, device_name):
            _, answer = api.call("POST", "/v1/session", body={"username": user, "password": f"password-{user}",
                                                              "deviceName": device_name})
            issued.append(answer["accessToken"])
            return answer
        # alice's phone and tablet run development builds (sandbox tokens); bob's phone an App Store build; bob's
        # Android phone is signalled through FCM; alice's browser through Web Push (its signals encrypted to it).
        for name, user, environment in [("alice-phone", "alice", "sandbox"), ("alice-tablet", "alice", "sandbox"),
                                        ("bob-phone", "bob", "production")]:
            devices.append(Device(name, user, args.bin, api_url, sim_url, ca, os.path.join(work, name), environment))
        devices.append(Device("bob-android", "bob", args.bin, api_url, f"http://127.0.0.1:{fd_port}", ca,
                              os.path.join(work, "bob-android"), service="fcm"))
        devices.append(Device("alice-browser", "alice", args.bin, api_url, f"http://127.0.0.1:{wd_port}", ca,
                              os.path.join(work, "alice-browser"), service="webpush"))
        deadline = time.time() + 30
        while time.time() < deadline and not all(d.last_sync for d in devices):
            time.sleep(0.05)
        if not all(d.last_sync for d in devices):
            raise SystemExit("demo: a device never completed its first sync")

        token = open(os.path.join(data, "delivery-token")).read().strip()
        mail = [
            ("alice", "carol@example.com", "Lunch on Thursday?", "Shall we try the new place on 5th?"),
            ("bob", "dave@example.com", "Build is green", "All 214 tests passed on main."),
            ("alice", "erin@example.com", "Your itinerary", "Flight SF123 departs 09:40 from gate B7."),
        ]
        for to, sender, subject, body in mail:
            status, receipt = api.call("POST", "/v1/deliveries", token=token,
                                       body={"to": to, "from": sender, "subject": subject, "body": body})
            say("sender", f"delivered to {to}: \"{subject}\" → {status} state {receipt.get('state')}")
            time.sleep(0.4)
        # The fourth arrives as an MTA would hand it over: a MIME message over LMTP, with a PDF attached.
        invoice = EmailMessage()
        invoice["From"] = "Frank Müller <frank@example.com>"
        invoice["To"] = "Alice <alice@example.test>"
        invoice["Subject"] = "Invoice 2026-118"
        invoice.set_content("Please find the invoice attached.\n")
        invoice.add_attachment(b"%PDF-1.4\n" + bytes(range(256)) * 8, maintype="application", subtype="pdf",
                               filename="invoice-2026-118.pdf")
        with smtplib.LMTP("127.0.0.1", l_port) as lmtp:
            refused = lmtp.sendmail("frank@example.com", ["alice@example.test"], invoice.as_bytes())
        say("sender", f"LMTP to alice@example.test: \"Invoice 2026-118\" with invoice-2026-118.pdf → "
                      f"{'refused ' + str(refused) if refused else '250 delivered'}")
        time.sleep(1.0)

        # Read a message on alice's phone; the tablet gets the new badge.
        session = sign_in("alice", "alice-phone (reader)")
        _, listing = api.call("GET", "/v1/messages?mailbox=inbox", token=session["accessToken"])
        first = listing["messages"][0]
        status, _ = api.call("PATCH", f"/v1/messages/{first['id']}", token=session["accessToken"], body={"seen": True})
        say("alice-phone", f"marked \"{first['subject']}\" read → {status}")
        deadline = time.time() + 10
        tablet = devices[1]
        while time.time() < deadline and tablet.badge != 2:
            time.sleep(0.05)
        say("alice-tablet", f"badge is now {tablet.badge} (expected 2)")
        time.sleep(1.0)

        # Convergence: every device's cache holds its account's server state.
        ok = True
        for device in devices:
            s = sign_in(device.user, "demo-check")
            _, listing = api.call("GET", "/v1/messages?limit=1000", token=s["accessToken"])
            want_state, want_count = listing["state"], len(listing["messages"])
            got = device.last_sync or {}
            converged = got.get("state") == want_state and got.get("messages") == want_count
            ok &= converged
            say("check", f"{device.name}: cache {got.get('messages')} messages at {got.get('state')}; server "
                         f"{want_count} at {want_state} → {'converged' if converged else 'NOT converged'}")
        ok &= tablet.badge == 2

        # The attachment reached alice's tablet with the message; its bytes come from the mailbox on demand.
        dump = json.loads(subprocess.run([os.path.join(args.bin, "mail-client"), "dump", "--state-dir",
                                          tablet.state_dir], check=True, capture_output=True, text=True).stdout)
        invoice_row = next((m for m in dump["messages"] if m["subject"] == "Invoice 2026-118"), None)
        attachment = (invoice_row or {}).get("attachments", [{}])[0] if (invoice_row or {}).get("attachments") else {}
        say("alice-tablet", f"cached \"Invoice 2026-118\": attachment {attachment.get('filename')} "
                            f"({attachment.get('type')}, {attachment.get('size')} bytes, part {attachment.get('partId')})")
        if invoice_row and attachment:
            s = sign_in("alice", "alice-tablet (download)")
            part = api.fetch(f"/v1/messages/{invoice_row['id']}/parts/{attachment['partId']}", s["accessToken"])
            say("alice-tablet", f"downloaded part {attachment['partId']}: {len(part)} bytes, starts {part[:8]!r}")
            ok &= len(part) == attachment["size"] and part.startswith(b"%PDF-1.4")
        else:
            ok = False
        # mailboxd's log (its access log included) holds no secret the demo handled: no access token, no delivery
        # token, no device token or endpoint.
        secrets = [token] + issued + [d.token for d in devices if d.token]
        mailboxd_log.flush()
        logged = open(mailboxd_log_path).read()
        leaked = sum(1 for secret in secrets if secret in logged)
        requests = sum(1 for line in logged.splitlines() if " /v1/" in line)
        say("check", f"mailboxd's log: {requests} access-log lines, {len(secrets)} tokens checked, "
                     f"{'none in it' if leaked == 0 else f'{leaked} FOUND'}")
        ok &= leaked == 0 and requests > 0 and all(d.token for d in devices)
        if args.screenshot:
            screenshot(args, console_url, os.path.join(data, "console-token"))
        print(f"\ndemo: {'every device converged' if ok else 'FAILED: not every device converged'}")
        if args.keep:
            print(f"demo: still running; watch the loop at {console_url}\n"
                  f"demo: console token: {os.path.join(data, 'console-token')}; dev CA: {ca}\n"
                  f"demo: deliver more with: mail-client send --server {api_url} --ca {ca} "
                  f"--delivery-token-file {os.path.join(data, 'delivery-token')} --to alice --from a@example.com "
                  f"--subject Hi --body Hello\n"
                  f"demo: Ctrl-C stops everything (the data stays in {work})", flush=True)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
        return 0 if ok else 1
    finally:
        for device in devices:
            device.stop()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def screenshot(args, console_url, token_file):
    """Saves the console as headless Chromium shows it (selenium in its own venv, .venv-console); a machine without
    Chromium gets a note instead."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    venv = os.path.join(root, ".venv-console")
    python = os.path.join(venv, "bin", "python3")
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        say("console", "no screenshot: chromium and chromium-driver are not installed (Scripts/bootstrap installs them)")
        return
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    probe = subprocess.run([python, "-c", "import selenium"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "selenium>=4.20"],
                       check=True)
    out = os.path.abspath(args.screenshot)
    result = subprocess.run([python, os.path.join(root, "Scripts", "console-screenshot.py"), "--url", console_url,
                             "--token-file", token_file, "--out", out], capture_output=True, text=True)
    if result.returncode == 0:
        say("console", f"screenshot saved to {out}")
    else:
        say("console", f"no screenshot: {result.stderr.strip()[-300:]}")


if __name__ == "__main__":
    sys.exit(main())
