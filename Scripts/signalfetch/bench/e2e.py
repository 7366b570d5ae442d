"""e2e: freshness with 100 devices and 1,000 deliveries (with its floor, a raw /v1/changes round trip), sync traffic,
a burst to one account against the pacing bound, and freshness with 1,000 devices in `mail-client fleet`s."""
import concurrent.futures
import json
import os
import re
import threading
import time

from .. import harness, log
from ..measure import changes_floor, freshness, percentile
from ..report import emit, latency_row
from . import freshness as runs


def write_samples(env, name, values):
    with open(os.path.join(env.out, name), "w") as f:
        f.write("\n".join(f"{v:.3f}" for v in sorted(values)) + "\n")


def mailbox_bytes(api, token):
    """(bytes, messages) of a full refetch: every /v1/messages page."""
    total, messages, cursor = 0, 0, None
    while True:
        _, raw = api.raw("GET", "/v1/messages?limit=100" + (f"&cursor={cursor}" if cursor else ""), token=token)
        total += len(raw)
        page = json.loads(raw)
        messages += len(page["messages"])
        cursor = page.get("nextCursor")
        if not cursor:
            return total, messages


def traffic(api, users, sent, epoch):
    """Bytes of one-message incremental syncs vs a full refetch of the same mailbox, for 10 accounts."""
    incremental, full, messages = [], [], 0
    for user in users[:10]:
        token = api.login(user, f"password-{user}", "bench-traffic")
        for m in sorted(m for (u, m, _) in sent if u == user):
            _, raw = api.raw("GET", f"/v1/changes?since={epoch}-{m - 1}&max=1", token=token)
            incremental.append(len(raw))
        size, count = mailbox_bytes(api, token)
        full.append(size)
        messages += count
    inc, fmean = sum(incremental) / len(incremental), sum(full) / len(full)
    return {"benchmark": "e2e-traffic", "title": "Bytes fetched: one-message incremental sync vs full refetch",
            "incremental_bytes": round(inc), "full_refetch_bytes": round(fmean),
            "mailbox_messages": round(messages / len(full), 1), "ratio_full_to_incremental": round(fmean / inc, 1),
            "accounts_sampled": len(full)}


def on_urlsession(name):
    """Every fifth account's second device talks to the API through URLSession, as an app ships (root only: its
    trust of the dev CA is a bind mount in a namespace of its own)."""
    user, _, device = name.rpartition("-")
    return harness.can_trust_in_namespace() and device == "d1" and int(re.search(r"\d+$", user).group()) % 5 == 0


def hundred_devices(env, cluster, users, accounts, deliveries, rate):
    start = time.monotonic()
    clients = harness.start_devices(cluster, users, 2, urlsession=on_urlsession)
    log(f"e2e: {len(clients.devices)} devices registered and synced in {time.monotonic() - start:.1f} s")
    api = cluster.api()
    start = time.monotonic()
    sent = harness.deliver_poisson(api, cluster, users, deliveries, rate, seed=7)  # (user, modseq, t201)
    send_seconds = time.monotonic() - start
    harness.converge(cluster, clients, users, 60, "e2e")
    samples, early = freshness(clients, sent)
    floor, epoch = changes_floor(api, users[0])
    write_samples(env, "e2e-freshness.dat", samples)
    write_samples(env, "e2e-floor.dat", floor)
    p50, f50 = percentile(samples, 50), percentile(floor, 50)
    emit(latency_row("e2e-freshness", "Freshness: delivery 201 → message in the device cache", samples, 25.0,
                     "freshness", devices=len(clients.devices), accounts=accounts, deliveries=deliveries,
                     offered_rate=rate, send_seconds=round(send_seconds, 1), floor_p50_ms=round(f50, 2),
                     floor_p99_ms=round(percentile(floor, 99), 2), ratio_p50_to_floor=round(p50 / f50, 1),
                     synced_before_201=early, signals_received=sum(d.signals for d in clients.devices),
                     syncs=sum(len(d.syncs) for d in clients.devices)))
    urlsession = [d for d in clients.devices if d.urlsession]
    if urlsession:
        # The same deliveries as heard by the URLSession devices alone, against the libcurl devices of the same run.
        mine, _ = freshness(clients, sent, devices=lambda d: d.urlsession)
        theirs, _ = freshness(clients, sent, devices=lambda d: not d.urlsession)
        emit(latency_row("e2e-freshness-urlsession", "Freshness of the URLSession devices among the 100", mine, 25.0,
                         "freshness (URLSession)", devices=len(urlsession),
                         libcurl_p50_ms=round(percentile(theirs, 50), 2),
                         libcurl_p99_ms=round(percentile(theirs, 99), 2)))
    emit(traffic(api, users, sent, epoch))
    return clients


def run(env):
    accounts, deliveries, rate = 50, 1000, 50.0  # deliveries per second, Poisson arrivals
    users = runs.users(accounts)
    with runs.topology(env, "e2e", users) as cluster:
        harness.raise_fd_limit()
        clients = hundred_devices(env, cluster, users, accounts, deliveries, rate)
        emit(e2e_burst(cluster, clients, users, users[1]))
    emit(e2e_fleet(env))


def fleet_accounts(cluster, users):
    cluster.add_accounts(users[:1])  # creates and migrates the database, before two processes share it
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # account creation hashes each password
        list(pool.map(lambda chunk: cluster.add_accounts(chunk), [users[1::2], users[2::2]]))


def e2e_fleet(env, accounts=250, per_account=4, deliveries=1000, rate=50.0, per_process=500, goal_p99=100.0):
    """Freshness with 1,000 devices: simulated devices that run the real MailSync engine, `per_process` to a
    `mail-client fleet` process, at the same delivery rate as the 100-device run."""
    users = runs.users(accounts, "fleet")
    with runs.topology(env, "fleet", users, add=fleet_accounts) as cluster:
        clients = harness.MailClients(cluster, fallback=0)
        pairs = [(f"{user}-d{n}", user) for user in users for n in range(per_account)]
        processes = len(range(0, len(pairs), per_process))
        start = time.monotonic()
        for first in range(0, len(pairs), per_process):
            clients.add_fleet(pairs[first:first + per_process])
        clients.wait_ready(timeout=600)
        log(f"e2e fleet: {len(pairs)} devices in {processes} processes registered and synced in "
            f"{time.monotonic() - start:.1f} s")
        started = time.monotonic()
        sent = harness.deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=11)
        send_seconds = time.monotonic() - started
        harness.converge(cluster, clients, users, 120, "e2e fleet")
        samples, early = freshness(clients, sent)
        clients.stop()
        return latency_row("e2e-fleet", f"Freshness with {len(pairs):,} devices", samples, goal_p99,
                           f"freshness with {len(pairs):,} devices", devices=len(pairs), processes=processes,
                           accounts=accounts, deliveries=deliveries, offered_rate=rate,
                           send_seconds=round(send_seconds, 1), synced_before_201=early)


def burst_send(cluster, user, deliveries, senders):
    """`deliveries` to `user` from `senders` threads as fast as they go; the HTTP statuses that were not 201."""
    errors = []

    def send(worker):
        local = cluster.api()
        for i in range(worker, deliveries, senders):
            status, _ = local.call("POST", "/v1/deliveries", token=cluster.delivery_token, body={
                "to": user, "from": f"burst{i}@example.com", "subject": f"Burst {i}", "body": "b"})
            if status != 201:
                errors.append(status)

    threads = [threading.Thread(target=send, args=(w,)) for w in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def e2e_burst(cluster, clients, users, user, deliveries=1000, senders=8, burst=20, refill=1.0):
    """1,000 deliveries to one account as fast as 8 senders go (about a second): each of its devices may get at
    most burst + refill × seconds signals (mailboxd's default pacing), and must end at the burst's final state."""
    devices = [d for d in clients.devices if d.user == user]
    before = {d.name: len(d.signal_times) for d in devices}
    start = time.monotonic()
    errors = burst_send(cluster, user, deliveries, senders)
    burst_seconds = time.monotonic() - start
    if errors:
        raise RuntimeError(f"burst: {len(errors)} deliveries failed: {errors[:5]}")
    harness.converge(cluster, clients, users, 60, "burst")
    time.sleep(2.5)  # any signal still paced arrives (one token a second)
    per_device = []
    for d in devices:
        times = d.signal_times[before[d.name]:]
        span = (times[-1] - start) if times else 0.0
        per_device.append({"device": d.name, "signals": len(times), "span_s": round(span, 2),
                           "bound": round(burst + refill * span, 1)})
    worst = max(p["signals"] - p["bound"] for p in per_device)
    record = {"benchmark": "e2e-burst", "title": f"A burst of {deliveries:,} deliveries to one account",
              "deliveries": deliveries, "burst_seconds": round(burst_seconds, 2), "pacing_burst": burst,
              "pacing_refill_per_s": refill, "devices": per_device, "converged": True, "met": worst <= 0}
    if worst > 0:
        record["finding"] = f"burst: a device got {worst:.0f} more signals than burst + refill × seconds allows"
    return record
