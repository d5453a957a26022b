# Shared set-up of benches/load/run.sh and benches/load/callgrind.sh; sourced, not run.
#
# Gives: ROOT, HERE, WORK (BENCH_NAME names the temporary folder when WORK is unset),
# GEN_CPU and SRV_CPU, the origin's ports, log/die, apt_install, need_tools (oha, nginx,
# openssl, taskset and what the caller adds), build_robotsgate (sets RG; RG_BIN skips the
# build), start_origin
# (nginx on ORIGIN_PORT and ORIGIN_TLS_PORT with a throwaway CA), start_haproxy and
# haproxy_conf, start_nginx_proxy and nginx_proxy_conf, write_rg_config,
# wait_http and wait_ready, and PIDS, which the EXIT trap ends.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/benches/load"
WORK=${WORK:-$(mktemp -d "/tmp/${BENCH_NAME:-robotsgate-load}.XXXXXX")}
GEN_CPU=${GEN_CPU:-0}
SRV_CPU=${SRV_CPU:-1}
OHA_VERSION=1.16.0

ORIGIN_PORT=18080
ORIGIN_TLS_PORT=18443

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- tools -------------------------------------------------------------------------------
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    as_root apt-get install -y "$@" >/dev/null 2>&1 ||
        { as_root apt-get update >/dev/null && as_root apt-get install -y "$@" >/dev/null; }
}
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"

# need_tools [COMMAND ...]: oha (cargo install), nginx-light, each COMMAND (its Debian
# package has the same name), openssl and taskset, each installed when missing.
need_tools() {
    if ! oha --version 2>/dev/null | grep -q "$OHA_VERSION"; then
        log "installing oha $OHA_VERSION (cargo install)"
        cargo install oha --version "$OHA_VERSION" --locked
    fi
    command -v nginx >/dev/null || { log "installing nginx-light"; apt_install nginx-light; }
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { log "installing $tool"; apt_install "$tool"; }
    done
    command -v openssl >/dev/null || { log "installing openssl"; apt_install openssl; }
    command -v taskset >/dev/null || apt_install util-linux
}

# build_robotsgate: sets RG to RG_BIN when that is given (a binary built elsewhere, e.g. the
# commit before a change), else builds this checkout in release mode and takes its binary.
build_robotsgate() {
    if [ -n "${RG_BIN:-}" ]; then
        [ -f "$RG_BIN" ] && [ -x "$RG_BIN" ] || die "RG_BIN=$RG_BIN is not an executable file"
        RG=$(cd "$(dirname "$RG_BIN")" && pwd)/$(basename "$RG_BIN")
        log "robotsgate: $RG (RG_BIN)"
        return
    fi
    log "building robotsgate (release)"
    (cd "$ROOT" && cargo build --release --quiet)
    # shellcheck disable=SC2034 # used by the scripts that source this file
    RG="$ROOT/target/release/robotsgate"
}

# binaries [BIN ...]: sets BINS to the binaries given (absolute paths), or to this checkout's
# release build (build_robotsgate) when none is given.
binaries() {
    BINS=()
    if [ $# = 0 ]; then
        build_robotsgate
        BINS=("$RG")
        return
    fi
    local b
    for b in "$@"; do
        [ -f "$b" ] && [ -x "$b" ] || die "$b is not an executable file"
        BINS+=("$(cd "$(dirname "$b")" && pwd)/$(basename "$b")")
    done
}

# --- processes ---------------------------------------------------------------------------
PIDS=()
RG_PID=
cleanup() {
    local p
    for p in "${PIDS[@]}" ${RG_PID:+"$RG_PID"}; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # The audit logs, their checkpoint files and the access logs of a load run take 1-2 GB
    # (about 700 bytes a request): deleted unless KEEP_LOGS=1. Everything else under WORK
    # (results, callgrind's out files, the servers' own logs) is kept.
    if [ "${KEEP_LOGS:-0}" != 1 ] && [ -d "$WORK" ]; then
        find "$WORK" -type f \( -name '*.jsonl*' -o -name '*access*.log' \) -size +1M -delete 2>/dev/null || true
    fi
}
trap cleanup EXIT

wait_http() { # URL [proxy]
    for _ in $(seq 100); do
        if curl -sf -o /dev/null ${2:+--proxy "$2"} "$1"; then return 0; fi
        sleep 0.1
    done
    die "$1 did not answer"
}

# wait_ready URL PID SECONDS: polls URL until it answers, failing as soon as PID has exited
# or after SECONDS (for a process slow to start, such as one under valgrind).
wait_ready() {
    local url=$1 pid=$2 tries=$(($3 * 10))
    for _ in $(seq "$tries"); do
        if curl -sf -o /dev/null "$url"; then return 0; fi
        kill -0 "$pid" 2>/dev/null || die "process $pid exited before $url answered"
        sleep 0.1
    done
    die "$url did not answer within $3 s"
}

# --- the origin --------------------------------------------------------------------------
# start_origin: files of 1 KiB and 100 KiB and a robots.txt under $WORK/www, a certificate
# for localhost from a throwaway CA ($WORK/origin-ca.pem), and nginx on ORIGIN_PORT (plain)
# and ORIGIN_TLS_PORT (TLS) pinned to SRV_CPU. The caller waits for it (wait_http).
start_origin() {
    mkdir -p "$WORK"/{www,results,logs}
    chmod 755 "$WORK" "$WORK/www"
    printf 'User-agent: *\nDisallow: /private\n' >"$WORK/www/robots.txt"
    head -c 768 /dev/urandom | base64 -w0 >"$WORK/www/1k"
    head -c 76800 /dev/urandom | base64 -w0 >"$WORK/www/100k"
    chmod 644 "$WORK"/www/*

    if [ ! -f "$WORK/origin.pem" ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
            -subj "/CN=robotsgate bench origin CA" -keyout "$WORK/origin-ca-key.pem" \
            -out "$WORK/origin-ca.pem" 2>/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
            -keyout "$WORK/origin-key.pem" -out "$WORK/origin.csr" 2>/dev/null
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$WORK/origin.ext"
        openssl x509 -req -in "$WORK/origin.csr" -CA "$WORK/origin-ca.pem" -CAkey "$WORK/origin-ca-key.pem" \
            -CAcreateserial -days 2 -extfile "$WORK/origin.ext" -out "$WORK/origin.pem" 2>/dev/null
        chmod 644 "$WORK"/origin*.pem
    fi

    sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$ORIGIN_PORT|g" -e "s|@TLS_PORT@|$ORIGIN_TLS_PORT|g" \
        "$HERE/nginx.conf" >"$WORK/nginx.conf"
    taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
    PIDS+=($!)
}

# settle: the dirty pages the runs before left written to disk, before the next run starts.
# The logs of a run (robotsgate's audit log, about 700 bytes a request, nginx's and
# HAProxy's access logs) are written back by the kernel some 30 s later, 150-300 MB at a
# time: with 8 s runs, in the middle of another target's run, which then measured 10-20%
# slower (benches/README.md, ninth session). Each run is measured without the write-back of
# any run's logs, its own included.
settle() { sync; }

# turns ROUND COUNT: the indices 0..COUNT-1 in the order of round ROUND (from 1), rotated by
# one each round, so that no target keeps one place in the round (a fixed order put the
# write-back of the logs, see settle, in the same target's runs). With ROUNDS a multiple of
# COUNT, each target takes each place equally often.
turns() {
    local k
    for ((k = 0; k < $2; k++)); do echo $(((k + $1 - 1) % $2)); done
}

# cpu_ticks PID...: "user system", the CPU clock ticks used so far by these processes,
# their threads and their children (nginx's workers).
cpu_ticks() {
    local pid all=() u=0 s=0 a b task
    for pid in "$@"; do all+=("$pid"); while read -r c; do all+=("$c"); done < <(pgrep -P "$pid" || true); done
    for pid in "${all[@]}"; do
        for task in /proc/"$pid"/task/*/stat; do
            [ -r "$task" ] || continue
            read -r a b < <(sed 's/.*) //' "$task" | awk '{print $12, $13}')
            u=$((u + a)) s=$((s + b))
        done
    done
    echo "$u $s"
}

# start_haproxy PORT: the HAProxy anchor (haproxy.cfg: one thread, access log on) in front
# of the origin on PORT, pinned to SRV_CPU; sets HAPROXY_PID. The caller waits for it.
start_haproxy() {
    local port=$1
    haproxy_conf "$port"
    taskset -c "$SRV_CPU" haproxy -f "$WORK/haproxy.cfg" -db \
        >>"$WORK/logs/haproxy-access.log" 2>>"$WORK/logs/haproxy.log" &
    HAPROXY_PID=$!
    PIDS+=("$HAPROXY_PID")
}

# haproxy_conf PORT: $WORK/haproxy.cfg, the configuration start_haproxy runs (callgrind.sh
# runs it too, under valgrind).
haproxy_conf() {
    sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$1|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" \
        "$HERE/haproxy.cfg" >"$WORK/haproxy.cfg"
}

# start_nginx_proxy PORT: nginx as a reverse proxy in front of the origin on PORT, as the
# ingress benchmarks compare against (one worker, access log on, keep-alive to the site,
# X-Forwarded-For added), pinned to SRV_CPU; waits for it and sets NGINX_PROXY_PID (its
# master) and NGINX_PROXY_WORKER.
start_nginx_proxy() {
    local port=$1
    nginx_proxy_conf "$port" "${2:-}"
    taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx-proxy${2:+-$2}.conf" -g 'daemon off;' &
    NGINX_PROXY_PID=$!
    PIDS+=("$NGINX_PROXY_PID")
    wait_http "http://127.0.0.1:$port/1k"
    # shellcheck disable=SC2034 # for the caller
    NGINX_PROXY_WORKER=$(pgrep -P "$NGINX_PROXY_PID" | head -1)
}

# nginx_proxy_conf PORT [fwd]: $WORK/nginx-proxy.conf, the configuration start_nginx_proxy
# runs (callgrind.sh runs it too, under valgrind): X-Forwarded-For added, as nginx's usual
# set-up. With "fwd" ($WORK/nginx-proxy-fwd.conf), it also sends the other forwarding
# fields robotsgate's ingress sends (Forwarded, X-Forwarded-Proto, X-Forwarded-Host): the
# same work, for comparison; its pid file and logs are its own.
nginx_proxy_conf() {
    local port=$1 variant=${2:-} extra=""
    if [ "$variant" = fwd ]; then
        # shellcheck disable=SC2016 # nginx's variables, for nginx to expand
        extra='            proxy_set_header Forwarded "for=$remote_addr;proto=$scheme;host=\"$host\"";
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;'
    fi
    cat >"$WORK/nginx-proxy${variant:+-$variant}.conf" <<CONF
worker_processes 1;
error_log $WORK/logs/nginx-proxy${variant:+-$variant}-error.log warn;
pid $WORK/nginx-proxy${variant:+-$variant}.pid;
events { worker_connections 8192; }
http {
    access_log $WORK/logs/nginx-proxy${variant:+-$variant}-access.log;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    client_body_temp_path $WORK/nginx-tmp;
    proxy_temp_path $WORK/nginx-tmp;
    fastcgi_temp_path $WORK/nginx-tmp;
    uwsgi_temp_path $WORK/nginx-tmp;
    scgi_temp_path $WORK/nginx-tmp;
    upstream site { server 127.0.0.1:$ORIGIN_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://site;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
$extra
        }
    }
}
CONF
    mkdir -p "$WORK/nginx-tmp"
}

# --- robotsgate --------------------------------------------------------------------------
# start_rg BIN INDEX [audit lines]: the forward proxy BIN on RG_PORT (admin ADMIN_PORT), mode
# RG_MODE (default enforce), with a fresh audit log, pinned to RG_CPUS (default SRV_CPU; one
# worker per CPU in it, e.g. RG_CPUS=0,1 for two workers on both CPUs), its log
# $WORK/logs/rg-INDEX.log; waits until it is ready and sets RG_PID. end_rg stops it (SIGINT).
start_rg() {
    rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
    write_rg_config "${RG_MODE:-enforce}" "$RG_PORT" "$ADMIN_PORT" "$WORK/rg.toml" "" "${3:-}"
    taskset -c "${RG_CPUS:-$SRV_CPU}" "$1" run --config "$WORK/rg.toml" 2>>"$WORK/logs/rg-$2.log" &
    RG_PID=$!
    wait_http "http://127.0.0.1:$ADMIN_PORT/readyz"
}
end_rg() {
    kill -INT "$RG_PID"
    wait "$RG_PID" || true
    RG_PID=
}

# write_rg_config MODE PORT ADMIN_PORT FILE [extra config lines] [audit lines]:
# benches/load/robotsgate.toml with its @...@ values filled in (audit log $WORK/audit.jsonl,
# interception CA $WORK/ca); the audit lines (a "\n" separates two) go into [audit].
write_rg_config() {
    local mode=$1 port=$2 admin=$3 file=$4 extra=${5:-} audit=${6:-}
    sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$port|g" -e "s|@ADMIN_PORT@|$admin|g" \
        -e "s|@MODE@|$mode|g" -e "s|@TLS_PORT@|$ORIGIN_TLS_PORT|g" "$HERE/robotsgate.toml" |
        awk -v audit="$audit" '{ if (index($0, "# @AUDIT@") == 1) { if (audit != "") print audit } else print }' >"$file"
    printf '%s\n' "$extra" >>"$file"
}
