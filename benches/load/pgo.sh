#!/usr/bin/env bash
# A profile-guided (PGO) release build of the `robotsgate` binary (issue 32's lever "profile-
# guided optimisation of the release build"). Not one of the README's two commands: it
# needs `llvm-profdata` of rustc's LLVM version besides cargo.
#
#   bash benches/load/pgo.sh                    # -> target/pgo/use/release/robotsgate
#   LLVM_PROFDATA=/path/to/llvm-profdata bash benches/load/pgo.sh
#
# 1. builds robotsgate instrumented (RUSTFLAGS=-Cprofile-generate) into target/pgo/gen
#    (PGO_GEN=BIN: an instrumented binary built before, instead);
# 2. trains it on the load benchmark's traffic, each case TRAIN_REQUESTS requests (default
#    20000) from oha at c32 to an nginx origin, robotsgate stopped with SIGINT after each
#    (the profile is written on exit): the forward proxy enforcing with its audit log
#    (1 KiB, 100 KiB and a disallowed path), in mode off, through TLS interception, and
#    `robotsgate ingress` in front of the origin (a bot on an allowed and on a disallowed
#    path, a browser);
# 3. merges the profiles (llvm-profdata merge) into $WORK/robotsgate.profdata;
# 4. builds robotsgate again with -Cprofile-use into target/pgo/use and prints its path.
#
# llvm-profdata: LLVM_PROFDATA if set, else `llvm-profdata-N` or `llvm-profdata` on PATH
# whose LLVM major version N is rustc's (`rustc -vV`), else rustup's llvm-tools component
# (`rustup component add llvm-tools`; then under `rustc --print sysroot`). Any other
# version is refused: a raw profile is read only by the LLVM that wrote it.
set -euo pipefail

BENCH_NAME=robotsgate-pgo
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
TRAIN_REQUESTS=${TRAIN_REQUESTS:-20000}
TARGET="$ROOT/target/pgo"
RG_PORT=13139
ADMIN_PORT=19099
BOT_UA="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
BROWSER_UA="Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"

# --- llvm-profdata -------------------------------------------------------------------------
llvm_major=$(rustc -vV | awk '/^LLVM version:/ { split($3, v, "."); print v[1] }')
[ -n "$llvm_major" ] || die "rustc -vV names no LLVM version"
major_of() { "$1" --version 2>/dev/null | awk '/LLVM version/ { split($NF, v, "."); print v[1]; exit }'; }
find_profdata() {
    local c
    for c in ${LLVM_PROFDATA:-} "llvm-profdata-$llvm_major" llvm-profdata \
        "$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | awk '/^host:/ { print $2 }')/bin/llvm-profdata"; do
        [ -n "$c" ] || continue
        command -v "$c" >/dev/null 2>&1 || continue
        if [ "$(major_of "$c")" = "$llvm_major" ]; then
            echo "$c"
            return
        fi
        [ -n "${LLVM_PROFDATA:-}" ] && [ "$c" = "$LLVM_PROFDATA" ] &&
            die "LLVM_PROFDATA=$c is LLVM $(major_of "$c"), rustc's is LLVM $llvm_major"
    done
    die "no llvm-profdata of LLVM $llvm_major: set LLVM_PROFDATA, install llvm-$llvm_major, or run \`rustup component add llvm-tools\`"
}
PROFDATA=$(find_profdata)
log "llvm-profdata: $PROFDATA (LLVM $llvm_major, as rustc's)"
need_tools

# --- 1. the instrumented build -------------------------------------------------------------
# The profiles go where LLVM_PROFILE_FILE says (the path built in is only a default).
RAW="$WORK/profraw"
rm -rf "$RAW"
mkdir -p "$RAW"
export LLVM_PROFILE_FILE="$RAW/robotsgate-%p-%m.profraw"
if [ -n "${PGO_GEN:-}" ]; then
    GEN=$PGO_GEN
    [ -x "$GEN" ] || die "PGO_GEN=$GEN is not an executable file"
    log "instrumented robotsgate: $GEN (PGO_GEN)"
else
    log "building robotsgate instrumented (target/pgo/gen)"
    (cd "$ROOT" && RUSTFLAGS="-Cprofile-generate=$TARGET/gen/profraw" cargo build --release --quiet -p robotsgate-proxy --target-dir "$TARGET/gen")
    GEN="$TARGET/gen/release/robotsgate"
fi

# --- 2. training -------------------------------------------------------------------------
start_origin
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"
[ -f "$WORK/ca/ca.pem" ] || "$GEN" ca init --dir "$WORK/ca" >/dev/null

# stop_rg: SIGINT, then a bounded wait; the profile is written as the process exits.
stop_rg() {
    local pid=$RG_PID status=0
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && die "robotsgate (pid $pid) did not exit within 30 s of SIGINT"
    wait "$pid" || status=$?
    RG_PID=
    [ "$status" = 0 ] || die "robotsgate exited with status $status after SIGINT (see $WORK/logs)"
}

# oha_n N ARGS...: N requests at c32, failing on a transport error.
oha_n() {
    local n=$1
    shift
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c 32 --output-format json "$@" >"$WORK/results/last.json"
}

train_proxy() {
    local mode=$1
    shift
    write_rg_config "$mode" "$RG_PORT" "$ADMIN_PORT" "$WORK/robotsgate.toml"
    rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
    taskset -c "$SRV_CPU" "$GEN" run --config "$WORK/robotsgate.toml" 2>>"$WORK/logs/train.log" &
    RG_PID=$!
    wait_ready "http://127.0.0.1:$ADMIN_PORT/readyz" "$RG_PID" 30
    "$@"
    stop_rg
}

enforce_traffic() {
    local proxy="http://127.0.0.1:$RG_PORT" origin="http://127.0.0.1:$ORIGIN_PORT"
    oha_n "$TRAIN_REQUESTS" -x "$proxy" "$origin/1k"
    oha_n $((TRAIN_REQUESTS / 10)) -x "$proxy" "$origin/100k"
    oha_n $((TRAIN_REQUESTS / 10)) -x "$proxy" "$origin/private/x"
}
off_traffic() { oha_n "$TRAIN_REQUESTS" -x "http://127.0.0.1:$RG_PORT" "http://127.0.0.1:$ORIGIN_PORT/1k"; }
intercept_traffic() {
    oha_n $((TRAIN_REQUESTS / 4)) -x "http://127.0.0.1:$RG_PORT" --cacert "$WORK/ca/ca.pem" \
        "https://localhost:$ORIGIN_TLS_PORT/1k"
}

log "training: forward proxy, enforce"
train_proxy enforce enforce_traffic
log "training: forward proxy, mode off"
train_proxy off off_traffic
log "training: forward proxy, TLS interception"
train_proxy enforce intercept_traffic

log "training: ingress"
printf '[verify]\nenabled = false\n' >"$WORK/ingress.toml"
rm -rf "$WORK/audit.jsonl"*
taskset -c "$SRV_CPU" "$GEN" ingress --config "$WORK/ingress.toml" --listen "127.0.0.1:$RG_PORT" \
    --admin-listen "127.0.0.1:$ADMIN_PORT" --upstream "http://127.0.0.1:$ORIGIN_PORT" \
    --audit-log "$WORK/audit.jsonl" 2>>"$WORK/logs/train.log" &
RG_PID=$!
wait_ready "http://127.0.0.1:$ADMIN_PORT/readyz" "$RG_PID" 30
oha_n "$TRAIN_REQUESTS" -H "User-Agent: $BOT_UA" "http://127.0.0.1:$RG_PORT/1k"
oha_n $((TRAIN_REQUESTS / 10)) -H "User-Agent: $BOT_UA" "http://127.0.0.1:$RG_PORT/private/x"
oha_n $((TRAIN_REQUESTS / 10)) -H "User-Agent: $BROWSER_UA" "http://127.0.0.1:$RG_PORT/1k"
stop_rg

# --- 3. merge, 4. the optimised build -------------------------------------------------------
ls "$RAW"/*.profraw >/dev/null 2>&1 || die "the instrumented binary wrote no profile under $RAW"
"$PROFDATA" merge -o "$WORK/robotsgate.profdata" "$RAW"
log "building robotsgate with the profile (target/pgo/use)"
(cd "$ROOT" && RUSTFLAGS="-Cprofile-use=$WORK/robotsgate.profdata" cargo build --release --quiet -p robotsgate-proxy --target-dir "$TARGET/use")
log "done: $TARGET/use/release/robotsgate (profile: $WORK/robotsgate.profdata)"
echo "$TARGET/use/release/robotsgate"
