"""webpush: mailboxd's Web Push sender vs pywebpush (webpush-sim, 1,000 subscriptions); encryption; freshness."""
import base64
import http.client
import json
import os
import subprocess

from ..measure import json_line, run_json
from ..report import emit, figure, latency_row
from . import freshness, reference


def application_server_key(cluster):
    from cryptography.hazmat.primitives import serialization
    with open(cluster.vapid_key, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def webpush_subscriptions(cluster, count, path):
    """Makes `count` subscriptions at webpush-sim for the cluster's VAPID key; writes their toJSON() to `path`."""
    key = application_server_key(cluster)
    conn = http.client.HTTPConnection("127.0.0.1", cluster.webpush_device_port, timeout=30)
    lines = []
    for _ in range(count):
        conn.request("POST", "/sim/subscriptions", body=json.dumps({"applicationServerKey": key}),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        if response.status != 201:
            raise RuntimeError(f"webpush-sim subscription: {response.status} {body}")
        lines.append(json.dumps(body["subscription"]))
    conn.close()
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def webpush_load(env, cluster, subscriptions, count):
    result = run_json([env.bench, "webpush-load", "--subscriptions", subscriptions, "--vapid-key", cluster.vapid_key,
                       "--ca", cluster.ca, "--allow-host", f"127.0.0.1:{cluster.webpush_port}", "--count", str(count),
                       "--concurrency", "100"])
    if result["succeeded"] == 0:
        raise RuntimeError(f"webpush-load: every signal failed: {result}")
    return result


def pywebpush(cluster, subscriptions, *extra, count=2000):
    return reference.run("peer_pywebpush.py", *extra, "--subscriptions", subscriptions, "--vapid-key",
                         cluster.vapid_key, "--ca", cluster.ca, "--count", count)


def senders(env, cluster, subscriptions):
    count = env.by_mode(10000, 30000)
    ours, theirs = [], []
    for _ in range(env.by_mode(2, 3)):
        ours.append(webpush_load(env, cluster, subscriptions, count))
        result = pywebpush(cluster, subscriptions)
        if result["succeeded"] != result["signals"]:
            raise RuntimeError(f"pywebpush: only {result['succeeded']} of {result['signals']} accepted")
        theirs.append(result)
    o = max(ours, key=lambda r: r["rate"])
    p = max(theirs, key=lambda r: r["rate"])
    emit(figure("webpush-pywebpush", "mailboxd's Web Push sender vs pywebpush webpush_async (one aiohttp "
                "session, 100 in flight), to webpush-sim with 1,000 subscriptions", "signals/s",
                "WebPushPushService", o["rate"], "pywebpush", p["rate"], 10.0,
                samples_ours=[r["rate"] for r in ours], samples_baseline=[r["rate"] for r in theirs],
                ours_failed=sum(r["failed"] for r in ours), ours_connections=[r["connections"] for r in ours]))


def encryption(env, cluster, subscriptions):
    count = env.by_mode(5000, 20000)
    mine = json_line(subprocess.run([env.bench, "webpush-encrypt", "--count", str(count)], capture_output=True,
                                    text=True, timeout=600).stdout)
    theirs = pywebpush(cluster, subscriptions, "--encrypt-only", count=count // 5)
    emit(figure("webpush-encrypt", "One Web Push body's encryption (fresh P-256 key, ECDH, HKDF, AES-128-GCM), "
                "µs per message: WebPushEncryption vs pywebpush's http_ece", "µs", "WebPushEncryption",
                mine["microseconds"], "pywebpush (http_ece)", theirs["microseconds"], 1.0,
                higher_is_better=False, body_bytes=mine["bodyBytes"]))


def run(env):
    """mailboxd's Web Push sender against pywebpush, both to webpush-sim with 1,000 subscriptions; each side's
    encryption cost per message; then freshness for 100 browser-shaped devices end to end."""
    cluster = env.topology("webpush")
    try:
        cluster.start_webpush_sim()
        subscriptions = os.path.join(env.work, "webpush-subscriptions.txt")
        webpush_subscriptions(cluster, 1000, subscriptions)
        senders(env, cluster, subscriptions)
        encryption(env, cluster, subscriptions)
    finally:
        cluster.close()
    emit(webpush_freshness(env))


def webpush_freshness(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=25.0):
    """Freshness (delivery 201 → message in a browser-shaped device's cache) through webpush-sim: mail-client
    --service webpush holds its subscription's keys and decrypts each signal itself."""
    cluster = env.topology("webpush-e2e")
    users = freshness.users(accounts)
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_webpush_sim()
        cluster.start_mailboxd(extra=cluster.webpush_flags)
        clients, _, samples, early = freshness.run(cluster, users, per_account, deliveries, rate, 13, "webpush e2e",
                                                   service="webpush", letter="w")
        return latency_row("webpush-e2e-freshness", "Freshness for browser-shaped devices through webpush-sim: "
                           "delivery 201 → message in the device cache", samples, goal_p99, "Web Push freshness",
                           devices=len(clients.devices), accounts=accounts, deliveries=deliveries, offered_rate=rate,
                           synced_before_201=early, signals_received=sum(d.signals for d in clients.devices))
    finally:
        cluster.close()
