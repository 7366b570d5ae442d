"""webpush: mailboxd's Web Push sender vs pywebpush (webpush-sim, 1,000 subscriptions); encryption; freshness."""
import base64
import json
import os
import subprocess

from ..measure import json_line
from ..report import emit, figure
from . import freshness, reference
from .senders import all_accepted, alternate, load, register, rounds_figure, sender_figure


def application_server_key(cluster):
    from cryptography.hazmat.primitives import serialization
    with open(cluster.vapid_key, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def webpush_subscriptions(cluster, count, path):
    """Makes `count` subscriptions at webpush-sim for the cluster's VAPID key; writes their toJSON() to `path`."""
    key = application_server_key(cluster)
    register(cluster.webpush_device_port, "/sim/subscriptions", {"applicationServerKey": key}, count, path,
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


def run(env):
    """mailboxd's Web Push sender against pywebpush, both to webpush-sim with 1,000 subscriptions; each side's
    encryption cost per message; the sender over HTTP/1.1 against HTTP/2; then freshness for 100 browser-shaped
    devices end to end."""
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
    emit(webpush_freshness(env))


def webpush_freshness(env):
    """Freshness (delivery 201 → message in a browser-shaped device's cache) through webpush-sim: mail-client
    --service webpush holds its subscription's keys and decrypts each signal itself."""
    return freshness.service_row(env, "webpush", "w", 13, "Freshness for browser-shaped devices through webpush-sim: "
                                 "delivery 201 → message in the device cache", "Web Push freshness")
