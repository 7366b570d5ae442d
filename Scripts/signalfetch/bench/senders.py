"""Sender runs shared by the fcm and webpush sections: devices registered at a simulator, signalfetch-bench's sender
loads, rounds alternating between the sides, and the signals/s figures made from those rounds."""
import http.client
import json

from ..measure import run_json
from ..report import figure


def register(port, route, body, count, path, what, line):
    """POSTs `body` to a simulator's `route` `count` times; writes each answer's `line` to `path`; the lines."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lines = []
    for _ in range(count):
        conn.request("POST", route, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = json.loads(response.read())
        if response.status != 201:
            raise RuntimeError(f"{what}: {response.status} {answer}")
        lines.append(line(answer))
    conn.close()
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def load(env, tool, count, *args):
    """One signalfetch-bench `tool` run of `count` signals, 100 in flight; its result, unless every signal failed."""
    result = run_json([env.bench, tool, *args, "--count", str(count), "--concurrency", "100"])
    if result["succeeded"] == 0:
        raise RuntimeError(f"{tool}: every signal failed: {result}")
    return result


def all_accepted(name, result):
    """A reference client's result, refused unless every one of its signals was accepted."""
    if result["succeeded"] != result["signals"]:
        raise RuntimeError(f"{name}: only {result['succeeded']} of {result['signals']} accepted")
    return result


def alternate(env, *sides):
    """Calls each of `sides` once a round, by_mode(2, 3) rounds; each side's results, in the order given."""
    results = [[] for _ in sides]
    for _ in range(env.by_mode(2, 3)):
        for side, out in zip(sides, results):
            out.append(side())
    return results


def rates(results):
    """The signals/s of each round's result."""
    return [r["rate"] for r in results]


def rounds_figure(benchmark, title, ours_label, ours, base_label, base, goal, **details):
    """A signals/s figure of each side's best round, with every round's rate as the samples."""
    return figure(benchmark, title, "signals/s", ours_label, max(rates(ours)), base_label, max(rates(base)), goal,
                  samples_ours=rates(ours), samples_baseline=rates(base), **details)


def sender_figure(benchmark, title, ours_label, ours, base_label, base, goal):
    """A rounds_figure of our sender against another, with our rounds' failed signals and connections."""
    return rounds_figure(benchmark, title, ours_label, ours, base_label, base, goal,
                         ours_failed=sum(r["failed"] for r in ours), ours_connections=[r["connections"] for r in ours])
