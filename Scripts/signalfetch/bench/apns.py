"""apns: APNsClient vs h2load and vs aioapns against a local HTTP/2 gateway.
apns-sim: accepted notifications/s with 1,000 devices vs a bare HTTP2Server; resident memory up to 10,000."""
import json
import os
import signal
import subprocess
import time

from .. import TOPIC, log
from ..harness import Proc
from ..measure import h2load, run_json
from ..report import emit, figure
from . import reference


def jwt(env, p8, key_id, team_id):
    return subprocess.run([env.bench, "jwt", "--key", p8, "--key-id", key_id, "--team-id", team_id],
                          capture_output=True, text=True, check=True).stdout.strip()


def describe(env):
    """The benchmark notification (signalfetch-bench apns-describe): its payload file and h2load's headers."""
    out = subprocess.run([env.bench, "apns-describe", "--topic", TOPIC], capture_output=True, text=True, check=True)
    spec = json.loads(out.stdout)
    payload = os.path.join(env.work, "payload.json")
    with open(payload, "w") as f:
        f.write(spec["payload"])
    headers = [f"{k}: {v}" for k, v in spec["headers"].items()]
    headers += ["content-type: application/json", f"authorization: bearer {jwt(env, env.p8, env.key_id, env.team_id)}"]
    return payload, headers


def apns_load(env, port, count):
    result = run_json([env.bench, "apns-load", "--url", f"https://127.0.0.1:{port}", "--ca", env.ca, "--key", env.p8,
                       "--key-id", env.key_id, "--team-id", env.team_id, "--topic", TOPIC, "--count", str(count),
                       "--concurrency", "100"])
    if result["succeeded"] == 0:
        raise RuntimeError("apns-load: every notification failed")
    result["accepted_rate"] = result["succeeded"] / result["seconds"]
    return result


def aioapns(env, port, payload):
    result = reference.run("apns_aioapns.py", "--port", port, "--ca", env.ca, "--key", env.p8, "--key-id",
                           env.key_id, "--team-id", env.team_id, "--topic", TOPIC, "--payload", payload,
                           "--count", 2000)
    if result["succeeded"] != result["notifications"]:
        raise RuntimeError(f"aioapns: only {result['succeeded']} of {result['notifications']} accepted")
    return result


def run(env):
    seconds, rounds, count = env.by_mode(5, 15), env.by_mode(2, 3), env.by_mode(20000, 60000)
    payload, headers = describe(env)
    proc, port = env.serve("serve-h2")
    url = f"https://127.0.0.1:{port}/3/device/{'ab' * 32}"
    ours, base, py = [], [], []
    for _ in range(rounds):
        ours.append(apns_load(env, port, count))
        base.append(h2load(url, seconds, headers=headers, data=payload))
        py.append(aioapns(env, port, payload))
    o = max(ours, key=lambda r: r["accepted_rate"])
    b = max(base, key=lambda r: r["rate_2xx"])
    p = max(py, key=lambda r: r["rate"])
    failures = {"ours_failed": sum(r["failed"] for r in ours), "ours_sent": sum(r["notifications"] for r in ours),
                "ours_connections": [r["connections"] for r in ours]}
    emit(figure("apns-h2load", "APNsClient accepted signals/s to a local HTTP2Server gateway (TLS, one connection)",
                "signals/s", "APNsClient", o["accepted_rate"], "h2load (same headers and payload)", b["rate_2xx"],
                0.5, samples_ours=[round(r["accepted_rate"]) for r in ours],
                samples_baseline=[round(r["rate_2xx"]) for r in base], **failures))
    emit(figure("apns-aioapns", "APNsClient vs Python aioapns (2,000 notifications, default concurrency)",
                "signals/s", "APNsClient", o["accepted_rate"], "aioapns", p["rate"], 3.0,
                samples_baseline=[r["rate"] for r in py]))
    env.stop(proc)


# MARK: - apns-sim

def uris_file(env, name, port, tokens):
    path = os.path.join(env.work, name)
    with open(path, "w") as f:
        f.write("\n".join(f"https://127.0.0.1:{port}/3/device/{t}" for t in tokens) + "\n")
    return path


def sim_throughput(env, cluster, tokens, headers, payload):
    """h2load over apns-sim's 1,000 devices and over a bare HTTP2Server, rounds alternating; the best of each."""
    seconds = env.by_mode(5, 15)
    uris = uris_file(env, "uris.txt", cluster.sim_port, tokens)
    bare_proc, bare_port = env.serve("serve-h2")
    bare_uris = uris_file(env, "bare-uris.txt", bare_port, tokens)
    sims, bares = [], []
    for _ in range(env.by_mode(2, 3)):
        sims.append(h2load(None, seconds, headers=headers, data=payload, input_file=uris))
        bares.append(h2load(None, seconds, headers=headers, data=payload, input_file=bare_uris))
    env.stop(bare_proc)
    return sims, bares


def device_events(devices):
    """Stops the device processes; the events they received, from their JSON lines."""
    delivered = 0
    for proc in devices:
        proc.stop(signal.SIGTERM)
        try:
            lines = [json.loads(l) for l in open(proc.out_path) if l.startswith("{")]
            delivered += sum(l.get("events", 0) for l in lines)
        except (OSError, ValueError):
            pass
    return delivered


def sim_run(env, cluster, devices):
    sim = cluster.start_apns_sim()
    time.sleep(0.5)
    rss = {"idle": sim.rss_kb()}
    payload, headers = describe(env)
    # apns-sim verifies tokens from its own dev-setup key: make the JWT with the cluster's key.
    headers = [h for h in headers if not h.startswith("authorization")] + [
        f"authorization: bearer {jwt(env, cluster.p8, cluster.key_id, cluster.team_id)}"]
    tokens_file = os.path.join(env.work, "tokens-1k.txt")
    devices.append(Proc("devices-1k", [env.bench, "devices", "--sim", f"127.0.0.1:{cluster.device_port}", "--count",
                                       "1000", "--tokens-out", tokens_file], env.work))
    ready = devices[-1].first_json_line(timeout=180)
    rss["1k"] = sim.rss_kb()
    tokens = [t for t in open(tokens_file).read().split() if t]
    sims, bares = sim_throughput(env, cluster, tokens, headers, payload)
    rss["after_load"] = sim.rss_kb()
    # Grow to 10,000 connected devices and read the gateway's resident memory.
    devices.append(Proc("devices-9k", [env.bench, "devices", "--sim", f"127.0.0.1:{cluster.device_port}", "--count",
                                       "9000"], env.work))
    ready_9k = devices[-1].first_json_line(timeout=600)
    time.sleep(1)
    rss["10k"] = sim.rss_kb()
    return sims, bares, rss, ready["ready"], ready_9k["ready"], device_events(devices)


def apns_sim(env):
    cluster = env.topology("apnssim")
    devices = []
    try:
        sims, bares, rss, ready, ready_9k, delivered = sim_run(env, cluster, devices)
    finally:
        for proc in devices:
            proc.stop(signal.SIGKILL)
        cluster.close()
    s = max(sims, key=lambda r: r["rate_2xx"])
    b = max(bares, key=lambda r: r["rate_2xx"])
    if s["4xx"] or s["5xx"]:
        log(f"apns-sim: {s['4xx']} 4xx and {s['5xx']} 5xx answers during the run")
    emit(figure("apns-sim", "apns-sim accepted notifications/s, 1,000 connected devices (h2load -c1 -m100, "
                "cached JWT)", "notifications/s", "apns-sim", s["rate_2xx"], "bare HTTP2Server endpoint",
                b["rate_2xx"], 0.5, refused_4xx=s["4xx"], refused_5xx=s["5xx"],
                events_received_by_devices=delivered, devices_connected=ready,
                samples_ours=[round(r["rate_2xx"]) for r in sims],
                samples_baseline=[round(r["rate_2xx"]) for r in bares]))
    emit({"benchmark": "apns-sim-rss", "title": "apns-sim resident memory (VmRSS)",
          "rss_idle_mb": round(rss["idle"] / 1024, 1), "rss_1k_mb": round(rss["1k"] / 1024, 1),
          "rss_after_load_mb": round(rss["after_load"] / 1024, 1), "rss_10k_mb": round(rss["10k"] / 1024, 1),
          "devices": ready + ready_9k, "per_device_kb": round((rss["10k"] - rss["after_load"]) / max(1, ready_9k), 1)})
