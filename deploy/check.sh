#!/usr/bin/env bash
# Offline checks of the deployment files (no Docker daemon, no cluster needed):
#
#   bash deploy/check.sh
#
# Always: TOML syntax of the config files; their sections and keys exist in
# config/robotsgate.toml (plus [admin] / [auth]); k8s/configmap.yaml carries exactly
# robotsgate.container.toml; YAML syntax of compose.yaml and k8s/*.yaml.
# When the tool is there: `robotsgate run --check-config` (target/release or debug build, or
# on PATH), `kubectl kustomize`, `hadolint`, `systemd-analyze verify` (needs
# /usr/local/bin/robotsgate to exist, as the unit names it).
# Needs python3 >= 3.11 (tomllib) and PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'EOF'
import sys, tomllib, yaml, glob

failed = False
def fail(msg):
    global failed
    failed = True
    print("FAIL:", msg)

reference = tomllib.load(open("config/robotsgate.toml", "rb"))
# Sections the admin/auth work adds; they are not in config/robotsgate.toml yet.
extra = {"admin": {"listen"}, "auth": None}

def check_keys(path, table, ref, prefix=""):
    for key, value in table.items():
        name = prefix + key
        if not prefix and key in extra:
            allowed = extra[key]
            if allowed is not None and isinstance(value, dict):
                for k in value:
                    if k not in allowed:
                        fail(f"{path}: {name}.{k}: not a known key")
            continue
        if key not in ref:
            # Tables of user-chosen names (agent.users, dns.static) may be empty in the
            # reference.
            fail(f"{path}: {name}: not in config/robotsgate.toml")
        elif isinstance(value, dict) and isinstance(ref[key], dict) and ref[key]:
            check_keys(path, value, ref[key], name + ".")

for path in ["deploy/robotsgate.container.toml", "deploy/robotsgate.host.toml"]:
    try:
        conf = tomllib.load(open(path, "rb"))
    except Exception as e:
        fail(f"{path}: {e}")
        continue
    check_keys(path, conf, reference)
    print("ok  ", path)

docs = {}
for path in ["deploy/compose.yaml"] + sorted(glob.glob("deploy/k8s/*.yaml")):
    try:
        docs[path] = list(yaml.safe_load_all(open(path)))
        print("ok  ", path)
    except Exception as e:
        fail(f"{path}: {e}")

cm = docs.get("deploy/k8s/configmap.yaml")
if cm:
    embedded = tomllib.loads(cm[0]["data"]["robotsgate.toml"])
    baked = tomllib.load(open("deploy/robotsgate.container.toml", "rb"))
    if embedded != baked:
        fail("deploy/k8s/configmap.yaml differs from deploy/robotsgate.container.toml")
    else:
        print("ok   configmap.yaml == robotsgate.container.toml")

sys.exit(1 if failed else 0)
EOF

bin=""
for b in target/release/robotsgate target/debug/robotsgate "$(command -v robotsgate || true)"; do
    if [ -n "$b" ] && [ -x "$b" ]; then bin=$b; break; fi
done
if [ -n "$bin" ]; then
    for f in deploy/robotsgate.container.toml deploy/robotsgate.host.toml; do
        if ! out=$("$bin" run --config "$f" --check-config 2>&1); then
            case $out in
            *"unknown field \`admin\`"*)
                # A build from before the admin listener: check the rest without [admin].
                echo "note: $bin predates [admin]; checking $f without that section"
                stripped=$(mktemp --suffix=.toml)
                awk '/^\[/ { skip = ($0 == "[admin]") } !skip' "$f" >"$stripped"
                "$bin" run --config "$stripped" --check-config
                rm -f "$stripped"
                ;;
            *) echo "$out"; exit 1 ;;
            esac
        else
            echo "$out"
        fi
    done
else
    echo "skip robotsgate --check-config (no binary built)"
fi

if command -v kubectl >/dev/null; then
    kubectl kustomize deploy/k8s >/dev/null && echo "ok   kubectl kustomize deploy/k8s"
else
    echo "skip kubectl kustomize (no kubectl)"
fi

if command -v hadolint >/dev/null; then
    hadolint deploy/Dockerfile && echo "ok   hadolint deploy/Dockerfile"
else
    echo "skip hadolint (not installed)"
fi

if command -v systemd-analyze >/dev/null && [ -x /usr/local/bin/robotsgate ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp deploy/robotsgate.service "$tmp/"
    cp -r deploy/robotsgate.service.d "$tmp/"
    systemd-analyze verify "$tmp/robotsgate.service" && echo "ok   systemd-analyze verify"
else
    echo "skip systemd-analyze verify (no systemd-analyze, or no /usr/local/bin/robotsgate)"
fi
