#!/usr/bin/env bash
# Load benchmark of the ingress side: `robotsgate ingress` (enforcing, audit log on) in front
# of an nginx site, against nginx as a reverse proxy (one worker, access log on) and
# against the site directly. 1 KiB bodies (BODY), concurrency 32 (CONC), keep-alive; the client is a bot
# (GPTBot's User-Agent) that the site's robots.txt allows, so every request is decided,
# recorded and forwarded. A fourth target, robotsgate_ingress_verify, is the same with the
# identity check on: the bot's operator (OpenAI, GPTBot) publishes a range list (a file
# here, holding 127.0.0.0/8) and every request is verified by its address (reverse DNS and
# refresh off: no network), so the two robotsgate rows give the cost of the check. A fifth,
# nginx_proxy_fwd, is nginx sending the forwarding fields robotsgate sends (Forwarded,
# X-Forwarded-Proto, X-Forwarded-Host besides X-Forwarded-For): the same work, for
# comparison; the ratios are to nginx_proxy, the issue's anchor.
#
#   bash benches/load/ingress.sh
#   DURATION=5 RUNS=1 bash benches/load/ingress.sh              # a quick look
#   RG=/path/to/robotsgate bash benches/load/ingress.sh         # a binary built elsewhere
#   BODY=100k bash benches/load/ingress.sh                      # 100 KiB bodies (a response
#                                                               # written in pieces: where a
#                                                               # client socket with Nagle's
#                                                               # algorithm on waits ~40 ms)
#   CONC=1 ...                                                  # one keep-alive client
#
# Needs oha, nginx, taskset, curl (common.sh installs them when missing, and builds
# robotsgate in release mode unless RG is given). The generator (oha, one worker thread)
# is pinned to GEN_CPU, the site and the proxies to SRV_CPU. Each row is the median of RUNS
# runs; the targets take their runs in turn. A run with any answer other than 200
# fails the benchmark. Raw oha JSON under $WORK/results.
#
# Besides req/s and latency, each row gives the CPU time (user + system, from
# /proc/PID/task/*/stat before and after each run, median of the runs) per request of the
# target's own processes ("proxy": nginx's master and worker, or robotsgate's threads) and
# of the site behind it ("site"): figures that move far less than req/s on a shared VM.
set -euo pipefail

BENCH_NAME=robotsgate-ingress
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONC=${CONC:-32}
BODY=${BODY:-1k}
case "$BODY" in 1k | 100k) ;; *) die "BODY is 1k or 100k, not $BODY" ;; esac
NGINX_PROXY_PORT=13140
RG_INGRESS_PORT=13141
RG_VERIFY_PORT=13142
NGINX_PROXY_FWD_PORT=13143
UA="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"

for tool in oha nginx taskset curl python3; do
    command -v "$tool" >/dev/null || need_tools
done
if [ -z "${RG:-}" ]; then build_robotsgate; fi

start_origin
SITE_PID=${PIDS[-1]}
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"

# ticks PID...: the CPU clock ticks (user + system) used so far by these processes, their
# threads and their children.
ticks() {
    local u s
    read -r u s < <(cpu_ticks "$@")
    echo "$((u + s))"
}

# nginx as a reverse proxy: one worker, access log on, keep-alive to the site. The gate's
# anchor adds X-Forwarded-For, as nginx's usual set-up; a second one (nginx_proxy_fwd, for
# comparison) sends the forwarding fields robotsgate sends as well.
start_nginx_proxy "$NGINX_PROXY_FWD_PORT" fwd
NGINX_FWD_PID=$NGINX_PROXY_PID
start_nginx_proxy "$NGINX_PROXY_PORT"

# robotsgate ingress: enforcing, audit log on (default durability), robots.txt from the site.
# Identity checks off: the load's GPTBot comes from loopback, outside OpenAI's ranges, and
# would be measured being refused as an impersonator.
printf '[verify]\nenabled = false\n' >"$WORK/ingress.toml"
taskset -c "$SRV_CPU" "$RG" ingress --listen "127.0.0.1:$RG_INGRESS_PORT" --config "$WORK/ingress.toml" \
    --upstream "http://127.0.0.1:$ORIGIN_PORT" --audit-log "$WORK/ingress-audit.jsonl" \
    2>"$WORK/logs/robotsgate-ingress.log" &
RG_PID=$!
wait_ready "http://127.0.0.1:$RG_INGRESS_PORT/1k" "$RG_PID" 30
code=$(curl -s -o /dev/null -w '%{http_code}' -A "$UA" "http://127.0.0.1:$RG_INGRESS_PORT/private/x")
[ "$code" = 403 ] || die "robotsgate ingress does not enforce (GPTBot /private answered $code)"

# The same with the identity check on, by published ranges.
printf '{"prefixes": [{"ipv4Prefix": "127.0.0.0/8"}]}\n' >"$WORK/gptbot-ranges.json"
cat >"$WORK/ingress-verify.toml" <<CONF
[verify]
refresh = false
rdns = false
signatures = false

[[verify.operators]]
name = "OpenAI"
tokens = ["GPTBot"]
ip_lists = ["$WORK/gptbot-ranges.json"]
CONF
taskset -c "$SRV_CPU" "$RG" ingress --listen "127.0.0.1:$RG_VERIFY_PORT" --config "$WORK/ingress-verify.toml" \
    --upstream "http://127.0.0.1:$ORIGIN_PORT" --audit-log "$WORK/ingress-verify-audit.jsonl" \
    2>"$WORK/logs/robotsgate-ingress-verify.log" &
VERIFY_PID=$!
PIDS+=($!)
wait_ready "http://127.0.0.1:$RG_VERIFY_PORT/1k" "$!" 30
code=$(curl -s -o /dev/null -w '%{http_code}' -A "$UA" "http://127.0.0.1:$RG_VERIFY_PORT/1k")
[ "$code" = 200 ] || die "robotsgate ingress with verification refuses the listed GPTBot ($code)"
grep -q '"identity":"verified"' "$WORK/ingress-verify-audit.jsonl" \
    || die "robotsgate ingress did not record the GPTBot as verified: $(tail -1 "$WORK/ingress-verify-audit.jsonl")"

run_one() { # NAME I URL [PROXY_PID]: the run, then "proxy_ticks site_ticks" in NAME.I.ticks
    local proxy0=0 proxy1=0 site0 site1
    settle
    site0=$(ticks "$SITE_PID")
    [ -z "${4:-}" ] || proxy0=$(ticks "$4")
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z "${DURATION}s" -c "$CONC" \
        -H "User-Agent: $UA" --output-format json "$3" >"$WORK/results/$1.$2.json"
    [ -z "${4:-}" ] || proxy1=$(ticks "$4")
    site1=$(ticks "$SITE_PID")
    echo "$((proxy1 - proxy0)) $((site1 - site0))" >"$WORK/results/$1.$2.ticks"
    python3 "$HERE/report.py" check "$WORK/results/$1.$2.json" || die "$1 run $2"
}
# NAME URL [PID] of each target, in the order of the first round.
targets=(
    "direct http://127.0.0.1:$ORIGIN_PORT/$BODY"
    "nginx_proxy http://127.0.0.1:$NGINX_PROXY_PORT/$BODY $NGINX_PROXY_PID"
    "nginx_proxy_fwd http://127.0.0.1:$NGINX_PROXY_FWD_PORT/$BODY $NGINX_FWD_PID"
    "robotsgate_ingress http://127.0.0.1:$RG_INGRESS_PORT/$BODY $RG_PID"
    "robotsgate_ingress_verify http://127.0.0.1:$RG_VERIFY_PORT/$BODY $VERIFY_PID"
)
for i in $(seq "$RUNS"); do
    log "round $i of $RUNS"
    for k in $(turns "$i" "${#targets[@]}"); do
        read -r name url pid <<<"${targets[$k]}"
        run_one "$name" "$i" "$url" ${pid:+"$pid"}
    done
done
records=$(grep -c '"type":"ingress"' "$WORK/ingress-audit.jsonl" || true)
log "ingress records written: $records"

python3 - "$WORK/results" "$(getconf CLK_TCK)" <<'PY'
import glob, json, os, statistics, sys
res, hz = sys.argv[1], int(sys.argv[2])
def runs(n): return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(res, f"{n}.*.json")))]
def med(n):
    rs = sorted(runs(n), key=lambda r: r["metrics"]["requests_per_sec"])
    return rs[len(rs) // 2]["metrics"]
def cpu(n):
    # CPU µs per request (proxy, site), median over the runs.
    per = []
    for p in sorted(glob.glob(os.path.join(res, f"{n}.*.json"))):
        r = json.load(open(p))
        count = sum(r.get("statusCodeDistribution", {}).values()) or 1
        proxy, site = map(int, open(p[: -len(".json")] + ".ticks").read().split())
        per.append((proxy * 1e6 / hz / count, site * 1e6 / hz / count))
    return statistics.median(x for x, _ in per), statistics.median(y for _, y in per)
names = ("direct", "nginx_proxy", "nginx_proxy_fwd", "robotsgate_ingress", "robotsgate_ingress_verify")
m = {n: med(n) for n in names}
c = {n: cpu(n) for n in names}
print("| target | req/s | x nginx proxy | p50 ms | p99 ms | p99 / nginx | CPU µs/request: proxy | site |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for n, x in m.items():
    print(f"| {n} | {x['requests_per_sec']:,.0f} | {x['requests_per_sec'] / m['nginx_proxy']['requests_per_sec']:.2f} "
          f"| {x['latency_ms']['p50']:.3f} | {x['latency_ms']['p99']:.3f} "
          f"| {x['latency_ms']['p99'] / m['nginx_proxy']['latency_ms']['p99']:.2f} "
          f"| {c[n][0]:.1f} | {c[n][1]:.1f} |")
PY
