#!/usr/bin/env bash
# CPU per thread of robotsgate under oha load (1 KiB at c256, 8 s), native, with the audit
# log's checkpoints on (the default) and then off: what the audit thread costs.
#   bash benches/load/threadcpu.sh [BIN]   (default: target/release/robotsgate, built first)
set -euo pipefail
BENCH_NAME=rg-threadcpu
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-}
. "$HERE/common.sh"
need_tools
if [ -z "$BIN" ]; then build_robotsgate; BIN=$RG; fi
trap cleanup EXIT
start_origin
"$BIN" ca init --dir "$WORK/ca" >/dev/null 2>&1 || true
for variant in on off; do
  rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
  extra=""
  if [ $variant = off ]; then extra=$'checkpoint_every = 0\ncheckpoint_interval = "0s"'; fi
  write_rg_config enforce 13141 19141 "$WORK/rg-$variant.toml" "" "$extra"
  taskset -c "$SRV_CPU" "$BIN" run --config "$WORK/rg-$variant.toml" > "$WORK/rg-$variant.log" 2>&1 &
  pid=$!
  wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:13141"
  taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z 8s -c 256 --output-format json "http://127.0.0.1:$ORIGIN_PORT/1k" -x http://127.0.0.1:13141 > "$WORK/oha-$variant.json"
  python3 - "$pid" "$variant" "$WORK/oha-$variant.json" <<'PY'
import os, sys, json
pid, variant, f = sys.argv[1], sys.argv[2], sys.argv[3]
tot = {}
for tid in os.listdir(f"/proc/{pid}/task"):
    name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
    st = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")",1)[1].split()
    ticks = int(st[11]) + int(st[12])
    tot[name] = tot.get(name, 0) + ticks
r = json.load(open(f))
rps = r["summary"]["requestsPerSec"]
print(variant, "req/s %.0f" % rps, {k: v for k, v in sorted(tot.items(), key=lambda x: -x[1]) if v > 0}, "(clock ticks, 1/100 s)")
PY
  kill -INT $pid; wait $pid || true
done
