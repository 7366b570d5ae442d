"""apps: the app side's HTTP stacks. One sync of 100 new messages into an empty cache (`mail-client run --once`: sign
in, then the engine's launch sync), over URLSession (`--transport urlsession`, the stack an app ships; the dev CA in
the device's own mount namespace, so root only) ÷ over libcurl (the default), the same server and account, rounds
interleaved; the engine's own `ms` of each sync."""
import json
import os
import subprocess

from .. import harness, log
from ..report import emit, paired

MESSAGES = 100


def sync_once(cluster, user, transport, state_dir):
    """(ms, messages) of one launch sync from an empty cache over `transport`."""
    trust = ["--transport", "urlsession"] if transport == "urlsession" else ["--ca", cluster.ca]
    command = [cluster.exe("mail-client"), "run", "--once", "--server", cluster.api_url, *trust, "--username", user,
               "--state-dir", state_dir, "--device-name", f"bench-{transport}"]
    if transport == "urlsession":
        command = harness.urlsession_trust(cluster) + command
    done = subprocess.run(command, input=f"password-{user}\n", capture_output=True, text=True, timeout=120)
    for line in done.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "sync-done":
            return event["ms"], event.get("messages")
    raise RuntimeError(f"mail-client ({transport}) reported no sync: exit {done.returncode}: {done.stderr[-400:]}")


def urlsession_vs_curl(env, rounds=7):
    if not harness.can_trust_in_namespace():
        log("apps: skipped: URLSession's trust of the dev CA needs root (a mount namespace)")
        return None
    cluster = env.topology("apps")
    rates = {"curl": [], "urlsession": []}
    try:
        cluster.add_accounts(["reader"])
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        api = cluster.api()
        for i in range(MESSAGES):
            harness.deliver(api, cluster, "reader", i)
        for r in range(rounds + 1):
            for transport in ("curl", "urlsession") if r % 2 else ("urlsession", "curl"):
                ms, messages = sync_once(cluster, "reader", transport,
                                         os.path.join(cluster.work, f"device-{transport}-{r}"))
                if messages != MESSAGES:
                    raise RuntimeError(f"{transport}: synced {messages} messages, not {MESSAGES}")
                if r > 0:  # the first round warms both up
                    rates[transport].append(MESSAGES * 1000.0 / max(ms, 1))
    finally:
        cluster.close()
    log(f"apps: messages/s, URLSession {[round(v) for v in rates['urlsession']]}, libcurl "
        f"{[round(v) for v in rates['curl']]}")
    return paired("apps-urlsession", f"One sync of {MESSAGES} new messages: URLSession ÷ libcurl (mail-client run --once)",
                  "messages/s", "URLSession", rates["urlsession"], "libcurl", rates["curl"], 0.8, rounds=rounds)


def run(env):
    record = urlsession_vs_curl(env)
    if record:
        emit(record)
