"""console: deliveries/s with a console open vs without; commit → event at the console, 100 devices."""
import os
import time

from .. import data_path, harness
from ..measure import percentile, wrk_script
from ..report import emit, latency_row, paired
from . import freshness


def topology(env, label, users):
    """mailboxd at FULL with the accounts and one made-up device each, no gateway (signals wait in the outbox and
    are retried, as in the scale benchmark); `plain` has no console token, so no console."""
    cluster = env.topology(f"console-{label}")
    cluster.add_accounts(users)
    if label == "plain":
        os.remove(cluster.console_token_file)
    cluster.sim_port = 9
    cluster.start_mailboxd(extra=["--synchronous", "FULL"])
    cluster.register_devices(users, 1, "console", seed=label)
    return cluster


def cost(env, clusters, users):
    seconds, rounds = env.by_mode(8, 20), 3
    script = data_path("deliveries.lua")
    reader = harness.ConsoleReader(clusters["console"], timing=False)

    def rate(cluster):
        return wrk_script(cluster.api_url, seconds, script, cluster.delivery_load_env(users))

    rate(clusters["console"])  # warm-up
    rate(clusters["plain"])
    with_console, without = [], []
    for _ in range(rounds):
        without.append(rate(clusters["plain"]))
        with_console.append(rate(clusters["console"]))
    reader.close()
    emit(paired("console-cost", "Durable deliveries/s with the console on and one console open, vs without a "
                "console", "deliveries/s", "console open", with_console, "no console", without, 0.95,
                events_streamed=reader.events))


def run(env):
    """The console's cost on the API and how soon it shows what happens. Cost: durable deliveries/s (wrk, 16
    connections, POST /v1/deliveries over TLS) into a mailboxd with the console on and one console reading its
    stream, against the same mailboxd without a console token, rounds alternating. Reach: at 50 deliveries/s to
    100 devices (mail-client through apns-sim), how long after each change's commit (and each signal's answer,
    each fetch) the event reaches an open console."""
    users = freshness.users(16)
    clusters = {}
    try:
        for label in ("console", "plain"):
            clusters[label] = topology(env, label, users)
        cost(env, clusters, users)
    finally:
        for cluster in clusters.values():
            cluster.close()
    emit(console_reach(env))


def console_reach(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=100.0):
    """How long after each commit (each signal's answer, each fetch) its event reaches an open console; its row."""
    users = freshness.users(accounts)
    with freshness.topology(env, "console-reach", users) as cluster:
        harness.raise_fd_limit()
        clients = harness.start_devices(cluster, users, per_account)
        reader = harness.ConsoleReader(cluster)
        time.sleep(0.5)
        for lags in reader.lags.values():
            lags.clear()
        harness.deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=17)
        harness.converge(cluster, clients, users, 60, "console reach")
        time.sleep(0.5)
        reader.close()
        changes = reader.lags["change"]
        if len(changes) < deliveries:
            raise RuntimeError(f"console reach: {len(changes)} change events for {deliveries} deliveries")
        summary = {kind: {"events": len(values), "p50_ms": round(percentile(values, 50), 1),
                          "p99_ms": round(percentile(values, 99), 1)} for kind, values in reader.lags.items() if values}
        return latency_row("console-reach", f"Commit → event at an open console, {len(clients.devices)} devices, "
                           f"{rate:.0f} deliveries/s", changes, goal_p99, "console events",
                           devices=len(clients.devices), deliveries=deliveries, by_event=summary)
