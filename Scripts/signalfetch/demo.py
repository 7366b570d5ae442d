"""Drives the SignalFetch demo on the harness's topology: real processes, real TLS, a readable timeline.

Usage: python3 -m signalfetch.demo --bin DIR [--keep] [--screenshot PNG]"""
import argparse, json, os, signal, smtplib, subprocess, sys, time
from email.message import EmailMessage

from . import harness, peer_path, test_python

T0 = time.monotonic()
MAIL = [
    ("alice", "carol@example.com", "Lunch on Thursday?", "Shall we try the new place on 5th?"),
    ("bob", "dave@example.com", "Build is green", "All 214 tests passed on main."),
    ("alice", "erin@example.com", "Your itinerary", "Flight SF123 departs 09:40 from gate B7."),
]


def stamp():
    return f"{(time.monotonic() - T0) * 1000:8.1f} ms"


def say(who, text):
    print(f"{stamp()}  {who:<14} {text}", flush=True)


def show(device, event):
    """A device's event on the timeline (called on the devices' reader thread)."""
    kind = event.get("event")
    if kind == "signal":
        say(device.name, "signal  " + json.dumps(event.get("payload"), separators=(",", ":")))
    elif kind == "sync-done":
        say(device.name, f"fetched +{event.get('created', 0)} ~{event.get('updated', 0)} -{event.get('destroyed', 0)} "
                         f"in {event.get('ms', 0)} ms (cache {event.get('messages')} messages, state "
                         f"{event.get('state')})")
    elif kind == "badge":
        say(device.name, f"badge   {event.get('badge')}")
    elif kind == "registered":
        where = {"fcm": "fcm-sim", "webpush": "webpush-sim (a browser subscription)"}.get(
            device.service, f"apns-sim ({device.environment})")
        say(device.name, f"registered with {where}, token {str(event.get('deviceToken'))[:12]}…")
    elif kind == "error":
        say(device.name, f"error   {event.get('code')}: {event.get('message')}")


class Demo:
    def __init__(self, args):
        self.args = args
        self.cluster = harness.Cluster(args.bin, prefix="signalfetch-demo-", keep=args.keep)
        self.issued = []  # every access token the demo is given, searched for in mailboxd's log at the end
        self.devices = []

    def start_servers(self):
        c = self.cluster
        say("setup", f"dev-setup into {c.data}")
        for user in ["alice", "bob"]:
            c.add_accounts([user])
            say("setup", f"account {user}")
        c.start_apns_sim(sandbox=True)
        say("apns-sim", f"provider API https://127.0.0.1:{c.sim_port} (production) and https://127.0.0.1:"
                        f"{c.sandbox_port} (sandbox), HTTP/2; devices {c.sim_url}")
        c.start_fcm_sim()
        say("fcm-sim", f"FCM HTTP v1 and OAuth https://127.0.0.1:{c.fcm_port}; devices {c.fcm_sim_url}")
        c.start_webpush_sim(subject="mailto:demo@example.com")
        say("webpush-sim", f"push resources https://127.0.0.1:{c.webpush_port} (RFC 8030, VAPID); devices "
                           f"{c.webpush_sim_url}")
        c.start_mailboxd(extra=["--fcm-config", c.fcm_config, "--lmtp-listen", "127.0.0.1:0",
                                "--imap-listen", "127.0.0.1:0", *c.webpush_flags, "--access-log"])
        self.lmtp_port, self.imap_port = c.lmtp_port, c.imap_port
        say("mailboxd", f"API {c.api_url} (TLS, dev CA); LMTP 127.0.0.1:{self.lmtp_port} for an MTA; IMAP "
                        f"imaps://localhost:{self.imap_port} for mail clients")
        self.console_url = f"{c.api_url}/console"
        say("console", f"{self.console_url} (sign in with the token in {c.console_token_file})")
        self.api = c.api()

    def start_devices(self):
        """alice's phone and tablet run development builds (sandbox tokens); bob's phone an App Store build; bob's
        Android phone is signalled through FCM; alice's browser through Web Push (its signals encrypted to it); bob's
        mail app fetches over IMAP (QRESYNC) after each APNs signal; alice's iPad app fetches through URLSession."""
        clients = harness.MailClients(self.cluster, fallback=30, on_event=show)
        for name, user, service, environment in [
                ("alice-phone", "alice", "apns", "sandbox"), ("alice-tablet", "alice", "apns", "sandbox"),
                ("bob-phone", "bob", "apns", "production"), ("bob-android", "bob", "fcm", None),
                ("alice-browser", "alice", "webpush", None)]:
            self.devices.append(clients.add(name, user, service=service, environment=environment))
        self.devices.append(clients.add("bob-mail-app", "bob", service="apns", environment="production",
                                        imap_port=self.imap_port))
        # alice's iPad app talks to the API through URLSession, as an app ships MailSync (MailSyncURLSession).
        if harness.can_trust_in_namespace():
            self.devices.append(clients.add("alice-ipad", "alice", service="apns", environment="sandbox",
                                            urlsession=True))
        else:
            say("alice-ipad", "not started: its URLSession trusts the system store only, and giving it the dev CA in "
                              "a mount namespace of its own needs root")
        try:
            clients.wait_ready(timeout=30)
        except RuntimeError as error:
            raise SystemExit(f"demo: a device never completed its first sync ({error})")
        self.tablet = self.devices[1]

    def sign_in(self, user, device_name):
        token = self.api.login(user, f"password-{user}", device_name)
        self.issued.append(token)
        return token

    def deliver_mail(self):
        for to, sender, subject, body in MAIL:
            status, receipt = self.api.call("POST", "/v1/deliveries", token=self.cluster.delivery_token,
                                            body={"to": to, "from": sender, "subject": subject, "body": body})
            say("sender", f"delivered to {to}: \"{subject}\" → {status} state {(receipt or {}).get('state')}")
            time.sleep(0.4)
        # The fourth arrives as an MTA would hand it over: a MIME message over LMTP, with a PDF attached.
        invoice = EmailMessage()
        invoice["From"] = "Frank Müller <frank@example.com>"
        invoice["To"] = "Alice <alice@example.test>"
        invoice["Subject"] = "Invoice 2026-118"
        invoice.set_content("Please find the invoice attached.\n")
        invoice.add_attachment(b"%PDF-1.4\n" + bytes(range(256)) * 8, maintype="application", subtype="pdf",
                               filename="invoice-2026-118.pdf")
        with smtplib.LMTP("127.0.0.1", self.lmtp_port) as lmtp:
            refused = lmtp.sendmail("frank@example.com", ["alice@example.test"], invoice.as_bytes())
        say("sender", f"LMTP to alice@example.test: \"Invoice 2026-118\" with invoice-2026-118.pdf → "
                      f"{'refused ' + str(refused) if refused else '250 delivered'}")
        time.sleep(1.0)

    def read_on_phone(self):
        """Read a message on alice's phone; the tablet gets the new badge."""
        token = self.sign_in("alice", "alice-phone (reader)")
        _, listing = self.api.call("GET", "/v1/messages?mailbox=inbox", token=token)
        first = listing["messages"][0]
        status, _ = self.api.call("PATCH", f"/v1/messages/{first['id']}", token=token, body={"seen": True})
        say("alice-phone", f"marked \"{first['subject']}\" read → {status}")
        deadline = time.time() + 10
        while time.time() < deadline and self.tablet.badge != 2:
            time.sleep(0.05)
        say("alice-tablet", f"badge is now {self.tablet.badge} (expected 2)")
        time.sleep(1.0)
        return self.tablet.badge == 2

    def converged(self):
        """Every device's cache holds its account's server state."""
        ok = True
        for device in self.devices:
            token = self.sign_in(device.user, "demo-check")
            _, listing = self.api.call("GET", "/v1/messages?limit=1000", token=token)
            want_state, want_count = listing["state"], len(listing["messages"])
            got = device.last_sync or {}
            if getattr(device, "imap", False):
                # Over IMAP the state is each mailbox's HIGHESTMODSEQ, mailboxd's being the account's modseq.
                modseqs = harness.imap_modseqs(got.get("state", "imap:"))
                at_state = bool(modseqs) and all(m == harness.modseq(want_state) for m in modseqs)
            else:
                at_state = got.get("state") == want_state
            converged = at_state and got.get("messages") == want_count
            ok &= converged
            say("check", f"{device.name}: cache {got.get('messages')} messages at {got.get('state')}; server "
                         f"{want_count} at {want_state} → {'converged' if converged else 'NOT converged'}")
        return ok

    def attachment(self):
        """The attachment reached alice's tablet with the message; its bytes come from the mailbox on demand."""
        dump = json.loads(subprocess.run([self.cluster.exe("mail-client"), "dump", "--state-dir",
                                          self.tablet.state_dir], check=True, capture_output=True, text=True).stdout)
        row = next((m for m in dump["messages"] if m["subject"] == "Invoice 2026-118"), None)
        attachment = (row or {}).get("attachments", [{}])[0] if (row or {}).get("attachments") else {}
        say("alice-tablet", f"cached \"Invoice 2026-118\": attachment {attachment.get('filename')} "
                            f"({attachment.get('type')}, {attachment.get('size')} bytes, part {attachment.get('partId')})")
        if not (row and attachment):
            return False
        token = self.sign_in("alice", "alice-tablet (download)")
        _, part = self.api.raw("GET", f"/v1/messages/{row['id']}/parts/{attachment['partId']}", token=token)
        say("alice-tablet", f"downloaded part {attachment['partId']}: {len(part)} bytes, starts {part[:8]!r}")
        return len(part) == attachment["size"] and part.startswith(b"%PDF-1.4")

    def no_secrets_logged(self):
        """mailboxd's log (its access log included) holds no secret the demo handled: no access token, no delivery
        token, no device token or endpoint."""
        secrets = [self.cluster.delivery_token] + self.issued + [d.token for d in self.devices if d.token]
        logged = self.cluster.mailboxd.output()
        leaked = sum(1 for secret in secrets if secret in logged)
        requests = sum(1 for line in logged.splitlines() if " /v1/" in line)
        say("check", f"mailboxd's log: {requests} access-log lines, {len(secrets)} tokens checked, "
                     f"{'none in it' if leaked == 0 else f'{leaked} FOUND'}")
        return leaked == 0 and requests > 0 and all(d.token for d in self.devices)

    def run(self):
        self.start_servers()
        self.start_devices()
        self.deliver_mail()
        ok = self.read_on_phone()
        ok &= self.converged()
        ok &= self.attachment()
        ok &= self.no_secrets_logged()
        if self.args.screenshot:
            screenshot(self.args.screenshot, self.console_url, self.cluster.console_token_file)
        print(f"\ndemo: {'every device converged' if ok else 'FAILED: not every device converged'}")
        if self.args.keep:
            self.wait_for_ctrl_c()
        return 0 if ok else 1

    def wait_for_ctrl_c(self):
        c = self.cluster
        print(f"demo: still running; watch the loop at {self.console_url}\n"
              f"demo: console token: {c.console_token_file}; dev CA: {c.ca}\n"
              f"demo: deliver more with: mail-client send --server {c.api_url} --ca {c.ca} "
              f"--delivery-token-file {os.path.join(c.data, 'delivery-token')} --to alice --from a@example.com "
              f"--subject Hi --body Hello\n"
              f"demo: Ctrl-C (or SIGTERM, SIGHUP) stops everything (the data stays in {c.work})", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


def screenshot(path, console_url, token_file):
    """Saves the console as headless Chromium shows it (selenium, from the test venv); a machine without Chromium gets a
    note instead."""
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        say("console", "no screenshot: chromium and chromium-driver are not installed (Scripts/bootstrap installs them)")
        return
    python = test_python()
    out = os.path.abspath(path)
    result = subprocess.run([python, peer_path("console_screenshot.py"), "--url", console_url, "--token-file",
                             token_file, "--out", out], capture_output=True, text=True)
    if result.returncode == 0:
        say("console", f"screenshot saved to {out}")
    else:
        say("console", f"no screenshot: {result.stderr.strip()[-300:]}")


def main():
    parser = argparse.ArgumentParser(prog="signalfetch.demo")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--keep", action="store_true",
                        help="leave everything running for a person to watch (the console), until Ctrl-C; keep the data")
    parser.add_argument("--screenshot", default="demo-console.png",
                        help="where to save the console's screenshot (headless Chromium; '' for none)")
    harness.stop_on_termination()
    demo = Demo(parser.parse_args())
    try:
        return demo.run()
    finally:
        demo.cluster.close()


if __name__ == "__main__":
    sys.exit(main())
