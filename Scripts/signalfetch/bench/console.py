"""console: deliveries/s with a console open, with traces exported, with both, vs neither; commit → event at the
console, 100 devices."""
import json
import os
import subprocess
import time
import urllib.request

from .. import data_path, harness, peer_path, test_python
from ..measure import percentile, wrk_script
from ..report import emit, latency_row, paired
from . import freshness


class Collector:
    """An OTLP/HTTP receiver on this machine that reads, counts and drops each export (Tests/Peers/otlp_receiver.py
    --discard): the collector a traced mailboxd sends to, costing as little as a collector elsewhere would."""

    def __init__(self):
        # The receiver decodes with opentelemetry-proto, which the test venv holds (not the Python running the bench).
        self.popen = subprocess.Popen([test_python(), "-u", peer_path("otlp_receiver.py"), "--discard"],
                                      stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.popen.stdout.readline())}"

    def counts(self):
        with urllib.request.urlopen(self.url + "/requests", timeout=10) as answer:
            return json.load(answer)

    def close(self):
        self.popen.terminate()
        self.popen.wait(timeout=10)


def topology(env, label, users, collector=None):
    """mailboxd at FULL with the accounts and one made-up device each, no gateway (signals wait in the outbox and
    are retried, as in the scale benchmark); `plain` and `traced` have no console token, so no console; `traced`
    and `both` export traces to `collector`."""
    cluster = env.topology(f"console-{label}")
    cluster.add_accounts(users)
    if label in ("plain", "traced"):
        os.remove(cluster.console_token_file)
    cluster.sim_port = 9
    extra = ["--otlp-endpoint", collector.url] if label in ("traced", "both") else []
    cluster.start_mailboxd(extra=["--synchronous", "FULL"] + extra)
    cluster.register_devices(users, 1, "console", seed=label)
    return cluster


def cost(env, clusters, users, collector):
    # Many short rounds, the order rotating: the machine's own drift over seconds moves a rate by up to a tenth,
    # more than the few percent measured, so one figure is the median of many back-to-back comparisons.
    seconds, rounds = env.by_mode(3, 6), env.by_mode(12, 20)
    script = data_path("deliveries.lua")
    readers = [harness.ConsoleReader(clusters[label], timing=False) for label in ("console", "both")]

    def rate(cluster):
        return wrk_script(cluster.api_url, seconds, script, cluster.delivery_load_env(users))

    for cluster in clusters.values():  # warm-up
        rate(cluster)
    rates = {label: [] for label in clusters}
    labels = list(clusters)
    for r in range(rounds):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            rates[label].append(rate(clusters[label]))
    for reader in readers:
        reader.close()
    emit(paired("console-cost", "Durable deliveries/s with the console on and one console open, vs without a "
                "console", "deliveries/s", "console open", rates["console"], "no console", rates["plain"], 0.95,
                events_streamed=readers[0].events))
    exported = collector.counts()
    emit(paired("tracing-cost", "Durable deliveries/s exporting a trace per change over OTLP/HTTP (a collector on "
                "the same machine), vs no tracing", "deliveries/s", "traced", rates["traced"], "not traced",
                rates["plain"], 0.95, export_requests=exported["accepted"], export_bytes=exported["bytes"]))
    emit(paired("tracing-console-cost", "Durable deliveries/s exporting traces with one console open as well (one "
                "feed for both), vs neither", "deliveries/s", "traced + console", rates["both"], "neither",
                rates["plain"], 0.95, events_streamed=readers[1].events))


def run(env):
    """The console's and the traces' cost on the API, and how soon the console shows what happens. Cost: durable
    deliveries/s (wrk, 16 connections, POST /v1/deliveries over TLS) into a mailboxd with the console on and one
    console reading its stream, one exporting traces, one with both, against the same mailboxd with neither, rounds
    alternating. Reach: at 50 deliveries/s to
    100 devices (mail-client through apns-sim), how long after each change's commit (and each signal's answer,
    each fetch) the event reaches an open console."""
    users = freshness.users(16)
    clusters = {}
    collector = Collector()
    try:
        for label in ("plain", "console", "traced", "both"):
            clusters[label] = topology(env, label, users, collector)
        cost(env, clusters, users, collector)
    finally:
        for cluster in clusters.values():
            cluster.close()
        collector.close()
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
