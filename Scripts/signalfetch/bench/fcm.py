"""fcm: mailboxd's FCM sender vs firebase-admin and vs a bare endpoint (fcm-sim, 1,000 devices); freshness."""
import os

from .. import TOPIC
from ..report import emit
from . import freshness, reference
from .senders import all_accepted, alternate, load, register, rounds_figure, sender_figure

BARE_ANSWER = ('{"access_token":"ya29.bench","expires_in":3599,"token_type":"Bearer",'
               '"name":"projects/signalfetch-dev/messages/1"}')


def fcm_tokens(cluster, count, path):
    """Registers `count` simulated Android devices at fcm-sim; writes their tokens to `path`."""
    return register(cluster.fcm_device_port, "/sim/devices", {"app": TOPIC, "project": "signalfetch-dev"}, count,
                    path, "fcm-sim device registration", lambda answer: answer["token"])


def fcm_load(env, cluster, endpoint, ca, tokens_file, count):
    """mailboxd's FCM sender (fcm-load) to `endpoint`, trusting `ca`; its result."""
    return load(env, "fcm-load", count, "--endpoint", endpoint, "--token-uri", endpoint + "/token", "--ca", ca,
                "--service-account", cluster.service_account, "--tokens", tokens_file)


def firebase_admin(cluster, sim, tokens_file):
    """firebase-admin's send_each_async to `sim`; its result, every signal accepted."""
    return all_accepted("firebase-admin", reference.run(
        "fcm_firebase_admin.py", "--endpoint", sim, "--token-uri", sim + "/token", "--ca", cluster.ca,
        "--service-account", cluster.service_account, "--tokens", tokens_file, "--count", 2000))


def rounds(env, cluster):
    """fcm-sim with 1,000 devices, a bare HTTP/2 endpoint and firebase-admin, rounds alternating."""
    count = env.by_mode(10000, 30000)
    # No per-device rate limit in the way of the throughput figures: 1,000 devices share the load.
    cluster.start_fcm_sim(extra=["--device-rate", "1000000"])
    tokens_file = os.path.join(env.work, "fcm-tokens.txt")
    fcm_tokens(cluster, 1000, tokens_file)
    sim = f"https://127.0.0.1:{cluster.fcm_port}"
    bare_proc, bare_port = env.serve("serve-h2", extra=["--post-body", BARE_ANSWER])
    bare = f"https://127.0.0.1:{bare_port}"
    ours, bares, sdk = alternate(env, lambda: fcm_load(env, cluster, sim, cluster.ca, tokens_file, count),
                                 lambda: fcm_load(env, cluster, bare, env.ca, tokens_file, count),
                                 lambda: firebase_admin(cluster, sim, tokens_file))
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
    emit(sender_figure("fcm-firebase-admin", "mailboxd's FCM sender vs firebase-admin send_each_async (HTTP/2, 4 "
                       "batches of 500 in flight), to fcm-sim with 1,000 devices", "FCMPushService", ours,
                       "firebase-admin", sdk, 5.0))
    emit(rounds_figure("fcm-sim", "fcm-sim accepted signals/s with 1,000 devices (validation, OAuth, "
                       "store-and-forward) vs a bare HTTP2Server endpoint, both driven by the same sender", "fcm-sim",
                       ours, "bare HTTP2Server endpoint", bares, 0.5))
    emit(fcm_freshness(env))


def fcm_freshness(env):
    """Freshness (delivery 201 → message in an Android device's cache) through fcm-sim. Each device gets fewer
    signals than FCM's collapsible burst (20), as fcm-sim applies Android's throttle beyond it."""
    return freshness.service_row(env, "fcm", "a", 11, "Freshness for Android devices through fcm-sim: delivery 201 → "
                                 "message in the device cache", "FCM freshness")
