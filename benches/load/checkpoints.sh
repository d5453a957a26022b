#!/usr/bin/env bash
# Audit checkpoints on vs off (issue 18): paired rounds of one binary, the order turned each
# round, each process started fresh; 1 KiB bodies through robotsgate (enforce + audit log),
# robotsgate and nginx pinned to SRV_CPU, oha (one thread) to GEN_CPU.
#
#   bash benches/load/checkpoints.sh [BIN]                 # default: target/release/robotsgate
#   ROUNDS=8 C=32 D=6 bash benches/load/checkpoints.sh BIN
#
# Each run prints req/s and CPU per answer (perf stat task-clock of the process over the
# run); the summary gives on / off per round and the medians.
set -euo pipefail
BENCH_NAME=rg-checkpoints
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-}
ROUNDS=${ROUNDS:-8}
C=${C:-256}
D=${D:-6}
# shellcheck source=benches/load/common.sh
. "$HERE/common.sh"
need_tools
command -v perf >/dev/null || apt_install linux-perf
if [ -z "$BIN" ]; then build_robotsgate; BIN=$RG; fi
trap cleanup EXIT
start_origin
"$BIN" ca init --dir "$WORK/ca" >/dev/null 2>&1 || true
for r in $(seq 1 "$ROUNDS"); do
    order="on off"
    if [ $((r % 2)) = 0 ]; then order="off on"; fi
    for variant in $order; do
        rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
        extra=""
        if [ "$variant" = off ]; then extra=$'checkpoint_every = 0\ncheckpoint_interval = "0s"'; fi
        write_rg_config enforce 13141 19141 "$WORK/rg-$variant.toml" "" "$extra"
        taskset -c "$SRV_CPU" "$BIN" run --config "$WORK/rg-$variant.toml" >"$WORK/rg-$variant.log" 2>&1 &
        pid=$!
        wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:13141"
        perf stat -e task-clock -p "$pid" -o "$WORK/perf.txt" -- sleep "$D" &
        perf_pid=$!
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z "${D}s" -c "$C" --output-format json \
            "http://127.0.0.1:$ORIGIN_PORT/1k" -x http://127.0.0.1:13141 >"$WORK/oha.json"
        wait "$perf_pid"
        python3 - "$variant" "$WORK/oha.json" "$WORK/perf.txt" "$r" <<'PY' | tee -a "$WORK/rounds.txt"
import sys, json, re
v, f, pf, r = sys.argv[1:5]
j = json.load(open(f))
n = sum(j["statusCodeDistribution"].values())
ms = float(re.search(r"([\d.,]+)\s+msec task-clock", open(pf).read()).group(1).replace(",", ""))
print(f"round {r} {v:3} req/s {j['summary']['requestsPerSec']:8.0f} cpu_us/req {ms * 1000 / n:6.2f} codes {j['statusCodeDistribution']}")
PY
        kill -INT "$pid"
        wait "$pid" || true
    done
done
python3 - "$WORK/rounds.txt" <<'PY'
import sys, re, statistics
d = {}
for l in open(sys.argv[1]):
    m = re.match(r"round (\d+) (on|off)\s+req/s\s+(\d+) cpu_us/req\s+([\d.]+)", l)
    if m:
        d[(int(m[1]), m[2])] = (int(m[3]), float(m[4]))
rounds = sorted({r for r, _ in d})
rps = [d[(r, "on")][0] / d[(r, "off")][0] for r in rounds]
cpu = [d[(r, "on")][1] / d[(r, "off")][1] for r in rounds]
print("on / off req/s:", " ".join(f"{x:.3f}" for x in rps), f" median {statistics.median(rps):.3f}")
print("on / off CPU per request:", " ".join(f"{x:.3f}" for x in cpu), f" median {statistics.median(cpu):.3f}")
PY
