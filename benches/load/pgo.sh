#!/usr/bin/env bash
# A profile-guided (PGO) release build of the `robotsgate` binary (issue 32's lever "profile-
# guided optimisation of the release build"). Not one of the README's two commands: it
# needs `llvm-profdata` of rustc's LLVM version besides cargo. The container image is built
# with it (deploy/Dockerfile).
#
#   bash benches/load/pgo.sh                    # -> target/pgo/use/release/robotsgate
#   LLVM_PROFDATA=/path/to/llvm-profdata bash benches/load/pgo.sh
#
# 1. builds robotsgate instrumented (RUSTFLAGS=-Cprofile-generate) into target/pgo/gen
#    (PGO_GEN=BIN: an instrumented binary built before, instead);
# 2. trains it with `robotsgate-pgo-train` (crates/robotsgate-testkit/src/bin), built here
#    with cargo's `pgo-train` profile: the load benchmark's traffic, TRAIN_REQUESTS requests
#    (default 20000) a case on 32 connections, to an origin on loopback in the trainer's
#    own process, robotsgate stopped with SIGINT after each (the profile is written on
#    exit): the forward proxy enforcing with its audit log (1 KiB, 100 KiB and a
#    disallowed path), in mode off, through TLS interception, and `robotsgate ingress` in
#    front of the origin (a bot on an allowed and on a disallowed path, a browser);
# 3. merges the profiles (llvm-profdata merge) into $WORK/robotsgate.profdata;
# 4. builds robotsgate again with -Cprofile-use into target/pgo/use and prints its path.
#
# Nothing but cargo and llvm-profdata: no nginx, no load generator, no root.
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
mkdir -p "$WORK/logs"

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
    (cd "$ROOT" && RUSTFLAGS="-Cprofile-generate=$TARGET/gen/profraw" cargo build --release --locked --quiet -p robotsgate-proxy --target-dir "$TARGET/gen")
    GEN="$TARGET/gen/release/robotsgate"
fi

# --- 2. training -------------------------------------------------------------------------
log "building the trainer (robotsgate-pgo-train, cargo profile pgo-train)"
(cd "$ROOT" && cargo build --locked --quiet --profile pgo-train -p robotsgate-testkit --bin robotsgate-pgo-train)
log "training (TRAIN_REQUESTS=$TRAIN_REQUESTS a case)"
"$ROOT/target/pgo-train/robotsgate-pgo-train" "$GEN" "$TRAIN_REQUESTS" 2>>"$WORK/logs/train.log" ||
    die "training failed (see $WORK/logs/train.log)"

# --- 3. merge, 4. the optimised build -------------------------------------------------------
ls "$RAW"/*.profraw >/dev/null 2>&1 || die "the instrumented binary wrote no profile under $RAW"
"$PROFDATA" merge -o "$WORK/robotsgate.profdata" "$RAW"
log "building robotsgate with the profile (target/pgo/use)"
(cd "$ROOT" && RUSTFLAGS="-Cprofile-use=$WORK/robotsgate.profdata" cargo build --release --locked --quiet -p robotsgate-proxy --target-dir "$TARGET/use")
log "done: $TARGET/use/release/robotsgate (profile: $WORK/robotsgate.profdata)"
echo "$TARGET/use/release/robotsgate"
