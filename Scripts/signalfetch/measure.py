"""Measurement: percentiles, CPU seconds from /proc, the load tools' figures (wrk, h2load, JSON lines), and freshness
(delivery 201 → message in a device's cache). Standard library only."""
import json
import os
import re
import resource
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def percentile(values, p):
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values):
    """The middle sample (the upper one of an even count), as the rounds' figures take it."""
    return sorted(values)[len(values) // 2]


def latency_summary(samples):
    """p50, p90, p99 and max in ms (one decimal), and the sample count."""
    return {"p50_ms": round(percentile(samples, 50), 1), "p90_ms": round(percentile(samples, 90), 1),
            "p99_ms": round(percentile(samples, 99), 1), "max_ms": round(max(samples), 1), "samples": len(samples)}


def elapsed_ms(start):
    """Milliseconds since `start` (a time.perf_counter() value)."""
    return (time.perf_counter() - start) * 1000


# MARK: - CPU from /proc

def _stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (field 3 onwards)."""
    text = open(f"/proc/{pid}/stat").read()
    return text[text.rindex(")") + 2:].split()


def process_cpu(pid):
    """utime + stime of the process (all threads), in seconds."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_activity(pid):
    """Per thread group of a process (threads named alike, their trailing numbers dropped): CPU seconds and context
    switches (voluntary + involuntary), from /proc/PID/task. Threads that exited since are not counted."""
    groups = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            fields = _stat_fields(f"{pid}/task/{tid}")
            status = open(f"/proc/{pid}/task/{tid}/status").read()
        except OSError:
            continue
        switches = sum(int(n) for n in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", status, re.M))
        group = re.sub(r"[-_.]?\d+$", "", name) or name
        cpu, count = groups.get(group, (0.0, 0))
        groups[group] = (cpu + (int(fields[11]) + int(fields[12])) / CLK_TCK, count + switches)
    return groups


def thread_activity_delta(before, after):
    """{group: (CPU seconds, context switches)} between two `thread_activity` readings."""
    return {group: (cpu - before.get(group, (0.0, 0))[0], switches - before.get(group, (0.0, 0))[1])
            for group, (cpu, switches) in after.items()}


def tree_cpu(parent):
    """CPU seconds a server has used: the parent's own and its exited children's (which it reaped: cutime, cstime),
    plus its live children's (PostgreSQL: the postmaster and its backends)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = _stat_fields(pid)
        except (OSError, ValueError):
            continue
        if int(pid) == parent:
            total += sum(int(v) for v in fields[11:15])
        elif int(fields[1]) == parent:
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def tree_rss_kb(parent):
    """RSS in KiB of a server and its live children (nginx: the master and its workers)."""
    total = rss_kb(parent) or 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if int(_stat_fields(pid)[1]) == parent:
                total += rss_kb(pid) or 0
        except (OSError, ValueError):
            continue
    return total


def children_cpu():
    """CPU seconds of this process's finished children (wrk, pgbench…)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


# MARK: - Load tools

def wrk_figures(out):
    """Requests/s, non-2xx answers and p99 (ms, when --latency was given) from wrk's output."""
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1, "s": 1000}
    return {"rate": float(rate.group(1)) if rate else None, "non2xx": int(errors.group(1)) if errors else 0,
            "p99_ms": round(float(p99.group(1)) * scale[p99.group(2)], 3) if p99 else None}


def wrk(url, seconds, connections=32):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url], capture_output=True,
                         text=True, timeout=seconds + 30).stdout
    figures = wrk_figures(out)
    if figures["rate"] is None:
        raise RuntimeError("wrk produced no result: " + out[-400:])
    return figures


def wrk_script(url, seconds, script, env, connections=16):
    """Requests/s of wrk running a Lua script of data/ against `url`; every answer must be 2xx."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", script, url], capture_output=True,
                         text=True, timeout=seconds + 60, env=env)
    figures = wrk_figures(out.stdout)
    if figures["rate"] is None or figures["non2xx"]:
        raise RuntimeError(f"wrk failed: {out.stdout[-400:]} {out.stderr[-300:]}")
    return figures["rate"]


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


def json_line(output):
    """The first JSON object line of a tool's output (signalfetch-bench, the reference clients)."""
    for line in output.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON result in: " + output[-500:])


def run_json(args, timeout=600):
    """Runs a load tool and returns its JSON result line (its stderr's tail helps when there is none)."""
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return json_line(out.stdout + "\n" + out.stderr[-300:])


# MARK: - Freshness

def freshness(clients, sent, devices=None):
    """Per (delivery, device): ms from the delivery's 201 to the first completed sync whose state covers it (0
    when the sync came first), and how many came first. `sent` is [(user, modseq, t201)]; `devices`, when given,
    picks which devices count (a predicate)."""
    samples, early = [], 0
    by_user = {}
    for d in clients.devices:
        if devices is None or devices(d):
            by_user.setdefault(d.user, []).append(list(d.syncs))
    for user, m, t201 in sent:
        for syncs in by_user.get(user, []):
            t = next((t for (t, s, _) in syncs if s >= m), None)
            if t is None:
                raise RuntimeError(f"no sync covered modseq {m} of {user}")
            if t < t201:
                early += 1
            samples.append(max(0.0, t - t201) * 1000)
    return samples, early


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
        floor.append(elapsed_ms(t0))
        if status != 200:
            raise RuntimeError(f"changes: HTTP {status}")
    return floor, epoch
