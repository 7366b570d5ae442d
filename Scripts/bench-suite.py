#!/usr/bin/env python3
"""SignalFetch component benchmarks, each against a baseline measured in the same run.

Usage: bench-suite.py BENCHMARK --mode quick|full --out DIR
BENCHMARK: transport | apns | apns-sim | fcm | webpush | console | e2e | live | ingest | scale. Prints one JSON object per figure on standard output."""
import argparse, concurrent.futures, http.client, importlib.machinery, json, os, random, re, resource, shutil, signal
import base64, subprocess, sys
import ssl, tempfile, threading, urllib.parse
import time

common = importlib.machinery.SourceFileLoader(
    "bench_common", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-common.py")).load_module()
log, Proc, free_port, wait_port, percentile = common.log, common.Proc, common.free_port, common.wait_port, \
    common.percentile
TOPIC = common.TOPIC
SCRIPTS = os.path.dirname(os.path.abspath(__file__))
TINY_JSON = '{"status":"ok","service":"signalfetch","version":1}'


def figure(benchmark, title, unit, ours_label, ours, base_label, base, goal, higher_is_better=True, **details):
    ratio = ours / base if base else 0.0
    met = ratio >= goal if higher_is_better else ratio <= goal
    record = {"benchmark": benchmark, "title": title, "unit": unit, "ours_label": ours_label,
              "ours": round(ours, 1), "baseline_label": base_label, "baseline": round(base, 1),
              "ratio": round(ratio, 3), "goal": goal, "goal_op": ">=" if higher_is_better else "<=", "met": met}
    record.update(details)
    return record


def emit(record):
    print(json.dumps(record), flush=True)


def paired(benchmark, title, unit, ours_label, ours, base_label, base, goal, **details):
    """A figure from interleaved rounds: each round's ours ÷ baseline (both sides measured back to back, so they
    saw the same moments of the machine); the median round is the figure, and the spread of the ratios says how
    much the machine moved."""
    ratios = [o / b for o, b in zip(ours, base) if b]
    order = sorted(range(len(ratios)), key=lambda i: ratios[i])
    mid = order[len(order) // 2]
    record = figure(benchmark, title, unit, ours_label, ours[mid], base_label, base[mid], goal, **details)
    record.update({"round_ratios": [round(r, 3) for r in ratios],
                   "ratio_spread": round(max(ratios) - min(ratios), 3) if ratios else None,
                   "samples_ours": [round(v) for v in ours], "samples_baseline": [round(v) for v in base]})
    return record


# MARK: - Tools

def wrk(url, seconds, connections=32):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url], capture_output=True,
                         text=True, timeout=seconds + 30).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1, "s": 1000}
    return {"rate": rate, "non2xx": int(errors.group(1)) if errors else 0,
            "p99_ms": round(float(p99.group(1)) * scale[p99.group(2)], 3) if p99 else None}


def h2load(target, seconds, streams=100, headers=(), data=None, input_file=None, warmup=1):
    args = ["h2load", "-c1", f"-m{streams}", "-D", str(seconds), "--warm-up-time", str(warmup)]
    for h in headers:
        args += ["-H", h]
    if data:
        args += ["-d", data]
    if input_file:
        args += ["-i", input_file]
    else:
        args.append(target)
    out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + warmup + 60).stdout
    m = re.search(r"finished in ([\d.]+)s, ([\d.]+) req/s", out)
    if not m:
        raise RuntimeError("h2load produced no result: " + out[-800:])
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done", out)
    ok, done_n = int(codes.group(1)), int(done.group(1))
    rate = float(m.group(2))
    return {"rate": rate, "rate_2xx": rate * ok / done_n if done_n else 0.0, "done": done_n, "2xx": ok,
            "4xx": int(codes.group(3)), "5xx": int(codes.group(4))}


def bench_json(proc_output):
    for line in proc_output.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON result in: " + proc_output[-500:])


class Env:
    def __init__(self, args):
        self.mode = args.mode
        self.quick = args.mode == "quick"
        self.bin = common.bin_dir()
        self.bench = os.path.join(self.bin, "signalfetch-bench")
        self.work = tempfile.mkdtemp(prefix="signalfetch-bench-")
        self.data = os.path.join(self.work, "data")
        subprocess.run([os.path.join(self.bin, "mailboxd"), "dev-setup", "--data-dir", self.data], check=True,
                       stdout=subprocess.DEVNULL)
        self.ca = os.path.join(self.data, "tls/ca.pem")
        self.cert = os.path.join(self.data, "tls/server.pem")
        self.key = os.path.join(self.data, "tls/server.key")
        self.p8 = os.path.join(self.data, "apns/key.p8")
        self.key_id = open(os.path.join(self.data, "apns/key-id")).read().strip()
        self.team_id = open(os.path.join(self.data, "apns/team-id")).read().strip()
        self.procs = []
        self.www = os.path.join(self.work, "www")
        os.makedirs(self.www)
        with open(os.path.join(self.www, "status.json"), "w") as f:
            f.write(TINY_JSON)
        for path in (self.work, self.www):
            os.chmod(path, 0o755)
        os.chmod(os.path.join(self.www, "status.json"), 0o644)

    def start(self, name, args, **kw):
        proc = Proc(name, args, self.work, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc):
        proc.stop()
        self.procs.remove(proc)

    def serve(self, kind, tls=True, extra=()):
        args = [self.bench, kind] + (["--tls-cert", self.cert, "--tls-key", self.key] if tls else []) + list(extra)
        proc = self.start(kind + str(len(self.procs)), args)
        port = proc.first_json_line()["port"]
        wait_port(port, proc=proc)
        return proc, port

    def nginx(self):
        port = free_port()
        conf = os.path.join(self.work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes auto;
pid {self.work}/nginx.pid;
error_log {self.work}/nginx-error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {self.work}/nginx-body;
    proxy_temp_path {self.work}/nginx-proxy;
    fastcgi_temp_path {self.work}/nginx-fastcgi;
    uwsgi_temp_path {self.work}/nginx-uwsgi;
    scgi_temp_path {self.work}/nginx-scgi;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {self.www}; default_type application/json; }}
    }}
}}
""")
        proc = self.start("nginx", ["nginx", "-c", conf, "-p", self.work, "-g", "daemon off;"])
        wait_port(port, proc=proc)
        return proc, port

    def nghttpd(self):
        port = free_port()
        proc = self.start("nghttpd", ["nghttpd", "-d", self.www, str(port), self.key, self.cert])
        wait_port(port, proc=proc)
        return proc, port

    def close(self):
        for proc in reversed(self.procs):
            proc.stop()
        shutil.rmtree(self.work, ignore_errors=True)


# MARK: - transport

def transport(env):
    # Short rounds, many of them, ours and the baseline back to back in each: both sides see the same moments of
    # a noisy machine, and the figure is the median round's ratio with the spread of all rounds beside it.
    seconds = 3 if env.quick else 8
    rounds = 5 if env.quick else 7
    # (a) HTTPServer vs nginx, HTTP/1.1 keep-alive, plain HTTP.
    ours_proc, ours_port = env.serve("serve-http", tls=False)
    nginx_proc, nginx_port = env.nginx()
    ours, base = [], []
    for _ in range(rounds):
        ours.append(wrk(f"http://127.0.0.1:{ours_port}/status.json", seconds))
        base.append(wrk(f"http://127.0.0.1:{nginx_port}/status.json", seconds))
    emit(paired("transport-http1", "HTTPServer tiny-JSON GET, HTTP/1.1 keep-alive (wrk -t1 -c32)", "req/s",
                "HTTPServer", [r["rate"] for r in ours], "nginx (static file)", [r["rate"] for r in base], 0.5,
                ours_p99_ms=max(r["p99_ms"] or 0 for r in ours), ours_non2xx=sum(r["non2xx"] for r in ours)))
    env.stop(ours_proc)
    env.stop(nginx_proc)

    # (b) HTTP2Server vs nghttpd, h2load -c1 -m100 over TLS.
    h2_proc, h2_port = env.serve("serve-h2")
    ng_proc, ng_port = env.nghttpd()
    ours, base = [], []
    for _ in range(rounds):
        ours.append(h2load(f"https://127.0.0.1:{h2_port}/status.json", seconds))
        base.append(h2load(f"https://127.0.0.1:{ng_port}/status.json", seconds))
    emit(paired("transport-http2", "HTTP2Server tiny-JSON GET over TLS (h2load -c1 -m100)", "req/s",
                "HTTP2Server", [r["rate_2xx"] for r in ours], "nghttpd", [r["rate_2xx"] for r in base], 0.5))
    env.stop(h2_proc)

    # (c) The clients against the same server (nghttpd), one HTTP/2 connection over TLS, 100 requests in flight:
    # HTTPClient (libcurl multi), the same libcurl loop written directly in C (the ceiling of any libcurl-based
    # client here), HTTP2Client (nghttp2), and h2load, each round all four back to back.
    count = 10000 if env.quick else 40000
    url = f"https://127.0.0.1:{ng_port}/status.json"
    curl_c, ours, h2c, base = [], [], [], []

    def load(args, name):
        out = subprocess.run(args, capture_output=True, text=True, timeout=600)
        result = bench_json(out.stdout)
        if result["failed"]:
            raise RuntimeError(f"{name}: {result['failed']} requests failed")
        return result

    for _ in range(rounds):
        ours.append(load([env.bench, "client-load", "--url", url, "--ca", env.ca, "--count", str(count),
                          "--concurrency", "100"], "client-load"))
        curl_c.append(load([os.path.join(env.bin, "curl-multi-load"), url, env.ca, str(count), "100", "1000"],
                           "curl-multi-load"))
        h2c.append(load([env.bench, "h2client-load", "--url", url, "--ca", env.ca, "--count", str(count * 3),
                         "--concurrency", "100"], "h2client-load"))
        base.append(h2load(url, seconds, warmup=0))
    h2load_rates = [r["rate_2xx"] for r in base]
    emit(paired("transport-client", "HTTPClient (libcurl) GETs over one HTTP/2 connection, 100 concurrent "
                "(server: nghttpd)", "req/s", "HTTPClient", [r["rate"] for r in ours], "h2load -c1 -m100",
                h2load_rates, 0.5, connections=max(r["connections"] for r in ours)))
    emit(paired("transport-client-libcurl", "HTTPClient vs the same libcurl multi loop written in C (the libcurl "
                "ceiling on this machine)", "req/s", "HTTPClient", [r["rate"] for r in ours],
                "libcurl multi loop in C", [r["rate"] for r in curl_c], 0.5,
                libcurl_c_vs_h2load=round(sorted(c["rate"] / b for c, b in zip(curl_c, h2load_rates))[rounds // 2], 3)))
    emit(paired("transport-http2client", "HTTP2Client (nghttp2) GETs over one HTTP/2 connection, 100 concurrent "
                "(server: nghttpd)", "req/s", "HTTP2Client", [r["rate"] for r in h2c], "h2load -c1 -m100",
                h2load_rates, 0.6, connections=max(r["connections"] for r in h2c)))
    env.stop(ng_proc)


# MARK: - apns

def describe(env):
    out = subprocess.run([env.bench, "apns-describe", "--topic", TOPIC], capture_output=True, text=True, check=True)
    spec = json.loads(out.stdout)
    payload = os.path.join(env.work, "payload.json")
    with open(payload, "w") as f:
        f.write(spec["payload"])
    jwt = subprocess.run([env.bench, "jwt", "--key", env.p8, "--key-id", env.key_id, "--team-id", env.team_id],
                         capture_output=True, text=True, check=True).stdout.strip()
    headers = [f"{k}: {v}" for k, v in spec["headers"].items()]
    headers += ["content-type: application/json", f"authorization: bearer {jwt}"]
    return payload, headers


def bench_python():
    """A Python with the reference clients (aioapns, firebase-admin, pywebpush with aiohttp): .venv-bench
    (created or completed here when one is missing)."""
    venv = os.path.join(common.ROOT, ".venv-bench")
    python = os.path.join(venv, "bin", "python3")
    if not os.path.exists(python) or subprocess.run([python, "-c", "import aioapns, firebase_admin, pywebpush, aiohttp"],
                                                    capture_output=True).returncode:
        log("==> preparing .venv-bench with aioapns, firebase-admin and pywebpush")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "aioapns", "firebase-admin", "pywebpush", "aiohttp"],
                       check=True)
    return python


def apns(env):
    seconds = 5 if env.quick else 15
    rounds = 2 if env.quick else 3
    count = 20000 if env.quick else 60000
    payload, headers = describe(env)
    proc, port = env.serve("serve-h2")
    token = "ab" * 32
    url = f"https://127.0.0.1:{port}/3/device/{token}"
    python = bench_python()
    ours, base, py = [], [], []
    for _ in range(rounds):
        out = subprocess.run([env.bench, "apns-load", "--url", f"https://127.0.0.1:{port}", "--ca", env.ca,
                              "--key", env.p8, "--key-id", env.key_id, "--team-id", env.team_id, "--topic", TOPIC,
                              "--count", str(count), "--concurrency", "100"], capture_output=True, text=True,
                             timeout=600)
        result = bench_json(out.stdout)
        if result["succeeded"] == 0:
            raise RuntimeError("apns-load: every notification failed")
        result["accepted_rate"] = result["succeeded"] / result["seconds"]
        ours.append(result)
        base.append(h2load(url, seconds, headers=headers, data=payload))
        out = subprocess.run([python, os.path.join(SCRIPTS, "bench-aioapns.py"), "--port", str(port), "--ca", env.ca,
                              "--key", env.p8, "--key-id", env.key_id, "--team-id", env.team_id, "--topic", TOPIC,
                              "--payload", payload, "--count", "2000"], capture_output=True, text=True,
                             timeout=600)
        result = bench_json(out.stdout + "\n" + out.stderr[-300:])
        if result["succeeded"] != result["notifications"]:
            raise RuntimeError(f"aioapns: only {result['succeeded']} of {result['notifications']} accepted")
        py.append(result)
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

def apns_sim(env):
    seconds = 5 if env.quick else 15
    cluster = common.Cluster(env.bin, prefix="signalfetch-apnssim-")
    devices = []
    try:
        sim = cluster.start_apns_sim()
        time.sleep(0.5)
        rss_idle = sim.rss_kb()
        payload, headers = describe(env)
        # apns-sim verifies tokens from its own dev-setup key: make the JWT with the cluster's key.
        jwt = subprocess.run([env.bench, "jwt", "--key", cluster.p8, "--key-id", cluster.key_id, "--team-id",
                              cluster.team_id], capture_output=True, text=True, check=True).stdout.strip()
        headers = [h for h in headers if not h.startswith("authorization")] + [f"authorization: bearer {jwt}"]
        tokens_file = os.path.join(env.work, "tokens-1k.txt")
        first = Proc("devices-1k", [env.bench, "devices", "--sim", f"127.0.0.1:{cluster.device_port}", "--count",
                                    "1000", "--tokens-out", tokens_file], env.work)
        devices.append(first)
        ready = first.first_json_line(timeout=180)
        rss_1k = sim.rss_kb()
        tokens = [t for t in open(tokens_file).read().split() if t]
        uris = os.path.join(env.work, "uris.txt")
        with open(uris, "w") as f:
            f.write("\n".join(f"https://127.0.0.1:{cluster.sim_port}/3/device/{t}" for t in tokens) + "\n")
        bare_proc, bare_port = env.serve("serve-h2")
        bare_uris = os.path.join(env.work, "bare-uris.txt")
        with open(bare_uris, "w") as f:
            f.write("\n".join(f"https://127.0.0.1:{bare_port}/3/device/{t}" for t in tokens) + "\n")
        sims, bares = [], []
        for _ in range(2 if env.quick else 3):
            sims.append(h2load(None, seconds, headers=headers, data=payload, input_file=uris))
            bares.append(h2load(None, seconds, headers=headers, data=payload, input_file=bare_uris))
        s = max(sims, key=lambda r: r["rate_2xx"])
        b = max(bares, key=lambda r: r["rate_2xx"])
        if s["4xx"] or s["5xx"]:
            log(f"apns-sim: {s['4xx']} 4xx and {s['5xx']} 5xx answers during the run")
        env.stop(bare_proc)
        rss_after_load = sim.rss_kb()
        # Grow to 10,000 connected devices and read the gateway's resident memory.
        more = Proc("devices-9k", [env.bench, "devices", "--sim", f"127.0.0.1:{cluster.device_port}", "--count",
                                   "9000"], env.work)
        devices.append(more)
        ready_9k = more.first_json_line(timeout=600)
        time.sleep(1)
        rss_10k = sim.rss_kb()
        delivered = 0
        for proc in devices:
            proc.stop(signal.SIGTERM)
            try:
                lines = [json.loads(l) for l in open(proc.out_path) if l.startswith("{")]
                delivered += sum(l.get("events", 0) for l in lines)
            except (OSError, ValueError):
                pass
        emit(figure("apns-sim", "apns-sim accepted notifications/s, 1,000 connected devices (h2load -c1 -m100, "
                    "cached JWT)", "notifications/s", "apns-sim", s["rate_2xx"], "bare HTTP2Server endpoint",
                    b["rate_2xx"], 0.5, refused_4xx=s["4xx"], refused_5xx=s["5xx"],
                    events_received_by_devices=delivered, devices_connected=ready["ready"],
                    samples_ours=[round(r["rate_2xx"]) for r in sims],
                    samples_baseline=[round(r["rate_2xx"]) for r in bares]))
        emit({"benchmark": "apns-sim-rss", "title": "apns-sim resident memory (VmRSS)",
              "rss_idle_mb": round(rss_idle / 1024, 1), "rss_1k_mb": round(rss_1k / 1024, 1),
              "rss_after_load_mb": round(rss_after_load / 1024, 1), "rss_10k_mb": round(rss_10k / 1024, 1),
              "devices": ready["ready"] + ready_9k["ready"],
              "per_device_kb": round((rss_10k - rss_after_load) / max(1, ready_9k["ready"]), 1)})
    finally:
        for proc in devices:
            proc.stop(signal.SIGKILL)
        cluster.close()


# MARK: - fcm

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


def fcm(env):
    """mailboxd's FCM sender against fcm-sim with 1,000 devices, against a bare HTTP/2 endpoint, and against
    Google's firebase-admin SDK; then freshness for 100 Android devices end to end."""
    rounds = 2 if env.quick else 3
    count = 10000 if env.quick else 30000
    cluster = common.Cluster(env.bin, prefix="signalfetch-fcm-")
    try:
        # No per-device rate limit in the way of the throughput figures: 1,000 devices share the load.
        cluster.start_fcm_sim(extra=["--device-rate", "1000000"])
        tokens_file = os.path.join(env.work, "fcm-tokens.txt")
        fcm_tokens(cluster, 1000, tokens_file)
        sim = f"https://127.0.0.1:{cluster.fcm_port}"
        bare_proc, bare_port = env.serve(
            "serve-h2", extra=["--post-body", '{"access_token":"ya29.bench","expires_in":3599,"token_type":"Bearer",'
                                              '"name":"projects/signalfetch-dev/messages/1"}'])
        bare = f"https://127.0.0.1:{bare_port}"

        def load(endpoint, ca):
            out = subprocess.run([env.bench, "fcm-load", "--endpoint", endpoint, "--token-uri", endpoint + "/token",
                                  "--ca", ca, "--service-account", cluster.service_account, "--tokens", tokens_file,
                                  "--count", str(count), "--concurrency", "100"], capture_output=True, text=True,
                                 timeout=600)
            result = bench_json(out.stdout + "\n" + out.stderr[-300:])
            if result["succeeded"] == 0:
                raise RuntimeError(f"fcm-load: every signal failed: {result}")
            return result

        python = bench_python()
        ours, bares, sdk = [], [], []
        for _ in range(rounds):
            ours.append(load(sim, cluster.ca))
            bares.append(load(bare, env.ca))
            out = subprocess.run([python, os.path.join(SCRIPTS, "bench-firebase-admin.py"), "--endpoint", sim,
                                  "--token-uri", sim + "/token", "--ca", cluster.ca, "--service-account",
                                  cluster.service_account, "--tokens", tokens_file, "--count", "2000"],
                                 capture_output=True, text=True, timeout=600)
            result = bench_json(out.stdout + "\n" + out.stderr[-300:])
            if result["succeeded"] != result["signals"]:
                raise RuntimeError(f"firebase-admin: only {result['succeeded']} of {result['signals']} accepted")
            sdk.append(result)
        env.stop(bare_proc)
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
    finally:
        cluster.close()
    emit(fcm_freshness(env))


def fcm_freshness(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=25.0):
    """Freshness (delivery 201 → message in an Android device's cache) through fcm-sim. Each device gets fewer
    signals than FCM's collapsible burst (20), as fcm-sim applies Android's throttle beyond it."""
    cluster = common.Cluster(env.bin, prefix="signalfetch-fcm-e2e-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_fcm_sim()
        cluster.start_mailboxd(extra=["--fcm-config", cluster.fcm_config])
        clients = common.MailClients(cluster, fallback=0)
        for user in users:
            for n in range(per_account):
                clients.add(f"{user}-a{n}", user, service="fcm")
        clients.wait_ready(timeout=300)
        api = cluster.api()
        sent = deliver_poisson(api, cluster, users, deliveries, rate, seed=11)
        ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
        if not ok:
            raise RuntimeError("fcm e2e: " + detail)
        samples, early = freshness(clients, sent)
        p99 = percentile(samples, 99)
        return {"benchmark": "fcm-e2e-freshness", "title": "Freshness for Android devices through fcm-sim: "
                "delivery 201 → message in the device cache", "goal_p99_ms": goal_p99, "met": p99 <= goal_p99,
                **({} if p99 <= goal_p99 else {"finding": f"FCM freshness p99 {p99:.1f} ms misses ≤ {goal_p99} ms"}),
                "devices": len(clients.devices), "accounts": accounts, "deliveries": deliveries,
                "offered_rate": rate, "samples": len(samples), "p50_ms": round(percentile(samples, 50), 1),
                "p90_ms": round(percentile(samples, 90), 1), "p99_ms": round(p99, 1), "max_ms": round(max(samples), 1),
                "synced_before_201": early, "signals_received": sum(d.signals for d in clients.devices)}
    finally:
        cluster.close()


# MARK: - webpush

def webpush_subscriptions(cluster, count, path):
    """Makes `count` subscriptions at webpush-sim for the cluster's VAPID key; writes their toJSON() to `path`."""
    from cryptography.hazmat.primitives import serialization
    with open(cluster.vapid_key, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    application_server_key = base64.urlsafe_b64encode(point).rstrip(b"=").decode()
    conn = http.client.HTTPConnection("127.0.0.1", cluster.webpush_device_port, timeout=30)
    lines = []
    for _ in range(count):
        conn.request("POST", "/sim/subscriptions", body=json.dumps({"applicationServerKey": application_server_key}),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        if response.status != 201:
            raise RuntimeError(f"webpush-sim subscription: {response.status} {body}")
        lines.append(json.dumps(body["subscription"]))
    conn.close()
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def webpush(env):
    """mailboxd's Web Push sender against pywebpush, both to webpush-sim with 1,000 subscriptions; each side's
    encryption cost per message; then freshness for 100 browser-shaped devices end to end."""
    rounds = 2 if env.quick else 3
    count = 10000 if env.quick else 30000
    cluster = common.Cluster(env.bin, prefix="signalfetch-webpush-")
    try:
        cluster.start_webpush_sim()
        subscriptions = os.path.join(env.work, "webpush-subscriptions.txt")
        webpush_subscriptions(cluster, 1000, subscriptions)
        allow = f"127.0.0.1:{cluster.webpush_port}"

        def load():
            out = subprocess.run([env.bench, "webpush-load", "--subscriptions", subscriptions, "--vapid-key",
                                  cluster.vapid_key, "--ca", cluster.ca, "--allow-host", allow, "--count", str(count),
                                  "--concurrency", "100"], capture_output=True, text=True, timeout=600)
            result = bench_json(out.stdout + "\n" + out.stderr[-300:])
            if result["succeeded"] == 0:
                raise RuntimeError(f"webpush-load: every signal failed: {result}")
            return result

        python = bench_python()
        script = os.path.join(SCRIPTS, "bench-pywebpush.py")
        ours, reference = [], []
        for _ in range(rounds):
            ours.append(load())
            out = subprocess.run([python, script, "--subscriptions", subscriptions, "--vapid-key", cluster.vapid_key,
                                  "--ca", cluster.ca, "--count", "2000"], capture_output=True, text=True, timeout=600)
            result = bench_json(out.stdout + "\n" + out.stderr[-300:])
            if result["succeeded"] != result["signals"]:
                raise RuntimeError(f"pywebpush: only {result['succeeded']} of {result['signals']} accepted")
            reference.append(result)
        o = max(ours, key=lambda r: r["rate"])
        p = max(reference, key=lambda r: r["rate"])
        emit(figure("webpush-pywebpush", "mailboxd's Web Push sender vs pywebpush webpush_async (one aiohttp "
                    "session, 100 in flight), to webpush-sim with 1,000 subscriptions", "signals/s",
                    "WebPushPushService", o["rate"], "pywebpush", p["rate"], 10.0,
                    samples_ours=[r["rate"] for r in ours], samples_baseline=[r["rate"] for r in reference],
                    ours_failed=sum(r["failed"] for r in ours), ours_connections=[r["connections"] for r in ours]))
        encrypt_count = 5000 if env.quick else 20000
        mine = bench_json(subprocess.run([env.bench, "webpush-encrypt", "--count", str(encrypt_count)],
                                         capture_output=True, text=True, timeout=600).stdout)
        theirs = bench_json(subprocess.run([python, script, "--encrypt-only", "--subscriptions", subscriptions,
                                            "--vapid-key", cluster.vapid_key, "--ca", cluster.ca, "--count",
                                            str(encrypt_count // 5)], capture_output=True, text=True,
                                           timeout=600).stdout)
        emit(figure("webpush-encrypt", "One Web Push body's encryption (fresh P-256 key, ECDH, HKDF, AES-128-GCM), "
                    "µs per message: WebPushEncryption vs pywebpush's http_ece", "µs", "WebPushEncryption",
                    mine["microseconds"], "pywebpush (http_ece)", theirs["microseconds"], 1.0,
                    higher_is_better=False, body_bytes=mine["bodyBytes"]))
    finally:
        cluster.close()
    emit(webpush_freshness(env))


def webpush_freshness(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=25.0):
    """Freshness (delivery 201 → message in a browser-shaped device's cache) through webpush-sim: mail-client
    --service webpush holds its subscription's keys and decrypts each signal itself."""
    cluster = common.Cluster(env.bin, prefix="signalfetch-webpush-e2e-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_webpush_sim()
        cluster.start_mailboxd(extra=cluster.webpush_flags)
        clients = common.MailClients(cluster, fallback=0)
        for user in users:
            for n in range(per_account):
                clients.add(f"{user}-w{n}", user, service="webpush")
        clients.wait_ready(timeout=300)
        sent = deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=13)
        ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
        if not ok:
            raise RuntimeError("webpush e2e: " + detail)
        samples, early = freshness(clients, sent)
        p99 = percentile(samples, 99)
        return {"benchmark": "webpush-e2e-freshness", "title": "Freshness for browser-shaped devices through "
                "webpush-sim: delivery 201 → message in the device cache", "goal_p99_ms": goal_p99,
                "met": p99 <= goal_p99,
                **({} if p99 <= goal_p99 else {"finding": f"Web Push freshness p99 {p99:.1f} ms misses ≤ {goal_p99} ms"}),
                "devices": len(clients.devices), "accounts": accounts, "deliveries": deliveries,
                "offered_rate": rate, "samples": len(samples), "p50_ms": round(percentile(samples, 50), 1),
                "p90_ms": round(percentile(samples, 90), 1), "p99_ms": round(p99, 1), "max_ms": round(max(samples), 1),
                "synced_before_201": early, "signals_received": sum(d.signals for d in clients.devices)}
    finally:
        cluster.close()


# MARK: - console

class ConsoleReader:
    """An open console: signs in with the console token and reads /console/events on a thread, noting for each
    event how long after its `at` (the store's clock, the same machine's) it arrived."""

    def __init__(self, cluster, timing=True):
        self.timing = timing  # parse each event for its lag (else only count lines: the lightest possible console)
        context = ssl.create_default_context(cafile=cluster.ca)
        token = open(os.path.join(cluster.data, "console-token")).read().strip()
        conn = http.client.HTTPSConnection("127.0.0.1", cluster.api_port, context=context, timeout=30)
        conn.request("POST", "/console/session", body=urllib.parse.urlencode({"token": token}),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 303:
            raise RuntimeError(f"console: sign-in answered {answer.status}")
        cookie = answer.getheader("Set-Cookie").split(";")[0]
        self.stream = http.client.HTTPSConnection("127.0.0.1", cluster.api_port, context=context, timeout=120)
        self.stream.request("GET", "/console/events?after=0", headers={"Cookie": cookie})
        self.response = self.stream.getresponse()
        if self.response.status != 200:
            raise RuntimeError(f"console: events answered {self.response.status}")
        self.lags = {"change": [], "signal": [], "fetch": []}
        self.events = 0
        self.running = True
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        kind = None
        try:
            if not self.timing:
                # Counting only: read in large chunks and count the events' id lines, so the console costs the
                # machine as little as a browser elsewhere would.
                raw = self.response.fp
                while self.running:
                    chunk = raw.read1(65536)
                    if not chunk:
                        return
                    self.events += chunk.count(b"\nid: ")
                return
            while self.running:
                line = self.response.readline()
                if not line:
                    return
                line = line.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind in self.lags:
                    if self.timing:
                        event = json.loads(line[6:])
                        self.lags[kind].append(time.time() * 1000 - event["at"])
                    self.events += 1
        except (OSError, ValueError, AttributeError):  # AttributeError: the connection was closed under readline
            return

    def close(self):
        self.running = False
        self.stream.close()


def console(env):
    """The console's cost on the API and how soon it shows what happens. Cost: durable deliveries/s (wrk, 16
    connections, POST /v1/deliveries over TLS) into a mailboxd with the console on and one console reading its
    stream, against the same mailboxd without a console token, rounds alternating. Reach: at 50 deliveries/s to
    100 devices (mail-client through apns-sim), how long after each change's commit (and each signal's answer,
    each fetch) the event reaches an open console."""
    seconds = 8 if env.quick else 20
    rounds = 3
    accounts = 16
    users = [f"user{i:03d}" for i in range(accounts)]
    clusters = {}
    try:
        for label in ("console", "plain"):
            cluster = common.Cluster(env.bin, prefix=f"signalfetch-bench-console-{label}-")
            cluster.add_accounts(users)
            if label == "plain":
                os.remove(os.path.join(cluster.data, "console-token"))
            # No gateway: signals wait in the outbox and are retried, as in the scale benchmark.
            cluster.sim_port = 9
            cluster.start_mailboxd(extra=["--synchronous", "FULL"])
            api = cluster.api()
            for user in users:
                token = api.login(user, f"password-{user}", "bench")
                device = f"{abs(hash((label, user))) % (1 << 64):016x}" * 4
                status, _ = api.call("POST", "/v1/devices", token=token,
                                     body={"token": device, "topic": TOPIC, "environment": "production"})
                if status != 201:
                    raise RuntimeError(f"console: device registration: HTTP {status}")
            clusters[label] = cluster
        lua = os.path.join(env.work, "console-deliveries.lua")
        with open(lua, "w") as f:
            f.write(DELIVERY_LUA)
        reader = ConsoleReader(clusters["console"], timing=False)

        def rate(cluster):
            out = subprocess.run(
                ["wrk", "-t1", "-c16", f"-d{seconds}s", "-s", lua, f"https://127.0.0.1:{cluster.api_port}"],
                capture_output=True, text=True, timeout=seconds + 60,
                env=dict(os.environ, SCALE_USERS=str(accounts), SCALE_TOKEN=cluster.delivery_token))
            found = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
            if not found or "Non-2xx" in out.stdout:
                raise RuntimeError(f"console: wrk failed: {out.stdout[-400:]} {out.stderr[-300:]}")
            return float(found.group(1))

        rate(clusters["console"])  # warm-up
        rate(clusters["plain"])
        with_console, without = [], []
        for _ in range(rounds):
            without.append(rate(clusters["plain"]))
            with_console.append(rate(clusters["console"]))
        events = reader.events
        reader.close()
        emit(paired("console-cost", "Durable deliveries/s with the console on and one console open, vs without a "
                    "console", "deliveries/s", "console open", with_console, "no console", without, 0.95,
                    events_streamed=events))
    finally:
        for cluster in clusters.values():
            cluster.close()
    emit(console_reach(env))


def console_reach(env, accounts=50, per_account=2, deliveries=500, rate=50.0, goal_p99=100.0):
    cluster = common.Cluster(env.bin, prefix="signalfetch-bench-console-reach-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        common.raise_fd_limit()
        clients = common.MailClients(cluster, fallback=0)
        for user in users:
            for n in range(per_account):
                clients.add(f"{user}-d{n}", user)
        clients.wait_ready(timeout=300)
        reader = ConsoleReader(cluster)
        time.sleep(0.5)
        for lags in reader.lags.values():
            lags.clear()
        deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=17)
        ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
        if not ok:
            raise RuntimeError("console reach: " + detail)
        time.sleep(0.5)
        reader.close()
        lags = reader.lags
        changes = lags["change"]
        if len(changes) < deliveries:
            raise RuntimeError(f"console reach: {len(changes)} change events for {deliveries} deliveries")
        p99 = percentile(changes, 99)
        summary = {kind: {"events": len(values), "p50_ms": round(percentile(values, 50), 1),
                          "p99_ms": round(percentile(values, 99), 1)} for kind, values in lags.items() if values}
        return {"benchmark": "console-reach", "title": f"Commit → event at an open console, {len(clients.devices)} "
                f"devices, {rate:.0f} deliveries/s", "goal_p99_ms": goal_p99, "met": p99 <= goal_p99,
                **({} if p99 <= goal_p99 else {"finding": f"console events p99 {p99:.1f} ms misses ≤ {goal_p99} ms"}),
                "devices": len(clients.devices), "deliveries": deliveries, "p50_ms": round(percentile(changes, 50), 1),
                "p99_ms": round(p99, 1), "by_event": summary}
    finally:
        cluster.close()


# MARK: - e2e

def e2e(env):
    accounts = 50
    per_account = 2
    deliveries = 1000
    rate = 50.0  # deliveries per second, Poisson arrivals
    cluster = common.Cluster(env.bin, prefix="signalfetch-e2e-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        common.raise_fd_limit()
        clients = common.MailClients(cluster, fallback=0)
        start = time.monotonic()
        for user in users:
            for n in range(per_account):
                clients.add(f"{user}-d{n}", user)
        clients.wait_ready(timeout=300)
        log(f"e2e: {len(clients.devices)} devices registered and synced in {time.monotonic() - start:.1f} s")
        api = cluster.api()
        start = time.monotonic()
        sent = deliver_poisson(api, cluster, users, deliveries, rate, seed=7)  # (user, modseq, t201)
        send_seconds = time.monotonic() - start
        ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
        if not ok:
            raise RuntimeError("e2e: " + detail)
        samples, early = freshness(clients, sent)
        # The floor: the raw /v1/changes round trip (keep-alive TLS), one new message.
        floor, epoch = changes_floor(api, users[0])
        # Traffic: bytes of one-message incremental syncs vs a full refetch of the same mailbox.
        incremental, full, messages = [], [], 0
        for user in users[:10]:
            tok = api.login(user, f"password-{user}", "bench-traffic")
            mods = sorted(m for (u, m, _) in sent if u == user)
            for m in mods:
                status, raw = api.raw("GET", f"/v1/changes?since={epoch}-{m - 1}&max=1", token=tok)
                incremental.append(len(raw))
            total, cursor = 0, None
            while True:
                status, raw = api.raw("GET", "/v1/messages?limit=100" + (f"&cursor={cursor}" if cursor else ""),
                                      token=tok)
                total += len(raw)
                page = json.loads(raw)
                messages += len(page["messages"])
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            full.append(total)
        p50, p99 = percentile(samples, 50), percentile(samples, 99)
        f50, f99 = percentile(floor, 50), percentile(floor, 99)
        with open(os.path.join(env.out, "e2e-freshness.dat"), "w") as f:
            f.write("\n".join(f"{v:.3f}" for v in sorted(samples)) + "\n")
        with open(os.path.join(env.out, "e2e-floor.dat"), "w") as f:
            f.write("\n".join(f"{v:.3f}" for v in sorted(floor)) + "\n")
        goal_p99 = 25.0
        emit({"benchmark": "e2e-freshness", "title": "Freshness: delivery 201 → message in the device cache",
              "goal_p99_ms": goal_p99, "met": p99 <= goal_p99,
              **({} if p99 <= goal_p99 else {"finding": f"freshness p99 {p99:.1f} ms misses the goal ≤ {goal_p99} ms"}),
              "devices": len(clients.devices), "accounts": accounts, "deliveries": deliveries,
              "offered_rate": rate, "send_seconds": round(send_seconds, 1), "samples": len(samples),
              "p50_ms": round(p50, 1), "p90_ms": round(percentile(samples, 90), 1), "p99_ms": round(p99, 1),
              "max_ms": round(max(samples), 1), "floor_p50_ms": round(f50, 2), "floor_p99_ms": round(f99, 2),
              "ratio_p50_to_floor": round(p50 / f50, 1), "synced_before_201": early,
              "signals_received": sum(d.signals for d in clients.devices),
              "syncs": sum(len(d.syncs) for d in clients.devices)})
        inc = sum(incremental) / len(incremental)
        fmean = sum(full) / len(full)
        emit({"benchmark": "e2e-traffic", "title": "Bytes fetched: one-message incremental sync vs full refetch",
              "incremental_bytes": round(inc), "full_refetch_bytes": round(fmean),
              "mailbox_messages": round(messages / len(full), 1), "ratio_full_to_incremental": round(fmean / inc, 1),
              "accounts_sampled": len(full)})
        emit(e2e_burst(cluster, clients, users, users[1]))
    finally:
        cluster.close()
    emit(e2e_fleet(env))


def changes_floor(api, user, samples=300):
    """The floor of freshness: ms of one `/v1/changes` round trip for the newest change (keep-alive TLS), `samples`
    times; returns them and the store's epoch."""
    token = api.login(user, f"password-{user}", "bench-floor")
    status, listing = api.call("GET", "/v1/messages?limit=1", token=token)
    epoch, top = listing["state"].rsplit("-", 1)
    floor = []
    for _ in range(samples):
        t0 = time.perf_counter()
        status, _ = api.raw("GET", f"/v1/changes?since={epoch}-{int(top) - 1}&max=100", token=token)
        floor.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise RuntimeError(f"changes: HTTP {status}")
    return floor, epoch


def freshness(clients, sent):
    """Per (delivery, device): ms from the delivery's 201 to the first completed sync whose state covers it (0
    when the sync came first), and how many came first."""
    samples, early = [], 0
    by_user = {}
    for d in clients.devices:
        by_user.setdefault(d.user, []).append(list(d.syncs))
    for user, m, t201 in sent:
        for syncs in by_user[user]:
            t = next((t for (t, s, _) in syncs if s >= m), None)
            if t is None:
                raise RuntimeError(f"e2e: no sync covered modseq {m} of {user}")
            if t < t201:
                early += 1
            samples.append(max(0.0, t - t201) * 1000)
    return samples, early


def deliver_poisson(api, cluster, users, deliveries, rate, seed):
    """Deliveries at `rate` per second (Poisson arrivals) to random users; [(user, modseq, t201)]."""
    rng = random.Random(seed)
    sent = []
    next_at = time.monotonic()
    for i in range(deliveries):
        next_at += rng.expovariate(rate)
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        user = rng.choice(users)
        status, receipt = api.call("POST", "/v1/deliveries", token=cluster.delivery_token, body={
            "to": user, "from": f"sender{i}@example.com", "subject": f"Message {i}", "body": common.deliver_body(i)})
        if status != 201:
            raise RuntimeError(f"delivery {i}: HTTP {status} {receipt}")
        sent.append((user, common.modseq(receipt["state"]), time.monotonic()))
    return sent


def e2e_fleet(env, accounts=250, per_account=4, deliveries=1000, rate=50.0, per_process=500, goal_p99=100.0):
    """Freshness with 1,000 devices: simulated devices that run the real MailSync engine, `per_process` to a
    `mail-client fleet` process, at the same delivery rate as the 100-device run."""
    cluster = common.Cluster(env.bin, prefix="signalfetch-fleet-")
    users = [f"fleet{i:03d}" for i in range(accounts)]
    try:
        cluster.add_accounts(users[:1])  # creates and migrates the database, before two processes share it
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # account creation hashes each password
            list(pool.map(lambda chunk: cluster.add_accounts(chunk), [users[1::2], users[2::2]]))
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        clients = common.MailClients(cluster, fallback=0)
        pairs = [(f"{user}-d{n}", user) for user in users for n in range(per_account)]
        start = time.monotonic()
        for first in range(0, len(pairs), per_process):
            clients.add_fleet(pairs[first:first + per_process])
        clients.wait_ready(timeout=600)
        log(f"e2e fleet: {len(pairs)} devices in {len(range(0, len(pairs), per_process))} processes registered and "
            f"synced in {time.monotonic() - start:.1f} s")
        started = time.monotonic()
        sent = deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=11)
        send_seconds = time.monotonic() - started
        ok, detail = common.wait_converged(cluster, clients, users, timeout=120)
        if not ok:
            raise RuntimeError("e2e fleet: " + detail)
        samples, early = freshness(clients, sent)
        p99 = percentile(samples, 99)
        record = {"benchmark": "e2e-fleet", "title": f"Freshness with {len(pairs):,} devices", "devices": len(pairs),
                  "processes": len(range(0, len(pairs), per_process)), "accounts": accounts,
                  "deliveries": deliveries, "offered_rate": rate, "send_seconds": round(send_seconds, 1),
                  "samples": len(samples), "p50_ms": round(percentile(samples, 50), 1),
                  "p90_ms": round(percentile(samples, 90), 1), "p99_ms": round(p99, 1), "max_ms": round(max(samples), 1),
                  "synced_before_201": early, "goal_p99_ms": goal_p99, "met": p99 <= goal_p99}
        if p99 > goal_p99:
            record["finding"] = f"freshness p99 with {len(pairs):,} devices {p99:.1f} ms misses the goal ≤ {goal_p99} ms"
        clients.stop()
        return record
    finally:
        cluster.close()


def e2e_burst(cluster, clients, users, user, deliveries=1000, senders=8, burst=20, refill=1.0):
    """1,000 deliveries to one account as fast as 8 senders go (about a second): each of its devices may get at
    most burst + refill × seconds signals (mailboxd's default pacing), and must end at the burst's final state."""
    devices = [d for d in clients.devices if d.user == user]
    before = {d.name: len(d.signal_times) for d in devices}
    start = time.monotonic()
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
    burst_seconds = time.monotonic() - start
    if errors:
        raise RuntimeError(f"burst: {len(errors)} deliveries failed: {errors[:5]}")
    ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
    if not ok:
        raise RuntimeError("burst: " + detail)
    time.sleep(2.5)  # any signal still paced arrives (one token a second)
    per_device = []
    for d in devices:
        times = d.signal_times[before[d.name]:]
        span = (times[-1] - start) if times else 0.0
        per_device.append({"device": d.name, "signals": len(times), "span_s": round(span, 2),
                           "bound": round(burst + refill * span, 1)})
    worst = max(p["signals"] - p["bound"] for p in per_device)
    met = worst <= 0
    record = {"benchmark": "e2e-burst", "title": f"A burst of {deliveries:,} deliveries to one account",
              "deliveries": deliveries, "burst_seconds": round(burst_seconds, 2), "pacing_burst": burst,
              "pacing_refill_per_s": refill, "devices": per_device, "converged": ok, "met": met}
    if not met:
        record["finding"] = (f"burst: a device got {worst:.0f} more signals than burst + refill × seconds allows")
    return record


# MARK: - live

def live(env):
    """Freshness for devices that follow the server's event stream (`mail-client --live`) against push-only devices in
    the same run: one device flooded, and 100 devices at 50 deliveries/s (Scripts/bench-live.py)."""
    rows = importlib.machinery.SourceFileLoader("bench_live", os.path.join(SCRIPTS, "bench-live.py")).load_module()
    for record in rows.run(env, figure=figure, freshness=freshness, deliver_poisson=deliver_poisson):
        emit(record)


# MARK: - ingest

def ingest(env):
    """LMTP deliveries/s from Postfix's smtp-source (20 sessions, connections reused) into mailboxd at
    synchronous=FULL, against the same load into smtp-sink -L (an LMTP server that stores nothing), rounds
    interleaved so both sides see the same moments of the machine."""
    count = 2000 if env.quick else 10000
    rounds = 3
    size = 4096
    sessions = 20
    for tool in ("smtp-source", "smtp-sink"):
        if not shutil.which(tool):
            raise SystemExit(f"ingest: {tool} is missing (Debian postfix; Scripts/bootstrap installs it)")
    mailboxd = os.path.join(env.bin, "mailboxd")

    def start_mailboxd(name, synchronous):
        data = os.path.join(env.work, name)
        subprocess.run([mailboxd, "dev-setup", "--data-dir", data], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([mailboxd, "account", "add", "bench", "--data-dir", data], input="password-bench\n",
                       text=True, check=True, stdout=subprocess.DEVNULL)
        api, lmtp, metrics = free_port(), free_port(), free_port()
        server = env.start(name, [
            mailboxd, "serve", "--data-dir", data, "--listen", f"127.0.0.1:{api}", "--apns-topic", TOPIC,
            "--metrics-listen", f"127.0.0.1:{metrics}",
            "--apns-url", "https://127.0.0.1:9", "--apns-sandbox-url", "https://127.0.0.1:9",
            "--lmtp-listen", f"127.0.0.1:{lmtp}", "--synchronous", synchronous])
        wait_port(lmtp, proc=server)
        return data, metrics, lmtp

    data, metrics_port, lmtp_port = start_mailboxd("mailboxd-ingest", "FULL")
    # The same server without an fsync per commit (WAL at NORMAL syncs at checkpoints only): what is left of
    # the cost is CPU — parsing, the protocol, the store's SQL — which shows what bounds the FULL figure.
    _, _, normal_port = start_mailboxd("mailboxd-ingest-normal", "NORMAL")
    sink_port = free_port()
    sink = env.start("smtp-sink", ["smtp-sink", "-L", "-u", "postfix", f"127.0.0.1:{sink_port}", "256"])
    wait_port(sink_port, proc=sink)

    def load(port):
        start = time.monotonic()
        done = subprocess.run(
            ["smtp-source", "-L", "-s", str(sessions), "-m", str(count), "-l", str(size), "-d", "-f",
             "sender@sender.test", "-t", "bench@example.test", "-M", "client.test", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=600)
        elapsed = time.monotonic() - start
        if done.returncode != 0:
            raise RuntimeError(f"smtp-source failed: {done.stderr[-500:]}")
        return count / elapsed

    load(lmtp_port)  # warm-up: the file, the caches, the page cache
    load(normal_port)
    ours, sink_rates, normal_rates = [], [], []
    for _ in range(rounds):
        sink_rates.append(load(sink_port))
        ours.append(load(lmtp_port))
        normal_rates.append(load(normal_port))
    database = os.path.join(data, "mailbox.sqlite")
    stored = int(subprocess.run(["sqlite3", database, "SELECT count(*) FROM messages"], capture_output=True,
                                text=True, check=True).stdout.strip())
    expected = count * (rounds + 1)
    if stored != expected:
        raise RuntimeError(f"ingest: {stored} messages stored, {expected} acknowledged")
    metrics = subprocess.run(["curl", "-s", f"http://127.0.0.1:{metrics_port}/metrics"], capture_output=True,
                             text=True).stdout
    def total(name):
        m = re.search(rf"^{name} ([0-9.e+]+)$", metrics, re.M)
        return float(m.group(1)) if m else 0.0
    transactions, writes = total("mailboxd_store_transactions_total"), total("mailboxd_store_writes_total")
    ours_median, sink_median = sorted(ours)[rounds // 2], sorted(sink_rates)[rounds // 2]
    emit(figure(
        "ingest", f"LMTP ingest: {count} messages of {size} B from smtp-source -L, {sessions} sessions",
        "messages/s", "mailboxd --lmtp-listen (synchronous=FULL, parsed, raw kept)", ours_median,
        "smtp-sink -L (stores nothing)", sink_median, 0.5,
        rounds=[{"mailboxd": round(a, 1), "smtp_sink": round(b, 1), "ratio": round(a / b, 3)}
                for a, b in zip(ours, sink_rates)],
        spread=round(max(a / b for a, b in zip(ours, sink_rates)) - min(a / b for a, b in zip(ours, sink_rates)), 3),
        stored=stored, writes_per_transaction=round(writes / transactions, 1) if transactions else None,
        normal_median=round(sorted(normal_rates)[rounds // 2], 1),
        normal_ratio=round(sorted(normal_rates)[rounds // 2] / sink_median, 3),
        finding=None if ours_median / sink_median >= 0.5 else (
            f"LMTP ingest reaches {ours_median / sink_median:.2f} of smtp-sink -L at FULL and "
            f"{sorted(normal_rates)[rounds // 2] / sink_median:.2f} without an fsync per commit (NORMAL, same run): "
            f"{'the fsync is not what bounds it: the CPU per message is (parse, the protocol, the store, the hand-offs between a session thread, the pool and the writer, on 2 cores shared with smtp-source)' if sorted(normal_rates)[rounds // 2] < 1.25 * ours_median else 'the fsync per group commit bounds it'}.")))



# MARK: - Scale-out on PostgreSQL

DELIVERY_LUA = common.DELIVERY_LUA

# The same transaction shape as a delivery, in PostgreSQL's own client: lock the account row and take its next
# modseq, insert the message, bump the modseq, upsert the account's devices' outbox rows.
PGBENCH_SCRIPT = """
\\set account random(1, :accounts)
BEGIN;
SELECT modseq FROM accounts WHERE id = :account FOR UPDATE;
INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body, size,
    received_at, created_modseq, modseq)
    SELECT md5(random()::text), :account, b.id, 'bench@example.com', 'user', 'Scale', 'A short body',
        'A short body for the message.', 29, extract(epoch FROM now()), a.modseq + 1, a.modseq + 1
    FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox' WHERE a.id = :account;
UPDATE accounts SET modseq = modseq + 1 WHERE id = :account;
INSERT INTO signal_outbox (device_id, modseq, due_at)
    SELECT d.id, a.modseq, extract(epoch FROM now()) FROM devices d JOIN accounts a ON a.id = d.account_id
    WHERE d.account_id = :account
    ON CONFLICT (device_id) DO UPDATE SET modseq = greatest(signal_outbox.modseq, excluded.modseq);
END;
"""


def start_delivery_load(env, cluster, users, per_account, label):
    """Adds the accounts, starts three mailboxd with no gateway (signals wait in the outbox, retried with backoff, so
    the devices stay registered and every delivery upserts their rows, as the pgbench transaction does), registers
    `per_account` production devices per account, and writes wrk's delivery script; returns the script's path and
    wrk's environment."""
    cluster.add_accounts(users)
    cluster.sim_port = 9
    for index in range(3):
        cluster.start_instance(index)
    api = cluster.api()
    for user in users:
        token = api.login(user, f"password-{user}", "bench")
        for n in range(per_account):
            device = f"{abs(hash((user, n))) % (1 << 64):016x}" * 4
            status, _ = api.call("POST", "/v1/devices", token=token,
                                 body={"token": device, "topic": TOPIC, "environment": "production"})
            if status != 201:
                raise RuntimeError(f"{label}: device registration: HTTP {status}")
    lua = os.path.join(env.work, "deliveries.lua")
    with open(lua, "w") as f:
        f.write(DELIVERY_LUA)
    return lua, dict(os.environ, SCALE_USERS=str(len(users)), SCALE_TOKEN=cluster.delivery_token)


def wrk_deliveries(ports, senders, seconds, lua, wrk_env, label):
    """Deliveries/s with `senders` connections spread over the instances on `ports` (one wrk each); every delivery
    must be accepted."""
    share = [senders // len(ports) + (1 if i < senders % len(ports) else 0) for i in range(len(ports))]
    procs = [subprocess.Popen(
        ["wrk", "-t1", f"-c{c}", f"-d{seconds}s", "-s", lua, f"https://127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=wrk_env)
        for port, c in zip(ports, share)]
    total, errors = 0.0, 0
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + 60)
        rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
        if not rate:
            raise RuntimeError(f"{label}: wrk failed: {err[-300:]} {out[-300:]}")
        total += float(rate.group(1))
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        errors += int(non2xx.group(1)) if non2xx else 0
    if errors:
        raise RuntimeError(f"{label}: {errors} deliveries were refused")
    return total


def scale(env):
    """Deliveries/s on PostgreSQL (durable: fsync and synchronous_commit on) from 32 concurrent senders, through 1
    and 3 mailboxd instances, against pgbench running the same transaction at the same concurrency on the same
    server; `changes` latency in a large mailbox against a small one; freshness on PostgreSQL against SQLite."""
    accounts, devices_per_account, senders = 32, 2, 32
    seconds = 10 if env.quick else 30
    rounds = 3
    cluster = common.ScaleCluster(env.bin, prefix="signalfetch-bench-scale-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        lua, wrk_env = start_delivery_load(env, cluster, users, devices_per_account, "scale")
        bench_script = os.path.join(env.work, "delivery.pgbench")
        with open(bench_script, "w") as f:
            f.write(PGBENCH_SCRIPT)
        pgbench = "/usr/lib/postgresql/15/bin/pgbench"

        postmaster = int(open(os.path.join(cluster.pg_dir, "data", "postmaster.pid")).readline())

        def server_cpu():
            """CPU seconds the PostgreSQL server has used: the postmaster's own and its exited backends' (which it
            reaped: cutime, cstime), plus its live children's."""
            total = 0
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    text = open(f"/proc/{pid}/stat").read()
                except OSError:
                    continue
                fields = text[text.rindex(")") + 2:].split()
                if int(pid) == postmaster:
                    total += sum(int(v) for v in fields[11:15])
                elif int(fields[1]) == postmaster:
                    total += int(fields[11]) + int(fields[12])
            return total / common.CLK_TCK

        def children_cpu():
            """CPU seconds of this script's finished children (wrk, pgbench)."""
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime

        def instances_cpu(ports):
            return sum(cluster.instances[cluster.ports.index(p)].cpu_seconds() for p in ports)

        cpu = {}  # label → [deliveries, seconds measured, mailboxd, server, load generator CPU seconds], every round

        def add_cpu(key, count, ours_cpu, server, load):
            totals = cpu.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
            for i, value in enumerate((count, seconds, ours_cpu, server, load)):
                totals[i] += value

        def through(ports):
            """Deliveries/s with `senders` connections spread over the instances on `ports`, with the CPU it cost."""
            ours0, server0, load0 = instances_cpu(ports), server_cpu(), children_cpu()
            total = wrk_deliveries(ports, senders, seconds, lua, wrk_env, "scale")
            add_cpu(len(ports), total * seconds, instances_cpu(ports) - ours0, server_cpu() - server0,
                    children_cpu() - load0)
            return total

        def pgbench_rate():
            server0, load0 = server_cpu(), children_cpu()
            out = subprocess.run(
                [pgbench, "-n", "-c", str(senders), "-j", "2", "-T", str(seconds), "-D", f"accounts={accounts}",
                 "-f", bench_script, cluster.database], capture_output=True, text=True, timeout=seconds + 60)
            tps = re.search(r"tps = ([\d.]+)", out.stdout)
            if out.returncode != 0 or not tps:
                raise RuntimeError(f"scale: pgbench failed: {out.stderr[-500:]}")
            add_cpu("pgbench", float(tps.group(1)) * seconds, 0.0, server_cpu() - server0, children_cpu() - load0)
            return float(tps.group(1))

        through(cluster.ports[:1])  # warm-up: connections, caches, the first checkpoint
        one, three, base = [], [], []
        for _ in range(rounds):
            base.append(pgbench_rate())
            one.append(through(cluster.ports[:1]))
            three.append(through(cluster.ports))
        cores = os.cpu_count() or 1

        def cpu_details(key):
            """CPU per delivery over every round, the rate the cores allow at that cost, and how much of it the
            rounds reached (the same intervals: 1.0 means every core was busy with these processes)."""
            count, measured, ours_cpu, server, load = cpu[key]
            per = (ours_cpu + server + load) / count
            rate = count / measured
            return {"cpu_ms_per_delivery": {"mailboxd": round(ours_cpu / count * 1000, 3),
                                            "postgres": round(server / count * 1000, 3),
                                            "load_generator": round(load / count * 1000, 3)},
                    "cpu_bound_per_s": round(cores / per, 1), "mean_rate_per_s": round(rate, 1),
                    "cpu_utilization": round(rate * per / cores, 3)}

        base_cpu = cpu_details("pgbench")
        for key, rates, label in ((1, one, "1 mailboxd"), (3, three, "3 mailboxd")):
            details = cpu_details(key)
            record = paired(f"scale-{key}", f"Durable deliveries/s on PostgreSQL, {senders} senders, {label}",
                            "deliveries/s", f"mailboxd ({label}, POST /v1/deliveries over TLS)", rates,
                            "pgbench, the same transaction", base, 0.7, accounts=accounts,
                            devices=accounts * devices_per_account, cpu=details, pgbench_cpu=base_cpu)
            if not record["met"]:
                c = details["cpu_ms_per_delivery"]
                record["finding"] = (
                    f"{label}: {record['ratio']:.2f} of pgbench. CPU bound, measured: a delivery costs "
                    f"{c['mailboxd']:.2f} ms of mailboxd CPU (TLS, HTTP, JSON, the RFC 5322 message it composes and "
                    f"hashes, the store), {c['postgres']:.2f} ms of the server's and {c['load_generator']:.2f} ms of "
                    f"wrk's, so {cores} cores allow at most {details['cpu_bound_per_s']:.0f}/s, and the rounds averaged "
                    f"{details['mean_rate_per_s']:.0f}/s ({details['cpu_utilization']:.0%} of the cores); pgbench's transaction "
                    f"costs {base_cpu['cpu_ms_per_delivery']['postgres']:.2f} + "
                    f"{base_cpu['cpu_ms_per_delivery']['load_generator']:.2f} ms (at most "
                    f"{base_cpu['cpu_bound_per_s']:.0f}/s). On these 2 shared cores, 3 instances only add processes "
                    "to the same CPU.")
            emit(record)

        # changes for 100 new messages: a mailbox of `large` messages against one of 1,000.
        large = 200_000 if env.quick else 1_000_000
        latencies = {}
        for name, size in (("small", 1000), ("large", large)):
            user = f"changes-{name}"
            cluster.add_accounts([user])
            subprocess.run(["psql", cluster.database, "-q", "-v", "ON_ERROR_STOP=1", "-c", f"""
                INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body,
                    size, received_at, seen, created_modseq, modseq)
                SELECT 'bulk-{name}-' || i, a.id, b.id, 'a@example.com', '{user}', 'Subject ' || i, 'preview',
                    'body', 4, 1700000000 + i, 1, i, i
                FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox',
                    generate_series(1, {size}) AS i
                WHERE a.username = '{user}';
                UPDATE accounts SET modseq = {size} WHERE username = '{user}';
                ANALYZE messages;"""], check=True, capture_output=True, text=True)
            api = cluster.api()  # a fresh connection: the last one idled through the bulk insert
            token = api.login(user, f"password-{user}", "bench")
            status, listing = api.call("GET", "/v1/messages?limit=1", token=token)
            since = listing["state"]
            for i in range(100):
                api.call("POST", "/v1/deliveries", token=cluster.delivery_token,
                         body={"to": user, "from": "x@example.com", "subject": f"New {i}", "body": "b"})
            samples = []
            for _ in range(60):
                t0 = time.perf_counter()
                status, page = api.call("GET", f"/v1/changes?since={since}&max=500", token=token)
                samples.append((time.perf_counter() - t0) * 1000)
                if status != 200 or len(page["created"]) != 100:
                    raise RuntimeError(f"scale: changes returned HTTP {status}")
            latencies[name] = sorted(samples)[len(samples) // 2]
        emit(figure("scale-changes", f"changes for 100 new messages on PostgreSQL: {large:,}-message mailbox vs 1,000",
                    "ms (median)", f"{large:,} messages", latencies["large"], "1,000 messages", latencies["small"],
                    2.0, higher_is_better=False))
    finally:
        cluster.close()
    emit(scale_freshness(env))


def scale_freshness(env, accounts=25, per_account=2, deliveries=500, rate=50.0):
    """Freshness (delivery 201 → the message in the device's cache) with the store on PostgreSQL, against the same
    load with the store in SQLite, in the same run."""
    users = [f"user{i:03d}" for i in range(accounts)]
    p99, parts = {}, {}
    for engine in ("sqlite", "postgresql"):
        cluster = (common.ScaleCluster(env.bin, instances=1, prefix="signalfetch-bench-fresh-") if engine ==
                   "postgresql" else common.Cluster(env.bin, prefix="signalfetch-bench-fresh-"))
        try:
            cluster.add_accounts(users)
            cluster.start_apns_sim()
            if engine == "postgresql":
                cluster.start_instance(0)
            else:
                cluster.start_mailboxd()
            clients = common.MailClients(cluster, fallback=0)
            for user in users:
                for n in range(per_account):
                    clients.add(f"{user}-d{n}", user)
            clients.wait_ready(timeout=300)
            sent = deliver_poisson(cluster.api(), cluster, users, deliveries, rate, seed=11)
            ok, detail = common.wait_converged(cluster, clients, users, timeout=60)
            if not ok:
                raise RuntimeError(f"scale freshness ({engine}): {detail}")
            samples, _ = freshness(clients, sent)
            p99[engine] = percentile(samples, 99)
            # The parts of the path: one /v1/changes round trip (what a device does after a signal), and the time
            # from a delivery's 201 to its first signal at the gateway's device stream.
            floor, _ = changes_floor(cluster.api(), users[0])
            parts[engine] = {"freshness_p50_ms": round(percentile(samples, 50), 2),
                             "freshness_p99_ms": round(p99[engine], 2),
                             "changes_round_trip_p50_ms": round(percentile(floor, 50), 2),
                             "changes_round_trip_p99_ms": round(percentile(floor, 99), 2)}
        finally:
            cluster.close()
    record = figure("scale-freshness", f"Freshness p99, {accounts * per_account} devices, {rate:.0f} deliveries/s: "
                    "PostgreSQL vs SQLite", "ms (p99)", "store on PostgreSQL", p99["postgresql"], "store in SQLite",
                    p99["sqlite"], 2.0, higher_is_better=False, parts=parts)
    if not record["met"]:
        pg, lite = parts["postgresql"], parts["sqlite"]
        record["finding"] = (
            f"Freshness p99 on PostgreSQL is {record['ratio']:.2f}× SQLite's ({pg['freshness_p99_ms']} vs "
            f"{lite['freshness_p99_ms']} ms; p50 {pg['freshness_p50_ms']} vs {lite['freshness_p50_ms']} ms). One "
            f"/v1/changes round trip, the device's part of the path, is p50 {pg['changes_round_trip_p50_ms']} vs "
            f"{lite['changes_round_trip_p50_ms']} ms and p99 {pg['changes_round_trip_p99_ms']} vs "
            f"{lite['changes_round_trip_p99_ms']} ms: every store call is a network round trip per statement (a read "
            "is BEGIN, its queries and COMMIT) instead of a function call into SQLite.")
    return record

def failover(env):
    """What the synchronous standby costs: durable deliveries/s from 32 senders through 3 mailboxd on a
    pg_auto_failover cluster (Scripts/postgres-cluster) with its standby in the write quorum (every acknowledged
    commit is on both machines) ÷ the same cluster with the standby asynchronous, rounds alternating."""
    accounts, devices_per_account, senders = 32, 2, 32
    seconds = 10 if env.quick else 30
    rounds = 3
    cluster = common.FailoverCluster(env.bin, prefix="signalfetch-bench-failover-")
    users = [f"user{i:03d}" for i in range(accounts)]
    try:
        lua, wrk_env = start_delivery_load(env, cluster, users, devices_per_account, "failover")

        def through():
            return wrk_deliveries(cluster.ports, senders, seconds, lua, wrk_env, "failover")

        def replicate(mode):
            out = cluster.postgres("synchronous", mode)
            if out.returncode != 0:
                raise RuntimeError(f"failover: synchronous {mode}: {out.stderr}")

        through()  # warm-up
        synchronous, asynchronous = [], []
        for _ in range(rounds):
            replicate("on")
            synchronous.append(through())
            replicate("off")
            asynchronous.append(through())
        replicate("on")
        emit(paired("failover-synchronous", f"Durable deliveries/s, {senders} senders, 3 mailboxd on a pg_auto_failover "
                    "cluster: synchronous standby vs asynchronous", "deliveries/s",
                    "standby in the write quorum (an acknowledged commit is on both nodes)", synchronous,
                    "the same cluster, standby asynchronous", asynchronous, 0.7, accounts=accounts,
                    devices=accounts * devices_per_account))
    finally:
        cluster.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("benchmark", choices=["transport", "apns", "apns-sim", "fcm", "webpush", "console", "e2e", "live",
                                              "ingest", "scale", "failover"])
    parser.add_argument("--mode", default="quick", choices=["quick", "full"])
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args()
    common.raise_fd_limit()
    env = Env(args)
    env.out = os.path.abspath(args.out)
    try:
        {"transport": transport, "apns": apns, "apns-sim": apns_sim, "fcm": fcm, "webpush": webpush, "console": console,
         "e2e": e2e, "live": live,
         "ingest": ingest,
         "scale": scale, "failover": failover}[args.benchmark](env)
    finally:
        env.close()


if __name__ == "__main__":
    main()
