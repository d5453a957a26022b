#!/usr/bin/env bash
# Where a proxied request's time goes: CPU (user, system) and context switches per request,
# per thread, for HAProxy and each robotsgate binary given, over the same fixed number of
# requests (1 KiB, keep-alive), and optionally the system calls per request (strace -c -f).
#
#   bash benches/load/perreq.sh [BIN ...]          # default: this checkout, built in release
#   REQUESTS=100000 CONC=256 bash benches/load/perreq.sh OLD NEW
#   STRACE=1 REQUESTS=20000 bash benches/load/perreq.sh BIN     # system calls per request
#   ROUNDS=3 ...                                   # the targets take their turns ROUNDS times
#                                                  # (HAProxy, then the binaries, each round
#                                                  # starting with the next one); from 2
#                                                  # rounds a summary paired by round follows:
#                                                  # each binary against HAProxy, and each
#                                                  # binary after the first against the first
#   ROUNDS=25 REQUESTS=30000 AFTER=0 bash benches/load/perreq.sh BIN   # the gate of issue 32,
#                                                  # in short runs paired with HAProxy's
#   RG_AUDIT='durability = "buffered"' ...         # more [audit] lines for every binary
#   RG_MODE=off ...                                # policy.mode for every binary (default enforce)
#   RG_CPUS=0,1 ...                                # the CPUs robotsgate may run on, one worker
#                                                  # each (default SRV_CPU: one worker)
#   SCHED=1 REQUESTS=30000 bash benches/load/perreq.sh BIN   # who wakes whom (perf sched events)
#   OHA_ARGS=--disable-keepalive ...               # more oha options (there: a new client
#                                                  # connection for every request)
#   TAIL=1 ...                                     # where the tail is: oha's per-request
#                                                  # output (CSV) kept, and per run the
#                                                  # first request of each connection, the
#                                                  # p99 without the run's first 0.3 s, and
#                                                  # the share of the requests over the p99
#                                                  # that started in those 0.3 s
#
# Set-up as benches/load/run.sh: nginx origin and the proxies pinned to SRV_CPU, oha (one
# worker thread) on GEN_CPU. Counters are read from /proc/PID/task/*/{stat,status} before
# and after each run, so they count the run alone (start-up and the first robots.txt fetch
# are outside it: a warm-up of 1,000 requests runs first). Rows: the target, req/s of the
# run, then per request: user µs, system µs, voluntary and involuntary context switches,
# for the whole process and for each thread name that used CPU; and nginx's worker alike.
# A last row counts the proxy's CPU in the AFTER seconds (default 2) after the run, per
# request of the run: work left for after the load (a thread behind) shows there, not in
# the run's rows. Each run also prints the TCP connections the machine opened during it
# (`ActiveOpens` of /proc/net/snmp, less oha's own CONC with keep-alive): the proxy's new
# connections to the origin.
#
# SCHED=1 records the scheduler's wake-up and switch events on every CPU during the run
# (`perf record -a -e sched:sched_wakeup,sched:sched_switch`) and adds, per request: who
# woke nginx's worker (the waking thread's name; an interrupt's softirq counts as the thread
# it interrupted), how often each thread of the proxy and nginx was switched out still
# runnable (preempted) and by whom, and how long nginx ran each time it was switched in.
set -euo pipefail

BENCH_NAME=robotsgate-perreq
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
REQUESTS=${REQUESTS:-100000}
CONC=${CONC:-32}
ROUNDS=${ROUNDS:-1}
STRACE=${STRACE:-}
TAIL=${TAIL:-}
SCHED=${SCHED:-}
OHA_ARGS=${OHA_ARGS:-}
AFTER=${AFTER:-2} # seconds after the run in which the proxy's CPU is counted apart
RG_PORT=13129
ADMIN_PORT=19090
HAPROXY_PORT=13130

need_tools haproxy
[ -z "$STRACE" ] || need_tools strace
[ -z "$SCHED" ] || command -v perf >/dev/null || { log "installing linux-perf"; apt_install linux-perf; }
binaries "$@"

start_origin
start_haproxy "$HAPROXY_PORT"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:$HAPROXY_PORT"
NGINX_WORKER=$(pgrep -f "nginx: worker process" | head -1)
"${BINS[0]}" ca init --dir "$WORK/ca" >/dev/null 2>&1 || true

# snapshot PID...: one line per thread: "pid name utime stime vol invol" (ticks, counts).
snapshot() {
    local pid tid
    for pid in "$@"; do
        for tid in /proc/"$pid"/task/*; do
            [ -r "$tid/stat" ] || continue
            printf '%s %s %s %s\n' "$pid" "$(tr ' ' '_' <"$tid/comm")" \
                "$(sed 's/.*) //' "$tid/stat" | awk '{print $12, $13}')" \
                "$(awk '/^voluntary_ctxt_switches/{v=$2} /^nonvoluntary_ctxt_switches/{n=$2} END{print v, n}' "$tid/status")"
        done
    done
}

# TCP connections this machine has opened (connect) since it started.
active_opens() { awk '/^Tcp:/ { if (++n == 2) print $6 }' /proc/net/snmp; }

# tail_of CSV JSON: oha's per-request CSV summed up as the JSON the rest reads (requests a
# second, p99, status codes), and where its slow requests are, printed.
tail_of() {
    python3 - "$1" "$2" <<'PY'
import csv, json, sys
src, dst = sys.argv[1:3]
rows = []
with open(src) as f:
    r = csv.reader(f)
    next(r)
    for x in r:  # start, DNS, DNS+dialup, response delay, duration, bytes, status
        rows.append((float(x[0]), float(x[2]), float(x[4]), x[6]))
rows.sort()
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]
t0, end = rows[0][0], max(s + d for s, _, d, _ in rows)
lat = [d for _, _, d, _ in rows]
p99 = pct(lat, 0.99)
late = [d for s, _, d, _ in rows if s - t0 > 0.3]
first = [d for _, dial, d, _ in rows if dial > 0.0005]
over = [s for s, _, d, _ in rows if d >= p99]
codes = {}
for *_, c in rows:
    codes[c] = codes.get(c, 0) + 1
json.dump({"summary": {"requestsPerSec": len(rows) / (end - t0)},
           "latencyPercentiles": {"p50": pct(lat, 0.5), "p99": p99},
           "statusCodeDistribution": codes}, open(dst, "w"))
print(f"  tail: a connection's first request {sum(first) / max(1, len(first)) * 1000:.1f} ms "
      f"(mean of {len(first)}), p99 {p99 * 1000:.2f} ms, without the first 0.3 s "
      f"{pct(late, 0.99) * 1000:.2f} ms; of the requests over the p99, "
      f"{sum(1 for s in over if s - t0 <= 0.3) / len(over):.0%} started in the first 0.3 s")
PY
}

# measure NAME PROXY_URL PID: warm-up, then REQUESTS requests, counters around them.
measure() {
    local name=$1 proxy=$2 pid=$3
    # shellcheck disable=SC2086 # OHA_ARGS: options, split on spaces
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n 1000 -c "$CONC" -x "$proxy" $OHA_ARGS \
        "http://127.0.0.1:$ORIGIN_PORT/1k" >/dev/null
    settle
    snapshot "$pid" "$NGINX_WORKER" >"$WORK/before"
    local strace_pid=
    if [ -n "$STRACE" ]; then
        strace -c -f -q -o "$WORK/strace-$name.txt" -p "$pid" &
        strace_pid=$!
        sleep 1 # strace attaches to every thread before the run starts
    fi
    local sched_pid=
    if [ -n "$SCHED" ]; then
        perf record -q -a -e sched:sched_wakeup -e sched:sched_switch -o "$WORK/sched-$name.data" \
            2>/dev/null &
        sched_pid=$!
        sleep 1 # perf has opened its events before the run starts
    fi
    local opens
    opens=$(active_opens)
    # shellcheck disable=SC2086
    if [ -n "$TAIL" ]; then
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$REQUESTS" -c "$CONC" -x "$proxy" $OHA_ARGS \
            --output-format csv "http://127.0.0.1:$ORIGIN_PORT/1k" >"$WORK/results/$name.csv"
    else
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$REQUESTS" -c "$CONC" -x "$proxy" $OHA_ARGS \
            --output-format json "http://127.0.0.1:$ORIGIN_PORT/1k" >"$WORK/results/$name.json"
    fi
    opens=$(($(active_opens) - opens))
    case " $OHA_ARGS " in
        *" --disable-keepalive "*) opens=$((opens - REQUESTS)) ;;
        *) opens=$((opens - CONC)) ;;
    esac
    snapshot "$pid" "$NGINX_WORKER" >"$WORK/after"
    : >"$WORK/tail-$name.txt"
    [ -z "$TAIL" ] || tail_of "$WORK/results/$name.csv" "$WORK/results/$name.json" >"$WORK/tail-$name.txt"
    if [ -n "$strace_pid" ]; then
        kill -INT "$strace_pid"
        wait "$strace_pid" || true
    fi
    if [ -n "$sched_pid" ]; then
        kill -INT "$sched_pid"
        wait "$sched_pid" || true
    fi
    # Work a thread left for after the load (e.g. an audit thread behind) is the run's too.
    sleep "$AFTER"
    snapshot "$pid" "$NGINX_WORKER" >"$WORK/later"
    python3 - "$name" "$pid" "$WORK/before" "$WORK/after" "$WORK/results/$name.json" "$REQUESTS" \
        "$(getconf CLK_TCK)" "${strace_pid:+$WORK/strace-$name.txt}" "$WORK/later" "$AFTER" "$opens" \
        "$WORK/tail-$name.txt" <<'PY'
import json, sys
name, pid, before, after, res, n, tck, strace, later, after_s, opens, tail = sys.argv[1:13]
n, tck = int(n), int(tck)
def read(f):
    d = {}
    for line in open(f):
        p, comm, u, s, v, i = line.split()
        key = ("proxy" if p == pid else "nginx", comm)
        a = d.setdefault(key, [0, 0, 0, 0])
        for j, x in enumerate((u, s, v, i)):
            a[j] += int(x)
    return d
b, a = read(before), read(after)
r = json.load(open(res))
codes = r.get("statusCodeDistribution", {})
if set(codes) != {"200"}:
    sys.exit(f"{name}: answers other than 200: {codes}")
rps = r["summary"]["requestsPerSec"]
p99 = r["latencyPercentiles"]["p99"] * 1000
def fmt(label, d):
    us = 1e6 / tck / n
    return f"  {label:<28} user {d[0]*us:6.2f} µs  sys {d[1]*us:6.2f} µs  cs {d[2]/n:5.2f} vol {d[3]/n:5.2f} invol"
conns = "connection" if opens == "1" else "connections"
print(f"{name}: {rps:,.0f} req/s, p99 {p99:.2f} ms, {opens} {conns} opened to the origin")
print(open(tail).read(), end="")
tot = {"proxy": [0, 0, 0, 0], "nginx": [0, 0, 0, 0]}
rows = []
for key in sorted(a):
    d = [x - y for x, y in zip(a[key], b.get(key, [0, 0, 0, 0]))]
    for j in range(4):
        tot[key[0]][j] += d[j]
    if d[0] + d[1] + d[2] + d[3] > 0:
        rows.append(fmt(f"{key[0]}:{key[1]}", d))
print(fmt("proxy (all threads)", tot["proxy"]))
print("\n".join(rows))
late = read(later)
left = [sum(late[k][j] - a[k][j] for k in late if k in a and k[0] == "proxy") for j in range(4)]
print(fmt(f"proxy, in the {after_s} s after", left))
print(fmt("nginx worker", tot["nginx"]))
if strace:
    print("  system calls per request (strace -c -f):")
    for line in open(strace):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            calls = int(f[3])
            print(f"    {f[-1]:<20} {calls / n:7.3f}")
PY
    if [ -n "$sched_pid" ]; then
        perf script -i "$WORK/sched-$name.data" -F comm,tid,time,event,trace 2>/dev/null |
            python3 "$HERE/sched.py" "$REQUESTS" "$NGINX_WORKER"
    fi
}

for round in $(seq "$ROUNDS"); do
    log "round $round"
    # HAProxy and the binaries take turns going first (a VM's drift falls on each alike).
    targets=$((${#BINS[@]} + 1))
    for k in $(seq 0 $((targets - 1))); do
        i=$(((k + round - 1) % targets - 1))
        if [ "$i" -lt 0 ]; then
            measure "haproxy-$round" "http://127.0.0.1:$HAPROXY_PORT" "$HAPROXY_PID"
            continue
        fi
        start_rg "${BINS[$i]}" "$i" "${RG_AUDIT:-}"
        measure "rg$i-$(basename "${BINS[$i]}")-$round" "http://127.0.0.1:$RG_PORT" "$RG_PID"
        end_rg
    done
done
[ -s "$WORK/logs/haproxy-access.log" ] || die "HAProxy wrote no access log ($WORK/logs/haproxy-access.log)"
log "HAProxy access log: $(wc -l <"$WORK/logs/haproxy-access.log") lines"

# With ROUNDS >= 2: each binary against HAProxy, and each binary after the first against
# the first, paired by round (the two ran one after the other in it), for req/s and for
# p99: the median of the rounds' ratios, its 95% interval (distribution-free, from the
# order statistics; from 6 rounds), and how many rounds were above 1. Short runs (REQUESTS of a few seconds) taken in many rounds pair the targets
# under nearly the same conditions of a VM whose speed drifts.
if [ "$ROUNDS" -ge 2 ]; then
    log "paired by round against HAProxy, and against the first binary ($ROUNDS rounds of $REQUESTS requests, c$CONC)"
    python3 - "$WORK/results" "$ROUNDS" "${BINS[@]}" <<'PY'
import json, math, os, statistics, sys
results, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    r = json.load(open(os.path.join(results, f"{name}.json")))
    return r["summary"]["requestsPerSec"], r["latencyPercentiles"]["p99"]
def interval(xs):
    n = len(xs)
    if n < 6:
        return "no interval under 6 rounds"
    half = 0.98 * math.sqrt(n)  # 1.96 * sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return f"95% interval {xs[lo]:.3f}-{xs[hi]:.3f}"
def pair(run, against, label):
    """Prints the rounds of `run` against those of `against` (names without the round)."""
    rps, p99 = [], []
    for r in range(1, rounds + 1):
        a, x = load(f"{against}-{r}"), load(f"{run}-{r}")
        rps.append(x[0] / a[0])
        p99.append(x[1] / a[1])
    for what, xs in (("req/s", sorted(rps)), ("p99", sorted(p99))):
        above = sum(x > 1 for x in xs)
        print(f"{label}, {what}: median {statistics.median(xs):.3f}x, "
              f"{interval(xs)}, above 1 in {above} of {len(xs)} rounds")
names = [f"rg{i}-{os.path.basename(b)}" for i, b in enumerate(bins)]
for b, name in zip(bins, names):
    pair(name, "haproxy", f"{os.path.basename(b)} vs HAProxy")
# Each later binary against the first (a change against its base), paired by round alike.
for b, name in zip(bins[1:], names[1:]):
    pair(name, names[0], f"{os.path.basename(b)} vs {os.path.basename(bins[0])}")
PY
fi
