"""Who wakes whom: reduces `perf script -F comm,tid,time,event,trace` of the scheduler's
sched_wakeup and sched_switch events (recorded on every CPU during one run of perreq.sh)
to per-request counts. Used by `SCHED=1 bash benches/load/perreq.sh`; reads stdin.

    python3 sched.py REQUESTS NGINX_WORKER_PID

Rows, each per request of the run:
  - nginx's worker woken, by the name of the thread that woke it (a packet delivered in a
    softirq counts as the thread the softirq ran on: on loopback, the sender);
  - each thread switched out while still runnable (preempted), by the thread switched in;
  - nginx's worker switched in, and the mean time it ran each time (µs);
  - from each wake-up of nginx's worker to its switch-in (µs: median, 90th percentile), and
    from each switch-out to its next wake-up (the proxy's turn until it writes upstream);
  - the cycles (wake-up, switch-in, run) in two kinds: nginx running within 50 µs of its
    wake-up (it preempted the proxy at once) or later, with each kind's share and mean times.
Thread names are the kernel's (15 characters: robotsgate-worker-0 is robotsgate-work).
"""

import re
import sys
from collections import Counter

requests, nginx = int(sys.argv[1]), sys.argv[2]
line_re = re.compile(r"^\s*(.+?)\s+(\d+)\s+([\d.]+):\s+sched:(sched_\w+):\s+(.*)$")
field_re = re.compile(r"(\w+)=(\S+)")

woken_by = Counter()
preempted = Counter()
runs, ran_s, since = 0, 0.0, None
woke_at, slept_at, to_wake = None, None, []
cycles, latency = [], None  # (wake-up to switch-in, time run) per cycle
for line in sys.stdin:
    m = line_re.match(line)
    if not m:
        continue
    comm, _tid, t, event, rest = m.groups()
    t = float(t)
    if event == "sched_wakeup":
        f = dict(field_re.findall(rest))
        if f.get("pid") == nginx:
            woken_by[comm] += 1
            woke_at = t
            if slept_at is not None:
                to_wake.append(t - slept_at)
                slept_at = None
    elif event == "sched_switch":
        prev, nxt = rest.split(" ==> ")
        p, n = dict(field_re.findall(prev)), dict(field_re.findall(nxt))
        if p.get("prev_state", "").startswith("R"):
            preempted[(p["prev_comm"], n["next_comm"])] += 1
        if p.get("prev_pid") == nginx and since is not None:
            runs += 1
            ran_s += t - since
            if latency is not None:
                cycles.append((latency, t - since))
                latency = None
            since = None
            if not p.get("prev_state", "").startswith("R"):
                slept_at = t
        if n.get("next_pid") == nginx:
            since = t
            if woke_at is not None:
                latency = t - woke_at
                woke_at = None

print("  scheduler events per request (perf sched_wakeup/sched_switch):")
for waker, c in woken_by.most_common(6):
    print(f"    nginx woken by {waker:<22} {c / requests:6.3f}")
for (prev, nxt), c in preempted.most_common(8):
    if c / requests >= 0.001:
        print(f"    {prev:<16} preempted by {nxt:<16} {c / requests:6.3f}")
if runs:
    print(f"    nginx switched in {runs / requests:6.3f}, ran {ran_s / runs * 1e6:6.1f} µs each")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e6


to_run = [w for w, _ in cycles]
if to_run:
    print(f"    nginx woken to running  median {pct(to_run, 0.5):6.1f} µs, p90 {pct(to_run, 0.9):6.1f} µs")
if to_wake:
    print(f"    nginx asleep to woken   median {pct(to_wake, 0.5):6.1f} µs, p90 {pct(to_wake, 0.9):6.1f} µs")
AT_ONCE = 50e-6
for label, kind in (("at once (< 50 µs)", [c for c in cycles if c[0] < AT_ONCE]),
                    ("later", [c for c in cycles if c[0] >= AT_ONCE])):
    if kind:
        print(f"    cycles {label:<18} {len(kind) / len(cycles):5.0%}: waited "
              f"{sum(w for w, _ in kind) / len(kind) * 1e6:6.1f} µs, ran "
              f"{sum(r for _, r in kind) / len(kind) * 1e6:6.1f} µs (means)")
