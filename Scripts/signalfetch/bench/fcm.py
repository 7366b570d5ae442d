"""fcm: mailboxd's FCM sender vs firebase-admin and vs a bare endpoint (fcm-sim, 1,000 devices); freshness."""
import http.client
import json
import os

from .. import TOPIC
from ..measure import run_json
from ..report import emit, figure, latency_row
from . import freshness, reference

BARE_ANSWER = ('{"access_token":"ya29.bench","expires_in":3599,"token_type":"Bearer",'
               '"name":"projects/signalfetch-dev/messages/1"}')


def fcm_tokens(cluster, count, path):
    """Registers `count` simulated Android devices at fcm-sim; writes their tokens to `path`."""
    conn = http.client.HTTPConnection("127.0.0.1", cluster.fcm_device_port, timeout=30)
    tokens = []
    for _ in range(count):
        conn.request("POST", "/sim/devices", body=json.dumps({"app": TOPIC, "project": "signalfetch-dev"}),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        if response.status != 201:
            raise RuntimeError(f"fcm-sim device registration: {response.status} {body}")
        tokens.append(body["token"])
    conn.close()
    with open(path, "w") as f:
        f.write("\n".join(tokens) + "\n")
    return tokens


def fcm_load(env, cluster, endpoint, ca, tokens_file, count):
    result = run_json([env.bench, "fcm-load", "--endpoint", endpoint, "--token-uri", endpoint + "/token", "--ca", ca,
                       "--service-account", cluster.service_account, "--tokens", tokens_file, "--count", str(count),
                       "--concurrency", "100"])
    if result["succeeded"] == 0:
        raise RuntimeError(f"fcm-load: every signal failed: {result}")
    return result


def firebase_admin(cluster, sim, tokens_file):
    result = reference.run("peer_firebase_admin.py", "--endpoint", sim, "--token-uri", sim + "/token", "--ca",
                           cluster.ca, "--service-account", cluster.service_account, "--tokens", tokens_file,
                           "--count", 2000)
    if result["succeeded"] != result["signals"]:
        raise RuntimeError(f"firebase-admin: only {result['succeeded']} of {result['signals']} accepted")
    return result


def rounds(env, cluster):
    """fcm-sim with 1,000 devices, a bare HTTP/2 endpoint and firebase-admin, rounds alternating."""
    count = env.by_mode(10000, 30000)
    # No per-device rate limit in the way of the throughput figures: 1,000 devices share the load.
    cluster.start_fcm_sim(extra=["--device-rate", "1000000"])
    tokens_file = os.path.join(env.work, "fcm-tokens.txt")
    fcm_tokens(cluster, 1000, tokens_file)
    sim = f"https://127.0.0.1:{cluster.fcm_port}"
    bare_proc, bare_port = env.serve("serve-h2", extra=["--post-body", BARE_ANSWER])
    ours, bares, sdk = [], [], []
    for _ in range(env.by_mode(2, 3)):
        ours.append(fcm_load(env, cluster, sim, cluster.ca, tokens_file, count))
        bares.append(fcm_load(env, cluster, f"https://127.0.0.1:{bare_port}", env.ca, tokens_file, count))
        sdk.append(firebase_admin(cluster, sim, tokens_file))
    env.stop(bare_proc)
    return ours, bares, sdk


def run(env):
    """mailboxd's FCM sender against fcm-sim with 1,000 devices, against a bare HTTP/2 endpoint, and against
    Google's firebase-admin SDK; then freshness for 100 Android devices end to end."""
    cluster = env.topology("fcm")
    try:
        ours, bares, sdk = rounds(env, cluster)
    finally:
        cluster.close()
    o = max(ours, key=lambda r: r["rate"])
    b = max(bares, key=lambda r: r["rate"])
    p = max(sdk, key=lambda r: r["rate"])
    emit(figure("fcm-firebase-admin", "mailboxd's FCM sender vs firebase-admin send_each_async (HTTP/2, 4 "
                "batches of 500 in flight), to fcm-sim with 1,000 devices", "signals/s", "FCMPushService",
                o["rate"], "firebase-admin", p["rate"], 5.0, samples_ours=[r["rate"] for r in ours],
                samples_baseline=[r["rate"] for r in sdk], ours_failed=sum(r["failed"] for r in ours),
                ours_connections=[r["connections"] for r in ours]))
    emit(figure("fcm-sim", "fcm-sim accepted signals/s with 1,000 devices (validation, OAuth, store-and-forward) "
                "vs a bare HTTP2Server endpoint, both driven by the same sender", "signals/s", "fcm-sim",
                o["rate"], "bare HTTP2Server endpoint", b["rate"], 0.5, samples_ours=[r["rate"] for r in ours],
                samples_baseline=[r["rate"] for r in bares]))
    emit(fcm_freshness(env))


def fcm_freshness(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=25.0):
    """Freshness (delivery 201 → message in an Android device's cache) through fcm-sim. Each device gets fewer
    signals than FCM's collapsible burst (20), as fcm-sim applies Android's throttle beyond it."""
    cluster = env.topology("fcm-e2e")
    users = freshness.users(accounts)
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_fcm_sim()
        cluster.start_mailboxd(extra=["--fcm-config", cluster.fcm_config])
        clients, _, samples, early = freshness.run(cluster, users, per_account, deliveries, rate, 11, "fcm e2e",
                                                   service="fcm", letter="a")
        return latency_row("fcm-e2e-freshness", "Freshness for Android devices through fcm-sim: delivery 201 → "
                           "message in the device cache", samples, goal_p99, "FCM freshness",
                           devices=len(clients.devices), accounts=accounts, deliveries=deliveries, offered_rate=rate,
                           synced_before_201=early, signals_received=sum(d.signals for d in clients.devices))
    finally:
        cluster.close()
