#!/usr/bin/env bash
# Offline checks of the deployment files (no Docker daemon, no cluster needed):
#
#   bash deploy/check.sh
#
# Always (python3 >= 3.11 for tomllib, and PyYAML): TOML syntax of the config files; their
# sections and keys exist in config/robotsgate.toml; k8s/configmap.yaml carries exactly
# robotsgate.container.toml; YAML syntax of compose.yaml and k8s/*.yaml.
# `cargo test --test deploy` checks more (probes against [admin] listen, compose
# healthcheck, the unit's ExecReload) with the crate's own config parser.
#
# When the tool is there, otherwise skipped with a note:
#   robotsgate run --check-config  the newest of target/release, target/debug and PATH,
#                                  or $ROBOTSGATE_BIN
#   yamllint                       every YAML file under deploy/
#   kubectl kustomize              deploy/k8s renders
#   kubernetes-validate --strict   the rendered manifests and secret-ca.yaml (Kubernetes
#                                  $K8S_VERSION, default 1.30.0)
#   dclint                         compose.yaml (on PATH, or $DCLINT)
#   hadolint                       deploy/Dockerfile
#   systemd-analyze verify         the unit and its drop-in, pointed at the built binary
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
# Keys documented only as comments in config/robotsgate.toml (off by default).
commented = {"admin": {"listen"}}

def check_keys(path, table, ref, prefix=""):
    for key, value in table.items():
        name = prefix + key
        if not prefix and key in commented:
            for k in value:
                if k not in commented[key] and k not in ref.get(key, {}):
                    fail(f"{path}: {name}.{k}: not a known key")
            continue
        if key not in ref:
            fail(f"{path}: {name}: not in config/robotsgate.toml")
        elif isinstance(value, dict) and isinstance(ref[key], dict) and ref[key]:
            # Tables of user-chosen names (auth.users, agent.users, dns.static) are empty
            # in the reference and not checked further.
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
    embedded = cm[0]["data"]["robotsgate.toml"]
    baked = open("deploy/robotsgate.container.toml").read()
    if embedded != baked:
        fail("deploy/k8s/configmap.yaml differs from deploy/robotsgate.container.toml")
    else:
        print("ok   configmap.yaml == robotsgate.container.toml")

sys.exit(1 if failed else 0)
EOF

# The newest robotsgate binary: an old build in target/release would reject keys that the
# sources accept.
bin=${ROBOTSGATE_BIN:-}
if [ -z "$bin" ]; then
    for b in target/release/robotsgate target/debug/robotsgate "$(command -v robotsgate || true)"; do
        if [ -n "$b" ] && [ -x "$b" ] && { [ -z "$bin" ] || [ "$b" -nt "$bin" ]; }; then bin=$b; fi
    done
fi
if [ -n "$bin" ]; then
    echo "note: checking with $bin"
    for f in deploy/robotsgate.container.toml deploy/robotsgate.host.toml; do
        "$bin" run --config "$f" --check-config
    done
else
    echo "skip robotsgate --check-config (no binary built)"
fi

if command -v yamllint >/dev/null; then
    # Default rules, with lines up to 100 characters and no "---" required.
    yamllint --strict \
        -d '{extends: default, rules: {line-length: {max: 100}, document-start: disable}}' \
        deploy/
    echo "ok   yamllint deploy/"
else
    echo "skip yamllint (not installed)"
fi

if command -v kubectl >/dev/null; then
    rendered=$(kubectl kustomize deploy/k8s)
    echo "ok   kubectl kustomize deploy/k8s"
    if command -v kubernetes-validate >/dev/null; then
        tmp=$(mktemp -d)
        printf '%s\n' "$rendered" >"$tmp/rendered.yaml"
        kubernetes-validate --strict --quiet -k "${K8S_VERSION:-1.30.0}" \
            "$tmp/rendered.yaml" deploy/k8s/secret-ca.yaml
        rm -rf "$tmp"
        echo "ok   kubernetes-validate --strict (${K8S_VERSION:-1.30.0})"
    else
        echo "skip kubernetes-validate (not installed)"
    fi
else
    echo "skip kubectl kustomize and kubernetes-validate (no kubectl)"
fi

dclint=${DCLINT:-$(command -v dclint || true)}
if [ -n "$dclint" ]; then
    # Errors only. no-build-and-image: `build` with `image` is deliberate (one image,
    # tagged, shared by ca-init and robotsgate).
    "$dclint" deploy/compose.yaml --quiet --disable-rule no-build-and-image
    echo "ok   dclint deploy/compose.yaml"
else
    echo "skip dclint (not installed; or set DCLINT=/path/to/dclint)"
fi

if command -v hadolint >/dev/null; then
    hadolint deploy/Dockerfile
    echo "ok   hadolint deploy/Dockerfile"
else
    echo "skip hadolint (not installed)"
fi

if command -v systemd-analyze >/dev/null && [ -n "$bin" ]; then
    tmp=$(mktemp -d)
    cp deploy/robotsgate.service "$tmp/"
    cp -r deploy/robotsgate.service.d "$tmp/"
    abs=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    sed -i "s#/usr/local/bin/robotsgate#$abs#g" "$tmp/robotsgate.service" "$tmp"/robotsgate.service.d/*.conf
    systemd-analyze verify "$tmp/robotsgate.service"
    rm -rf "$tmp"
    echo "ok   systemd-analyze verify"
else
    echo "skip systemd-analyze verify (no systemd-analyze, or no robotsgate binary)"
fi
