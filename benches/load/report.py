#!/usr/bin/env python3
"""Helpers for benches/load/run.sh: check and summarise oha's JSON, watch RSS, and measure
memory per cached origin and per open connection. Standard library only."""

import glob
import http.client
import json
import os
import re
import socket
import statistics
import sys
import time
import urllib.request


def load(path):
    with open(path) as f:
        return json.load(f)


def check(path):
    """Fails unless every answer was 200 and nothing failed but the in-flight requests that
    oha cuts off when its time is up."""
    r = load(path)
    codes = r.get("statusCodeDistribution", {})
    bad = {k: v for k, v in codes.items() if k != "200"}
    errors = {k: v for k, v in r.get("errorDistribution", {}).items() if "deadline" not in k}
    if not codes.get("200"):
        sys.exit(f"{path}: no 200 answers: {codes} {errors}")
    if bad or errors:
        sys.exit(f"{path}: answers other than 200: {bad} errors: {errors}")


def runs(results, name):
    return [load(p) for p in sorted(glob.glob(os.path.join(results, f"{name}.[0-9]*.json")))]


def median_run(rs):
    """The run with the median req/s (its latencies are reported with it)."""
    rs = sorted(rs, key=lambda r: r["metrics"]["requests_per_sec"])
    return rs[len(rs) // 2]


def row(name, results):
    rs = runs(results, name)
    m = median_run(rs)["metrics"]
    all_rps = ", ".join(f"{r['metrics']['requests_per_sec']:,.0f}" for r in rs)
    print(
        f"{name:32} {m['requests_per_sec']:>10,.0f} req/s  p50 {m['latency_ms']['p50']:7.3f} ms"
        f"  p99 {m['latency_ms']['p99']:7.3f} ms   (runs: {all_rps})",
        file=sys.stderr,
    )


def table(results):
    names = sorted({re.sub(r"\.\d+\.json$", "", os.path.basename(p))
                    for p in glob.glob(os.path.join(results, "*.[0-9]*.json"))})
    med = {n: median_run(runs(results, n))["metrics"] for n in names}

    def anchor(target, case):
        if target.endswith("_tls") or target in ("squid_connect", "robotsgate_intercept",
                                                  "robotsgate_base_intercept"):
            return med.get(f"direct_tls-{case}")
        return med.get(f"direct-{case}")

    print("| target | case | req/s | × direct | × squid | × haproxy | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    order = ["direct", "squid", "haproxy", "robotsgate_off", "robotsgate",
             "robotsgate_base_off", "robotsgate_base",
             "direct_tls", "squid_connect", "robotsgate_intercept", "robotsgate_base_intercept"]
    anchors = ("squid", "haproxy", "direct")
    for target in order:
        for n in names:
            t, case = n.split("-", 1)
            if t != target:
                continue
            m = med[n]
            d = anchor(t, case)
            tls = t in ("robotsgate_intercept", "robotsgate_base_intercept", "direct_tls")
            squid = med.get(f"{'squid_connect' if tls else 'squid'}-{case}")
            haproxy = None if tls else med.get(f"haproxy-{case}")

            def times(a):
                if not a or t.startswith(anchors):
                    return "–"
                return f"{m['requests_per_sec'] / a['requests_per_sec']:.2f}"
            x_direct = f"{m['requests_per_sec'] / d['requests_per_sec']:.3f}" if d else "–"
            print(f"| {t} | {case} | {m['requests_per_sec']:,.0f} | {x_direct} | {times(squid)} "
                  f"| {times(haproxy)} | {m['latency_ms']['p50']:.3f} | {m['latency_ms']['p99']:.3f} |")
    for case in sorted({n.split("-", 1)[1] for n in names}):
        h, sq = med.get(f"haproxy-{case}"), med.get(f"squid-{case}")
        if h and sq:
            print(f"haproxy vs squid, {case}: {h['requests_per_sec'] / sq['requests_per_sec']:.2f}x req/s")
    for case in sorted({n.split("-", 1)[1] for n in names}):
        on, off = runs(results, f"robotsgate-{case}"), runs(results, f"robotsgate_off-{case}")
        if on and off and len(on) == len(off):
            # Paired: run i of each was taken one after the other.
            ratios = sorted(a["metrics"]["requests_per_sec"] / b["metrics"]["requests_per_sec"]
                            for a, b in zip(on, off))
            ratio = statistics.median(ratios)
            print(f"enforce + audit vs mode off, {case}: {ratio:.3f}x req/s (costs {(1 - ratio) * 100:.1f}%; "
                  f"runs {', '.join(f'{r:.3f}' for r in ratios)})")
    # Against HAProxy, paired by round (run i of each taken in the same round): on a VM whose
    # rounds move by more than the difference measured, the median of the rounds' ratios
    # says more than the ratio of the medians in the table.
    for case in sorted({n.split("-", 1)[1] for n in names}):
        h = runs(results, f"haproxy-{case}")
        for cur in ("robotsgate", "robotsgate_off", "robotsgate_base", "robotsgate_base_off"):
            a = runs(results, f"{cur}-{case}")
            if h and a and len(a) == len(h):
                print(f"{cur} vs haproxy, paired by round, {case}: {paired(a, h)}")
    # With RG_BASELINE_BIN: the binary built here against the baseline, run i of each taken
    # in the same round.
    pairs = [("robotsgate", "robotsgate_base", "enforce + audit"),
             ("robotsgate_off", "robotsgate_base_off", "mode off"),
             ("robotsgate_intercept", "robotsgate_base_intercept", "interception")]
    for case in sorted({n.split("-", 1)[1] for n in names}):
        for cur, base, what in pairs:
            a, b = runs(results, f"{cur}-{case}"), runs(results, f"{base}-{case}")
            if a and b and len(a) == len(b):
                print(f"this build vs base, {what}, {case}: {paired(a, b)}")
        on, off = runs(results, f"robotsgate_base-{case}"), runs(results, f"robotsgate_base_off-{case}")
        if on and off and len(on) == len(off):
            ratios = sorted(a["metrics"]["requests_per_sec"] / b["metrics"]["requests_per_sec"]
                            for a, b in zip(on, off))
            ratio = statistics.median(ratios)
            print(f"base: enforce + audit vs mode off, {case}: {ratio:.3f}x req/s (costs {(1 - ratio) * 100:.1f}%; "
                  f"runs {', '.join(f'{r:.3f}' for r in ratios)})")


def paired(a, b):
    """Runs a against runs b, run i with run i (taken in the same round): the median and
    each round's ratio, of req/s and of p99."""
    rps = sorted(x["metrics"]["requests_per_sec"] / y["metrics"]["requests_per_sec"] for x, y in zip(a, b))
    p99 = sorted(x["metrics"]["latency_ms"]["p99"] / y["metrics"]["latency_ms"]["p99"] for x, y in zip(a, b))
    return (f"{statistics.median(rps):.3f}x req/s (runs {', '.join(f'{r:.3f}' for r in rps)}); "
            f"p99 {statistics.median(p99):.3f}x (runs {', '.join(f'{r:.3f}' for r in p99)})")


def metric(url, name):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def cold(path, robots_log, metrics_url):
    r = load(path)
    codes = r["statusCodeDistribution"]
    fetches = sum(1 for _ in open(robots_log))
    fetched = metric(metrics_url, "robotsgate_robots_fetches_total")
    s = r["summary"]
    print(f"cold origin: {sum(codes.values())} requests at concurrency 1000, answers {codes}, "
          f"errors {r['errorDistribution']}")
    print(f"  robots.txt requests the origin saw: {fetches}; robotsgate_robots_fetches_total: {fetched:.0f}")
    print(f"  all answered in {s['total'] * 1000:.0f} ms; latency p50 {r['metrics']['latency_ms']['p50']:.1f} ms, "
          f"p99 {r['metrics']['latency_ms']['p99']:.1f} ms, slowest {s['slowest'] * 1000:.1f} ms")
    if fetches != 1 or codes.get("200") != 1000:
        sys.exit("cold origin: expected exactly one robots.txt fetch and 1000 answers of 200")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def rss_watch(pid, seconds):
    samples = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        samples.append((time.monotonic() - start, rss_kib(pid)))
        time.sleep(1)
    at = lambda t: min(samples, key=lambda s: abs(s[0] - t))[1]  # noqa: E731
    print(f"RSS under load (1 KiB, c256, 60 s): at 5 s {at(5) / 1024:.1f} MiB, at 30 s {at(30) / 1024:.1f} MiB, "
          f"at 59 s {at(59) / 1024:.1f} MiB, max {max(s[1] for s in samples) / 1024:.1f} MiB")


def get_via(conn, url):
    conn.request("GET", url)
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        sys.exit(f"{url}: {resp.status} {body[:200]!r}")


def per_origin(pid, proxy, origin_port, n, metrics_url):
    host, port = proxy.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    get_via(conn, f"http://o0.bench:{origin_port}/1k")
    for i in range(1, 50):  # warm up allocator pools on a few origins first
        get_via(conn, f"http://o{i}.bench:{origin_port}/1k")
    before = rss_kib(pid)
    for i in range(50, n):
        get_via(conn, f"http://o{i}.bench:{origin_port}/1k")
    after = rss_kib(pid)
    entries = metric(metrics_url, "robotsgate_robots_cache_entries")
    cache_bytes = metric(metrics_url, "robotsgate_robots_cache_bytes")
    count = n - 50
    print(f"per cached origin: RSS +{(after - before) * 1024 / count:,.0f} bytes per origin over {count} origins "
          f"(robots.txt of 34 bytes); cache entries {entries:.0f}, cache bytes (as weighed) "
          f"{cache_bytes / max(entries, 1):,.0f} per entry")


def per_connection(pid, proxy, origin_port, n):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = proxy.split(":")
    url = f"http://127.0.0.1:{origin_port}/1k"
    warm = [http.client.HTTPConnection(host, int(port), timeout=10) for _ in range(50)]
    for c in warm:
        get_via(c, url)
    before = rss_kib(pid)
    conns = []
    for _ in range(n):
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        get_via(c, url)  # one request each; the connection then stays open and idle
        conns.append(c)
    after = rss_kib(pid)
    print(f"per open connection: RSS +{(after - before) * 1024 / n:,.0f} bytes per idle keep-alive client "
          f"connection over {n} connections (after one 1 KiB request each)")
    for c in conns + warm:
        c.close()


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "check":
        check(args[0])
    elif cmd == "row":
        row(args[0], args[1])
    elif cmd == "table":
        table(args[0])
    elif cmd == "cold":
        cold(*args)
    elif cmd == "rss-watch":
        rss_watch(int(args[0]), float(args[1]))
    elif cmd == "per-origin":
        per_origin(int(args[0]), args[1], args[2], int(args[3]), args[4])
    elif cmd == "per-connection":
        per_connection(int(args[0]), args[1], args[2], int(args[3]))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
