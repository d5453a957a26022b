#!/usr/bin/env bash
# shellcheck disable=SC2086 # OHA_ARGS: options, split on spaces
# Instructions per proxied request, counted by callgrind: repeatable where timings are not.
#
#   bash benches/load/callgrind.sh                    # builds, measures target/release/robotsgate
#   bash benches/load/callgrind.sh OLD_BIN NEW_BIN    # one row per binary and case
#   CASES="enforce off" bash benches/load/callgrind.sh BIN
#   OHA_ARGS=--disable-keepalive ...                  # a new client connection for every request
#
# For each binary and case, robotsgate runs under `valgrind --tool=callgrind` (pinned to
# SRV_CPU, so with one worker thread, as in run.sh) and oha (one worker thread, on GEN_CPU)
# sends REQUESTS requests of 1 KiB at concurrency CONC (default 8) through it to an nginx origin, after
# which robotsgate is stopped with SIGINT and the instructions of its whole process read
# from the callgrind out file. The same is done with CONC requests (STARTUP_REQUESTS) to
# measure start-up, the first robots.txt fetch, the CONC connections (and in `intercept`
# their TLS handshakes) and shutdown; the row gives
#
#   per request = (total(REQUESTS) - total(CONC)) / (REQUESTS - CONC)
#
# Cases (CASES, space-separated; default all):
#   enforce    policy.mode = "enforce", audit log to a file (benches/load/robotsgate.toml)
#   off        policy.mode = "off"
#   intercept  https://localhost:18443/1k through TLS interception, enforce + audit log
#   ingress    `robotsgate ingress` in front of the origin, a GPTBot the site allows: each
#              request decided, recorded in the audit log and forwarded (identity checks off)
#   ingress-verify  the same with the identity check on, by a published range list holding
#              127.0.0.0/8 (reverse DNS, signatures and refresh off), as benches/load/ingress.sh's
#              robotsgate_ingress_verify: every request verified by its address
# Anchors (measured once, not per binary; not in the default CASES):
#   haproxy    HAProxy as run.sh runs it (haproxy.cfg: one thread, access log on), the
#              requests of `enforce` and `off`
#   nginx-proxy  nginx as a reverse proxy as ingress.sh runs it (one worker, in-process:
#              `master_process off`; access log on), the requests of `ingress`
#
# CG_ARGS: more valgrind options, e.g. CG_ARGS="--cache-sim=yes --branch-sim=yes" to count
# simulated cache and branch misses as well (`callgrind_annotate` shows them from the kept
# out files; the table gives instructions only).
# RG_AUDIT: more [audit] lines for every binary measured, e.g. RG_AUDIT='durability = "synced"'.
# RG_EXTRA: more config sections appended, e.g. RG_EXTRA=$'[purpose]\ndefault = ["search"]', or
# fleet mode with a running Redis: RG_EXTRA=$'[cluster]\nredis = "redis://127.0.0.1:6390/0"'.
#
# Results: a table on stdout; out files and logs under $WORK (kept), so that
# `callgrind_annotate --inclusive=yes $WORK/callgrind/NAME.out` shows where it went.
set -euo pipefail

BENCH_NAME=robotsgate-callgrind
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
CASES=${CASES:-enforce off intercept ingress ingress-verify}
REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONC:-8}
# More oha options, e.g. --disable-keepalive (a new client connection for every request).
OHA_ARGS=${OHA_ARGS:-}
STARTUP_REQUESTS=$CONCURRENCY
RG_PORT=13129
ADMIN_PORT=19090
INGRESS_UA="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
READY_SECONDS=120 # start-up under valgrind takes a few seconds; this bounds the wait
STOP_SECONDS=120  # and so does the drain and flush after SIGINT
read -ra CG_EXTRA <<<"${CG_ARGS:-}"

[ "$REQUESTS" -gt "$STARTUP_REQUESTS" ] || die "REQUESTS must be above $STARTUP_REQUESTS"
for case_ in $CASES; do
    case $case_ in
    enforce | off | intercept | ingress | ingress-verify) ;;
    haproxy) need_tools haproxy ;;
    nginx-proxy) ;;
    *) die "unknown case $case_ (enforce, off, intercept, ingress, ingress-verify; anchors haproxy, nginx-proxy)" ;;
    esac
done

# --- tools and binaries ------------------------------------------------------------------
need_tools valgrind
command -v callgrind_annotate >/dev/null || die "callgrind_annotate is missing (Debian package valgrind)"
binaries "$@"

# --- the origin and the interception CA --------------------------------------------------
start_origin
mkdir -p "$WORK/callgrind"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"
[ -f "$WORK/ca/ca.pem" ] || "${BINS[0]}" ca init --dir "$WORK/ca" >/dev/null

# --- measuring ---------------------------------------------------------------------------
# cg_total FILE: the instructions (Ir) in a callgrind out file: callgrind_annotate's
# PROGRAM TOTALS, else the file's `summary:` line, else its `totals:` lines added up.
cg_total() {
    local file=$1 total
    total=$(callgrind_annotate "$file" 2>/dev/null |
        awk '/PROGRAM TOTALS/ { gsub(",", "", $1); if ($1 ~ /^[0-9]+$/) { print $1; exit } }')
    if [ -z "$total" ]; then
        total=$(awk '/^summary:/ { print $2; exit }' "$file")
    fi
    if [ -z "$total" ]; then
        total=$(awk '/^totals:/ { s += $2; n++ } END { if (n) printf "%.0f\n", s }' "$file")
    fi
    [[ "$total" =~ ^[0-9]+$ ]] || die "no instruction total in $file"
    echo "$total"
}

# stop_rg: SIGINT (or SIGNAL), then wait (bounded) for the process to drain, flush and exit; callgrind
# writes its out file on the way out. A non-zero exit or a timeout fails the run.
stop_rg() {
    local pid=$RG_PID status=0
    [ -n "$pid" ] || return 0
    kill -"${SIGNAL:-INT}" "$pid" 2>/dev/null || true
    for _ in $(seq $((STOP_SECONDS * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        RG_PID=
        die "pid $pid did not exit within $STOP_SECONDS s of SIG${SIGNAL:-INT}"
    fi
    wait "$pid" || status=$?
    RG_PID=
    [ "$status" = 0 ] || die "pid $pid under valgrind exited with status $status after SIG${SIGNAL:-INT} (see $WORK/logs)"
}

# measure_anchor NAME CASE N: as measure, for an anchor (haproxy or nginx-proxy) under
# valgrind; its access log must have N lines.
measure_anchor() {
    local name=$1 case_=$2 n=$3 out="$WORK/callgrind/$1.out" json="$WORK/results/$1.json" access
    rm -f "$out"
    if [ "$case_" = haproxy ]; then
        haproxy_conf "$RG_PORT"
        access="$WORK/logs/$name-access.log"
        taskset -c "$SRV_CPU" valgrind --tool=callgrind "${CG_EXTRA[@]}" --callgrind-out-file="$out" \
            haproxy -f "$WORK/haproxy.cfg" -db >"$access" 2>"$WORK/logs/$name.log" &
        RG_PID=$!
        wait_ready_proxy "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:$RG_PORT"
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c "$CONCURRENCY" $OHA_ARGS \
            --output-format json -x "http://127.0.0.1:$RG_PORT" "http://127.0.0.1:$ORIGIN_PORT/1k" >"$json"
        SIGNAL=USR1 stop_rg # soft stop: it ends when its connections have closed
    else
        nginx_proxy_conf "$RG_PORT"
        access="$WORK/logs/nginx-proxy-access.log"
        : >"$access"
        taskset -c "$SRV_CPU" valgrind --tool=callgrind "${CG_EXTRA[@]}" --callgrind-out-file="$out" \
            nginx -p "$WORK" -c "$WORK/nginx-proxy.conf" -g 'daemon off; master_process off;' \
            2>"$WORK/logs/$name.log" &
        RG_PID=$!
        wait_ready_proxy "http://127.0.0.1:$RG_PORT/1k"
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c "$CONCURRENCY" $OHA_ARGS \
            --output-format json -H "User-Agent: $INGRESS_UA" "http://127.0.0.1:$RG_PORT/1k" >"$json"
        SIGNAL=QUIT stop_rg # graceful shutdown
    fi
    python3 "$HERE/report.py" check "$json" || die "$name: answers other than 200"
    [ -s "$out" ] || die "callgrind wrote no $out"
    # The readiness probe's request is logged too (HAProxy adds lines of its own on stopping).
    local lines
    lines=$(grep -c '"GET ' "$access" || true)
    [ "$lines" = $((n + 1)) ] || die "$name: $n requests (and one probe) but $lines logged in $access"
    TOTAL=$(cg_total "$out")
}

# wait_ready_proxy URL [PROXY]: one request for URL (through PROXY) answered by the process
# under valgrind (RG_PID), within READY_SECONDS.
wait_ready_proxy() {
    for _ in $(seq $((READY_SECONDS * 10))); do
        if curl -sf -o /dev/null ${2:+--proxy "$2"} "$1"; then return 0; fi
        kill -0 "$RG_PID" 2>/dev/null || die "process $RG_PID exited before $1 answered"
        sleep 0.1
    done
    die "$1 did not answer within $READY_SECONDS s"
}

# measure NAME BIN CASE N: total instructions of one robotsgate process that served N
# requests of CASE, in TOTAL (not printed: run in this shell, not a subshell, so that the
# EXIT trap knows RG_PID).
measure() {
    local name=$1 bin=$2 case_=$3 n=$4 mode=enforce url="http://127.0.0.1:$ORIGIN_PORT/1k"
    local out="$WORK/callgrind/$name.out" json="$WORK/results/$name.json"
    local tls_args=()
    case $case_ in
    off) mode=off ;;
    intercept) url="https://localhost:$ORIGIN_TLS_PORT/1k" tls_args=(--cacert "$WORK/ca/ca.pem") ;;
    esac
    rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots" "$out"
    if [ "$case_" = ingress ] || [ "$case_" = ingress-verify ]; then
        if [ "$case_" = ingress ]; then
            printf '[verify]\nenabled = false\n%s\n' "${RG_EXTRA:-}" >"$WORK/ingress.toml"
        else
            printf '{"prefixes": [{"ipv4Prefix": "127.0.0.0/8"}]}\n' >"$WORK/gptbot-ranges.json"
            printf '%s\n' "[verify]" "refresh = false" "rdns = false" "signatures = false" "" \
                "[[verify.operators]]" 'name = "OpenAI"' 'tokens = ["GPTBot"]' \
                "ip_lists = [\"$WORK/gptbot-ranges.json\"]" "${RG_EXTRA:-}" >"$WORK/ingress.toml"
        fi
        taskset -c "$SRV_CPU" valgrind --tool=callgrind "${CG_EXTRA[@]}" --callgrind-out-file="$out" \
            "$bin" ingress --config "$WORK/ingress.toml" --listen "127.0.0.1:$RG_PORT" \
            --admin-listen "127.0.0.1:$ADMIN_PORT" --upstream "http://127.0.0.1:$ORIGIN_PORT" \
            --audit-log "$WORK/audit.jsonl" 2>"$WORK/logs/$name.log" &
        RG_PID=$!
        wait_ready "http://127.0.0.1:$ADMIN_PORT/readyz" "$RG_PID" "$READY_SECONDS"
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c "$CONCURRENCY" $OHA_ARGS \
            --output-format json -H "User-Agent: $INGRESS_UA" "http://127.0.0.1:$RG_PORT/1k" >"$json"
    else
        write_rg_config "$mode" "$RG_PORT" "$ADMIN_PORT" "$WORK/robotsgate.toml" "${RG_EXTRA:-}" "${RG_AUDIT:-}"
        taskset -c "$SRV_CPU" valgrind --tool=callgrind "${CG_EXTRA[@]}" --callgrind-out-file="$out" \
            "$bin" run --config "$WORK/robotsgate.toml" 2>"$WORK/logs/$name.log" &
        RG_PID=$!
        wait_ready "http://127.0.0.1:$ADMIN_PORT/readyz" "$RG_PID" "$READY_SECONDS"
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c "$CONCURRENCY" $OHA_ARGS \
            --output-format json -x "http://127.0.0.1:$RG_PORT" "${tls_args[@]}" "$url" >"$json"
    fi
    python3 "$HERE/report.py" check "$json" || die "$name: answers other than 200"
    stop_rg
    [ -s "$out" ] || die "callgrind wrote no $out"
    if [ "$case_" = ingress ] || [ "$case_" = ingress-verify ]; then
        local records
        records=$(grep -c '"type":"ingress"' "$WORK/audit.jsonl" || true)
        [ "${records:-0}" = "$n" ] || die "$name: $n requests but ${records:-0} ingress records in the audit log"
        if [ "$case_" = ingress-verify ]; then
            records=$(grep -c '"identity":"verified"' "$WORK/audit.jsonl" || true)
            [ "${records:-0}" = "$n" ] || die "$name: $n requests but ${records:-0} verified in the audit log"
        fi
    elif [ "$mode" = enforce ]; then
        local decisions
        decisions=$(grep -c '"type":"decision"' "$WORK/audit.jsonl" || true)
        [ "${decisions:-0}" = "$n" ] ||
            die "$name: $n requests but ${decisions:-0} decisions in the audit log"
    fi
    TOTAL=$(cg_total "$out")
}

ROWS=()
for case_ in $CASES; do
    if [ "$case_" = haproxy ] || [ "$case_" = nginx-proxy ]; then
        log "$case_ (callgrind, $STARTUP_REQUESTS then $REQUESTS requests at c$CONCURRENCY)"
        measure_anchor "$case_-startup" "$case_" "$STARTUP_REQUESTS"
        startup=$TOTAL
        measure_anchor "$case_" "$case_" "$REQUESTS"
        total=$TOTAL
        # Totals with %.0f: mawk's %d stops at 2^31 - 1 (an intercept run passes it).
        row=$(awk -v c="$case_" -v n="$REQUESTS" -v m="$STARTUP_REQUESTS" -v t="$total" -v s="$startup" 'BEGIN {
            per = (t - s) / (n - m)
            printf "| (anchor) | %s | %d | %.0f | %.1f M | %.0f | %.1f M | %.0f | %.1fk |\n",
                c, n, t, t / 1e6, s, s / 1e6, per, per / 1e3 }')
        printf '%s\n' "$row" >&2
        ROWS+=("$row")
        continue
    fi
    for idx in "${!BINS[@]}"; do
        bin=${BINS[$idx]}
        tag="b$((idx + 1))-$case_"
        log "$case_: $bin (callgrind, $STARTUP_REQUESTS then $REQUESTS requests at c$CONCURRENCY)"
        measure "$tag-startup" "$bin" "$case_" "$STARTUP_REQUESTS"
        startup=$TOTAL
        measure "$tag" "$bin" "$case_" "$REQUESTS"
        total=$TOTAL
        row=$(awk -v b="$bin" -v c="$case_" -v n="$REQUESTS" -v m="$STARTUP_REQUESTS" \
            -v t="$total" -v s="$startup" 'BEGIN {
                per = (t - s) / (n - m)
                printf "| %s | %s | %d | %.0f | %.1f M | %.0f | %.1f M | %.0f | %.1fk |\n",
                    b, c, n, t, t / 1e6, s, s / 1e6, per, per / 1e3 }')
        printf '%s\n' "$row" >&2
        ROWS+=("$row")
    done
done

log "summary (instructions in the measured process; per request = (total - start-up) / ($REQUESTS - $STARTUP_REQUESTS))"
echo "| binary | case | requests | instructions | | start-up ($STARTUP_REQUESTS requests) | | per request | |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo "callgrind out files: $WORK/callgrind" >&2
