"""webpush: mailboxd's Web Push sender vs pywebpush (webpush-sim, 1,000 subscriptions); encryption; HTTP/1.1 vs
HTTP/2; mailboxd's signals through an HTTP proxy vs direct; freshness."""
import base64
import concurrent.futures
import json
import os
import subprocess
import time

from .. import harness
from ..measure import json_line
from ..report import emit, figure, paired
from . import freshness, reference
from .senders import all_accepted, alternate, load, rates, register, rounds_figure, sender_figure


def application_server_key(cluster):
    from cryptography.hazmat.primitives import serialization
    with open(cluster.vapid_key, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def webpush_subscriptions(cluster, count, path):
    """Makes `count` subscriptions at webpush-sim for the cluster's VAPID key; writes their toJSON() to `path`, one
    a line; those lines."""
    key = application_server_key(cluster)
    return register(cluster.webpush_device_port, "/sim/subscriptions", {"applicationServerKey": key}, count, path,
                    "webpush-sim subscription", lambda answer: json.dumps(answer["subscription"]))


def webpush_load(env, cluster, subscriptions, count):
    """mailboxd's Web Push sender (webpush-load) to webpush-sim; its result."""
    return load(env, "webpush-load", count, "--subscriptions", subscriptions, "--vapid-key", cluster.vapid_key,
                "--ca", cluster.ca, "--allow-host", f"127.0.0.1:{cluster.webpush_port}")


def pywebpush(cluster, subscriptions, *extra, count=2000):
    return reference.run("webpush_pywebpush.py", *extra, "--subscriptions", subscriptions, "--vapid-key",
                         cluster.vapid_key, "--ca", cluster.ca, "--count", count)


def senders(env, cluster, subscriptions):
    """mailboxd's Web Push sender and pywebpush to webpush-sim, rounds alternating; their figure."""
    count = env.by_mode(10000, 30000)
    ours, theirs = alternate(env, lambda: webpush_load(env, cluster, subscriptions, count),
                             lambda: all_accepted("pywebpush", pywebpush(cluster, subscriptions)))
    emit(sender_figure("webpush-pywebpush", "mailboxd's Web Push sender vs pywebpush webpush_async (one aiohttp "
                       "session, 100 in flight), to webpush-sim with 1,000 subscriptions", "WebPushPushService", ours,
                       "pywebpush", theirs, 10.0))


def encryption(env, cluster, subscriptions):
    count = env.by_mode(5000, 20000)
    mine = json_line(subprocess.run([env.bench, "webpush-encrypt", "--count", str(count)], capture_output=True,
                                    text=True, timeout=600).stdout)
    theirs = pywebpush(cluster, subscriptions, "--encrypt-only", count=count // 5)
    emit(figure("webpush-encrypt", "One Web Push body's encryption (fresh P-256 key, ECDH, HKDF, AES-128-GCM), "
                "µs per message: WebPushEncryption vs pywebpush's http_ece", "µs", "WebPushEncryption",
                mine["microseconds"], "pywebpush (http_ece)", theirs["microseconds"], 1.0,
                higher_is_better=False, body_bytes=mine["bodyBytes"]))


def http1_vs_http2(env, cluster, subscriptions):
    """mailboxd's Web Push sender to webpush-sim over HTTP/2 and to webpush-sim as a UnifiedPush distributor
    (`--distributor ntfy`: HTTP/1.1 only), 1,000 subscriptions each, rounds alternating; reported (no goal). Each
    subscription gets fewer signals than the distributor's burst of 60."""
    count = env.by_mode(10000, 30000)
    distributor = env.topology("webpush-h1")
    try:
        distributor.start_webpush_sim(extra=["--distributor", "ntfy"])
        h1_subscriptions = os.path.join(env.work, "webpush-h1-subscriptions.txt")
        webpush_subscriptions(distributor, 1000, h1_subscriptions)
        h1, h2 = alternate(env, lambda: webpush_load(env, distributor, h1_subscriptions, count),
                           lambda: webpush_load(env, cluster, subscriptions, count))
    finally:
        distributor.close()
    emit(rounds_figure("webpush-http1", "mailboxd's Web Push sender over HTTP/1.1 (libcurl, to webpush-sim as a "
                       "UnifiedPush distributor) vs over HTTP/2 (to webpush-sim), 1,000 subscriptions each",
                       "HTTP/1.1 (distributor)", h1, "HTTP/2", h2, None))


SENT = "mailboxd_signals_sent_total"


def start_signalling(cluster, users, per_account, proxy=False):
    """On a fresh topology: `users`' accounts, webpush-sim and a mailboxd signalling `per_account` subscriptions of
    each account's (pacing out of the way, no APNs gateway), through tinyproxy in front of webpush-sim when
    `proxy`; returns once the registrations' own signals are accepted."""
    cluster.add_accounts(users)
    cluster.start_webpush_sim()
    through = ["--push-proxy", cluster.start_tinyproxy(cluster.webpush_port)] if proxy else []
    cluster.start_mailboxd(apns_port=9, extra=[*cluster.webpush_flags, *through, "--signal-burst", "10000",
                                               "--device-registrations-per-hour", str(per_account)])
    lines = webpush_subscriptions(cluster, len(users) * per_account, os.path.join(cluster.work, "subscriptions.txt"))
    api = cluster.api()

    def register_account(n):
        token = api.login(users[n], f"password-{users[n]}", "bench")
        for line in lines[n * per_account:(n + 1) * per_account]:
            status, answer = api.call("POST", "/v1/devices", token=token,
                                      body={"service": "webpush", "subscription": json.loads(line)})
            if status != 201:
                raise RuntimeError(f"Web Push device registration: HTTP {status} {answer}")

    with concurrent.futures.ThreadPoolExecutor(len(users)) as pool:  # a connection each: the writes group-commit
        list(pool.map(register_account, range(len(users))))
    wait_sent(cluster, len(lines))


def wait_sent(cluster, target, timeout=60):
    """Waits until mailboxd has had `target` signals accepted in all."""
    deadline = time.monotonic() + timeout
    while cluster.metric(SENT) < target:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster.metric(SENT):.0f} of {target} signals accepted after {timeout} s, "
                               f"{cluster.metric('mailboxd_signals_failed_total'):.0f} failed")
        time.sleep(0.005)


def signal_waves(cluster, users, per_account, waves):
    """`waves` times one delivery to each account, each wave's signals (one per device) all accepted before the
    next; the signals/s of the whole, and the CPU µs per signal of mailboxd and of the cluster's tinyproxy."""
    processes = {name: proc for name, proc in (("mailboxd", cluster.mailboxd), ("tinyproxy", cluster.tinyproxy))
                 if proc}
    cpu = {name: proc.cpu_seconds() for name, proc in processes.items()}
    api = cluster.api()
    sent = cluster.metric(SENT)
    start = time.monotonic()
    for wave in range(waves):
        for n, user in enumerate(users):
            harness.deliver(api, cluster, user, wave * len(users) + n, "wave", "Wave")
        sent += len(users) * per_account
        wait_sent(cluster, sent)
    seconds = time.monotonic() - start
    signals = waves * len(users) * per_account
    result = {"signals": signals, "seconds": seconds, "rate": signals / seconds}
    for name, proc in processes.items():
        result[f"{name}_cpu_us"] = round((proc.cpu_seconds() - cpu[name]) / signals * 1e6, 1)
    return result


def proxy_vs_direct(env, accounts=10, per_account=100):
    """mailboxd's Web Push signals through tinyproxy (`--push-proxy`: one CONNECT tunnel to webpush-sim carrying
    the HTTP/2 connection) and direct, each on a topology of its own with 1,000 subscriptions (100 to each of 10
    accounts): waves of one delivery to each account, each wave waited for. The sides alternate in many short
    rounds and the figure is the median round's ratio (`paired`), as for the console's cost: the proxy's cost is a
    few percent, and two long rounds a side measured the machine's drift as much as the proxy."""
    waves, rounds = env.by_mode(2, 4), env.by_mode(7, 15)
    users = freshness.users(accounts)
    clusters = {}
    through, straight = [], []
    try:
        for label in ("proxy", "direct"):
            clusters[label] = env.topology(f"webpush-{label}")
            start_signalling(clusters[label], users, per_account, proxy=label == "proxy")
        for _ in range(rounds):
            through.append(signal_waves(clusters["proxy"], users, per_account, waves))
            straight.append(signal_waves(clusters["direct"], users, per_account, waves))
    finally:
        for cluster in clusters.values():
            cluster.close()
    emit(paired("webpush-proxy", "mailboxd's Web Push signals/s through an HTTP proxy (tinyproxy, one CONNECT "
                "tunnel) vs direct, to webpush-sim with 1,000 subscriptions", "signals/s", "through tinyproxy",
                rates(through), "direct", rates(straight), 0.8,
                ours_cpu_us_per_signal=[r["mailboxd_cpu_us"] for r in through],
                baseline_cpu_us_per_signal=[r["mailboxd_cpu_us"] for r in straight],
                tinyproxy_cpu_us_per_signal=[r["tinyproxy_cpu_us"] for r in through]))


def run(env):
    """mailboxd's Web Push sender against pywebpush, both to webpush-sim with 1,000 subscriptions; each side's
    encryption cost per message; the sender over HTTP/1.1 against HTTP/2; mailboxd's signals through an HTTP
    proxy against direct; then freshness for 100 browser-shaped devices end to end."""
    cluster = env.topology("webpush")
    try:
        cluster.start_webpush_sim()
        subscriptions = os.path.join(env.work, "webpush-subscriptions.txt")
        webpush_subscriptions(cluster, 1000, subscriptions)
        senders(env, cluster, subscriptions)
        encryption(env, cluster, subscriptions)
        http1_vs_http2(env, cluster, subscriptions)
    finally:
        cluster.close()
    proxy_vs_direct(env)
    emit(webpush_freshness(env))


def webpush_freshness(env):
    """Freshness (delivery 201 → message in a browser-shaped device's cache) through webpush-sim: mail-client
    --service webpush holds its subscription's keys and decrypts each signal itself."""
    return freshness.service_row(env, "webpush", "w", 13, "Freshness for browser-shaped devices through webpush-sim: "
                                 "delivery 201 → message in the device cache", "Web Push freshness")
