//! The files in `deploy/` agree with each other and with the code: every YAML file parses
//! (all documents of it), the configurations load with robotsgate's own parser, the
//! Kubernetes probes and the Compose healthcheck reach the admin listener the container
//! configuration opens, the ConfigMap carries exactly that configuration, and the systemd
//! unit reloads with SIGHUP, and the Dockerfile's build stage copies what Cargo needs to
//! build the workspace. Nothing here needs Docker, a cluster or systemd.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use robotsgate_proxy::config::Config;
use yaml_rust2::{Yaml, YamlLoader};

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// A file under `deploy/`.
fn read(rel: &str) -> String {
    let path = deploy_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every document of a YAML file under `deploy/`.
fn load_yaml(rel: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("deploy/{rel}: {e}"))
}

/// `.yaml` and `.yml` files under `dir`, recursively, as paths relative to `deploy/`.
fn yaml_files(dir: &Path, found: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, found);
        } else if path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            let rel = path.strip_prefix(deploy_dir()).expect("under deploy/");
            found.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

fn parse_config(rel: &str) -> Config {
    Config::parse(&format!("deploy/{rel}"), &read(rel)).unwrap_or_else(|e| panic!("{e}"))
}

fn admin_listen(config: &Config, rel: &str) -> SocketAddr {
    config.admin.listen.unwrap_or_else(|| panic!("deploy/{rel}: [admin] listen is not set"))
}

fn str_of<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str().unwrap_or_else(|| panic!("{what}: expected a string, found {y:?}"))
}

fn vec_of<'a>(y: &'a Yaml, what: &str) -> &'a [Yaml] {
    y.as_vec().unwrap_or_else(|| panic!("{what}: expected a list, found {y:?}"))
}

/// The only document of `kind` in `docs`.
fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    let found: Vec<_> = docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect();
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

/// The entry of a list of mappings whose `name` is `name`.
fn named<'a>(list: &'a Yaml, name: &str) -> &'a Yaml {
    vec_of(list, "named list")
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no entry named {name:?} in {list:?}"))
}

/// A probe's or Service's port: a number, or the name of one of the container's ports.
fn resolve_port(container: &Yaml, port: &Yaml) -> i64 {
    match port {
        Yaml::Integer(n) => *n,
        Yaml::String(name) => named(&container["ports"], name)["containerPort"]
            .as_i64()
            .unwrap_or_else(|| panic!("port {name:?} has no containerPort")),
        other => panic!("not a port: {other:?}"),
    }
}

/// "45s", "40s", "1m" as in Compose and systemd.
fn seconds(text: &str) -> Duration {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = number.parse().unwrap_or_else(|_| panic!("not a duration: {text:?}"));
    match unit {
        "s" | "" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n * 60),
        _ => panic!("unit of {text:?} not handled"),
    }
}

/// The robotsgate container of the Deployment.
fn deployment() -> Yaml {
    of_kind(&load_yaml("k8s/deployment.yaml"), "Deployment").clone()
}

fn robotsgate_container(deployment: &Yaml) -> Yaml {
    named(&deployment["spec"]["template"]["spec"]["containers"], "robotsgate").clone()
}

/// The mount path of the pod volume whose `field` (configMap, secret) has `key` = `value`.
fn mount_of(deployment: &Yaml, container: &Yaml, field: &str, key: &str, value: &str) -> String {
    let volumes = vec_of(&deployment["spec"]["template"]["spec"]["volumes"], "volumes");
    let volume = volumes
        .iter()
        .find(|v| v[field][key].as_str() == Some(value))
        .unwrap_or_else(|| panic!("no volume with {field}.{key} = {value:?}"));
    let name = str_of(&volume["name"], "volume name");
    str_of(&named(&container["volumeMounts"], name)["mountPath"], "mountPath").to_owned()
}

/// The value following `flag` in a list of arguments.
fn arg_after<'a>(args: &'a [Yaml], flag: &str) -> &'a str {
    let i = args.iter().position(|a| a.as_str() == Some(flag)).unwrap_or_else(|| panic!("no {flag} in args"));
    str_of(args.get(i + 1).unwrap_or(&Yaml::BadValue), flag)
}

#[test]
fn every_yaml_file_under_deploy_parses() {
    let mut files = Vec::new();
    yaml_files(&deploy_dir(), &mut files);
    for expected in [
        "compose.yaml",
        "k8s/configmap.yaml",
        "k8s/deployment.yaml",
        "k8s/kustomization.yaml",
        "k8s/networkpolicy.yaml",
        "k8s/pdb.yaml",
        "k8s/secret-ca.yaml",
        "k8s/service.yaml",
    ] {
        assert!(files.iter().any(|f| f == expected), "deploy/{expected} is missing (found {files:?})");
    }
    let mut documents = 0;
    for rel in &files {
        let docs = load_yaml(rel);
        assert!(!docs.is_empty(), "deploy/{rel}: no YAML document");
        for (n, doc) in docs.iter().enumerate() {
            assert!(doc.as_hash().is_some(), "deploy/{rel}, document {}: not a mapping", n + 1);
            documents += 1;
            if rel.starts_with("k8s/") && !rel.ends_with("kustomization.yaml") {
                // A Kubernetes object, labelled like the others.
                for key in ["apiVersion", "kind"] {
                    str_of(&doc[key], &format!("deploy/{rel}: {key}"));
                }
                str_of(&doc["metadata"]["name"], &format!("deploy/{rel}: metadata.name"));
                assert_eq!(
                    doc["metadata"]["labels"]["app.kubernetes.io/name"].as_str(),
                    Some("robotsgate"),
                    "deploy/{rel}: label app.kubernetes.io/name"
                );
            }
        }
    }
    assert!(documents >= files.len());
}

#[test]
fn kustomization_lists_the_manifests_but_not_the_secret_template() {
    let docs = load_yaml("k8s/kustomization.yaml");
    let resources: Vec<&str> =
        vec_of(&docs[0]["resources"], "resources").iter().map(|r| str_of(r, "resource")).collect();
    for r in &resources {
        assert!(deploy_dir().join("k8s").join(r).is_file(), "kustomization.yaml lists missing {r}");
    }
    for r in ["configmap.yaml", "deployment.yaml", "service.yaml", "networkpolicy.yaml", "pdb.yaml"] {
        assert!(resources.contains(&r), "kustomization.yaml does not list {r}");
    }
    // Applying the template would replace the real CA with placeholders.
    assert!(!resources.contains(&"secret-ca.yaml"));
}

#[test]
fn configmap_carries_exactly_the_container_config() {
    let baked = read("robotsgate.container.toml");
    let docs = load_yaml("k8s/configmap.yaml");
    assert_eq!(docs.len(), 1);
    let cm = of_kind(&docs, "ConfigMap");
    let embedded = str_of(&cm["data"]["robotsgate.toml"], "data.robotsgate.toml");
    assert!(
        embedded == baked,
        "deploy/k8s/configmap.yaml's robotsgate.toml differs from deploy/robotsgate.container.toml: \
         copy the file into it verbatim, indented by four spaces"
    );
    let config = Config::parse("deploy/k8s/configmap.yaml", embedded).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config, parse_config("robotsgate.container.toml"));

    // Listening on every interface of the pod or container: only private networks may use it.
    assert!(config.proxy.listen.ip().is_unspecified());
    assert_eq!(config.proxy.listen.port(), 3128);
    let clients: Vec<String> = config.proxy.allow_clients.iter().map(|c| c.0.to_string()).collect();
    for net in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"] {
        assert!(clients.iter().any(|c| c == net), "allow_clients lacks {net}: {clients:?}");
    }
    assert!(config.proxy.allow_clients.iter().all(|c| c.0.prefix_len() > 0), "{clients:?}");
    // Password hashes belong in a Secret (deploy/README.md), not in this ConfigMap.
    assert!(config.auth.users.is_empty());
    // The probes need the admin listener on the pod's address.
    let admin = admin_listen(&config, "robotsgate.container.toml");
    assert!(admin.ip().is_unspecified(), "{admin}");
    assert_ne!(admin.port(), config.proxy.listen.port());
}

#[test]
fn deployment_probes_target_the_admin_listener() {
    let config = parse_config("robotsgate.container.toml");
    let admin_port = i64::from(admin_listen(&config, "robotsgate.container.toml").port());
    let deployment = deployment();
    let container = robotsgate_container(&deployment);

    let liveness = &container["livenessProbe"]["httpGet"];
    assert_eq!(liveness["path"].as_str(), Some("/healthz"));
    assert_eq!(resolve_port(&container, &liveness["port"]), admin_port, "liveness probe port");
    let readiness = &container["readinessProbe"]["httpGet"];
    assert_eq!(readiness["path"].as_str(), Some("/readyz"));
    assert_eq!(resolve_port(&container, &readiness["port"]), admin_port, "readiness probe port");

    assert_eq!(named(&container["ports"], "metrics")["containerPort"].as_i64(), Some(admin_port));
    assert_eq!(
        named(&container["ports"], "proxy")["containerPort"].as_i64(),
        Some(i64::from(config.proxy.listen.port()))
    );
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"].as_str(), Some("true"));
    assert_eq!(annotations["prometheus.io/port"].as_str(), Some(admin_port.to_string().as_str()));
    assert_eq!(annotations["prometheus.io/path"].as_str(), Some("/metrics"));

    // SIGTERM drains for shutdown_grace; the kubelet must wait longer before SIGKILL.
    let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .expect("terminationGracePeriodSeconds");
    assert!(
        Duration::from_secs(grace as u64) > config.proxy.shutdown_grace.0,
        "terminationGracePeriodSeconds {grace} is not above proxy.shutdown_grace {:?}",
        config.proxy.shutdown_grace.0
    );
}

#[test]
fn deployment_reads_the_configmap_and_the_ca_secret_it_mounts() {
    let deployment = deployment();
    let container = robotsgate_container(&deployment);
    let cm_docs = load_yaml("k8s/configmap.yaml");
    let cm_name = str_of(&of_kind(&cm_docs, "ConfigMap")["metadata"]["name"], "ConfigMap name");
    let args = vec_of(&container["args"], "args");
    assert_eq!(args[0].as_str(), Some("run"));

    let config_dir = mount_of(&deployment, &container, "configMap", "name", cm_name);
    assert_eq!(arg_after(args, "--config"), format!("{config_dir}/robotsgate.toml"));

    let secret_docs = load_yaml("k8s/secret-ca.yaml");
    let secret = of_kind(&secret_docs, "Secret");
    let secret_name = str_of(&secret["metadata"]["name"], "Secret name");
    let ca_dir = mount_of(&deployment, &container, "secret", "secretName", secret_name);
    assert_eq!(arg_after(args, "--ca-dir"), ca_dir);
    for key in ["ca.pem", "ca-key.pem"] {
        assert!(secret["stringData"][key].as_str().is_some(), "secret-ca.yaml lacks {key}");
    }
    assert_eq!(arg_after(args, "--audit-log"), "-");
}

#[test]
fn service_and_network_policy_match_the_container_ports() {
    let config = parse_config("robotsgate.container.toml");
    let admin_port = i64::from(admin_listen(&config, "robotsgate.container.toml").port());
    let proxy_port = i64::from(config.proxy.listen.port());
    let deployment = deployment();
    let container = robotsgate_container(&deployment);
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"].as_hash().expect("pod labels");

    let docs = load_yaml("k8s/service.yaml");
    let service = of_kind(&docs, "Service");
    for (k, v) in service["spec"]["selector"].as_hash().expect("selector") {
        assert_eq!(pod_labels.get(k), Some(v), "Service selector {k:?} does not match the pods");
    }
    assert_eq!(
        resolve_port(&container, &named(&service["spec"]["ports"], "proxy")["targetPort"]),
        proxy_port
    );
    assert_eq!(
        resolve_port(&container, &named(&service["spec"]["ports"], "metrics")["targetPort"]),
        admin_port
    );

    let docs = load_yaml("k8s/networkpolicy.yaml");
    let policy = of_kind(&docs, "NetworkPolicy");
    let mut ports: Vec<i64> = vec_of(&policy["spec"]["ingress"], "ingress")
        .iter()
        .flat_map(|rule| vec_of(&rule["ports"], "ports").iter().map(|p| resolve_port(&container, &p["port"])))
        .collect();
    ports.sort_unstable();
    let mut expected = vec![proxy_port, admin_port];
    expected.sort_unstable();
    assert_eq!(ports, expected);
}

#[test]
fn host_config_parses_and_fits_the_systemd_unit() {
    let config = parse_config("robotsgate.host.toml");
    assert_eq!(config.proxy.listen.port(), 3128);
    // Off loopback, so client networks must be set.
    assert!(!config.proxy.listen.ip().is_loopback());
    assert!(!config.proxy.allow_clients.is_empty());
    assert!(config.proxy.allow_clients.iter().all(|c| c.0.prefix_len() > 0));
    assert!(admin_listen(&config, "robotsgate.host.toml").ip().is_loopback());
    // The directories systemd creates for the dynamic user.
    let unit = read("robotsgate.service");
    assert!(config.audit.path.starts_with("/var/log/robotsgate/"), "{}", config.audit.path);
    assert!(unit.lines().any(|l| l == "LogsDirectory=robotsgate"));
    assert!(config.audit.snapshots.starts_with("/var/lib/robotsgate/"), "{}", config.audit.snapshots);
    assert!(unit.lines().any(|l| l == "StateDirectory=robotsgate"));
}

/// `key=value` lines of one section of a systemd unit, in order.
fn unit_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut current = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.to_owned();
        } else if current == section {
            let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("not key=value: {line:?}"));
            out.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    out
}

fn unit_values<'a>(section: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    section.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
}

#[test]
fn systemd_unit_reloads_with_sighup_and_drains_on_stop() {
    let service = unit_section(&read("robotsgate.service"), "Service");
    assert_eq!(unit_values(&service, "ExecReload"), ["/bin/kill -HUP $MAINPID"]);
    assert_eq!(unit_values(&service, "KillSignal"), ["SIGTERM"]);
    let exec = unit_values(&service, "ExecStart");
    assert_eq!(exec, ["/usr/local/bin/robotsgate run --config /etc/robotsgate/robotsgate.toml"]);

    let host = parse_config("robotsgate.host.toml");
    let stop = seconds(unit_values(&service, "TimeoutStopSec")[0]);
    assert!(stop > host.proxy.shutdown_grace.0, "TimeoutStopSec {stop:?} is not above the drain");

    // The interception drop-in replaces ExecStart (reset, then set) and keeps the config.
    let dropin = unit_section(&read("robotsgate.service.d/intercept.conf"), "Service");
    let exec = unit_values(&dropin, "ExecStart");
    assert_eq!(exec.len(), 2, "{exec:?}");
    assert_eq!(exec[0], "");
    assert!(exec[1].starts_with("/usr/local/bin/robotsgate run --config /etc/robotsgate/robotsgate.toml "));
    assert!(exec[1].ends_with("--ca-dir %d"), "{}", exec[1]);
    assert!(unit_values(&dropin, "ExecReload").is_empty(), "the drop-in must keep the unit's ExecReload");
}

#[test]
fn compose_healthcheck_hits_readyz_on_the_admin_port() {
    let config = parse_config("robotsgate.container.toml");
    let admin_port = admin_listen(&config, "robotsgate.container.toml").port();
    let proxy_port = config.proxy.listen.port();
    let docs = load_yaml("compose.yaml");
    assert_eq!(docs.len(), 1);
    let services = &docs[0]["services"];
    let rg = &services["robotsgate"];
    assert!(rg.as_hash().is_some(), "no robotsgate service");

    let test: Vec<&str> =
        vec_of(&rg["healthcheck"]["test"], "healthcheck.test").iter().map(|t| str_of(t, "test")).collect();
    assert_eq!(test.first(), Some(&"CMD"), "{test:?}");
    let readyz = format!("http://127.0.0.1:{admin_port}/readyz");
    assert!(test.contains(&readyz.as_str()), "healthcheck {test:?} does not fetch {readyz}");

    // The baked configuration, where the Dockerfile puts it.
    let command: Vec<&str> = vec_of(&rg["command"], "command").iter().map(|c| str_of(c, "command")).collect();
    assert_eq!(command[..3], ["run", "--config", "/etc/robotsgate/robotsgate.toml"]);
    assert!(
        read("Dockerfile")
            .contains("COPY --chmod=0644 deploy/robotsgate.container.toml /etc/robotsgate/robotsgate.toml")
    );
    // The YAML anchor for the build resolved.
    assert_eq!(rg["build"]["dockerfile"].as_str(), Some("deploy/Dockerfile"));
    assert_eq!(services["ca-init"]["build"], rg["build"]);

    let ports: Vec<&str> = vec_of(&rg["ports"], "ports").iter().map(|p| str_of(p, "port")).collect();
    assert_eq!(
        ports,
        [format!("127.0.0.1:{proxy_port}:{proxy_port}"), format!("127.0.0.1:{admin_port}:{admin_port}")]
    );

    let grace = seconds(str_of(&rg["stop_grace_period"], "stop_grace_period"));
    assert!(grace > config.proxy.shutdown_grace.0, "stop_grace_period {grace:?} is not above the drain");
    assert_eq!(
        services["scraper"]["depends_on"]["robotsgate"]["condition"].as_str(),
        Some("service_healthy")
    );
}

/// The workspace's root (`Cargo.toml` with `[workspace]`).
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` (relative to the workspace's root) without `..` and `.` parts; `.` for the root.
fn normalise(path: &Path) -> PathBuf {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p),
            _ => {}
        }
    }
    if parts.is_empty() { PathBuf::from(".") } else { parts.iter().collect() }
}

/// The sources of the Dockerfile's `COPY` instructions from the build context (not
/// `--from` a stage), each with whether a `cargo build` runs before it; and the text of
/// its instructions before the first `cargo build` (where stub files are made).
fn dockerfile_copies(dockerfile: &str) -> (Vec<(String, bool)>, String) {
    let mut built = false;
    let mut copies = Vec::new();
    let mut before_build = String::new();
    for line in dockerfile.lines().map(str::trim) {
        if line.starts_with('#') {
            continue;
        }
        if line.contains("cargo build") {
            built = true;
        }
        if !built {
            before_build.push_str(line);
            before_build.push('\n');
        }
        let Some(args) = line.strip_prefix("COPY ") else { continue };
        if args.contains("--from=") {
            continue;
        }
        let args: Vec<&str> = args.split_whitespace().filter(|a| !a.starts_with("--")).collect();
        if let Some((_, sources)) = args.split_last() {
            copies.extend(sources.iter().map(|s| (s.trim_end_matches('/').to_owned(), built)));
        }
    }
    (copies, before_build)
}

/// The build stage can build the workspace: Cargo reads every member's manifest, and the
/// files its `[[bench]]`, `[[example]]` and `[[test]]` entries name (copied, or made empty
/// as stubs), before the first `cargo build`
/// (the stub build of the dependencies), and the sources of the proxy and of the crates it is
/// built from are copied in. A crate added to the workspace and forgotten here breaks
/// `docker build`, which nothing else here runs.
#[test]
fn the_dockerfile_copies_every_workspace_member() {
    let root = workspace_root();
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml")).unwrap().parse().unwrap();
    let members: Vec<String> = manifest["workspace"]["members"]
        .as_array()
        .expect("workspace.members")
        .iter()
        .map(|m| m.as_str().expect("a member path").to_owned())
        .collect();
    assert!(members.len() >= 5, "{members:?}");
    let (copies, before_build) = dockerfile_copies(&read("Dockerfile"));
    // `path` (relative to the build context) is copied, itself or within a folder copied,
    // before the first `cargo build` (`early`) or at any point.
    let copied = |path: &str, early: bool| {
        copies.iter().any(|(source, built)| {
            (!early || !built) && (source == path || path.starts_with(&format!("{source}/")))
        })
    };
    for member in &members {
        let dir = if member == "." { String::new() } else { format!("{member}/") };
        let cargo_toml = format!("{dir}Cargo.toml");
        assert!(
            copied(&cargo_toml, true),
            "deploy/Dockerfile does not copy {cargo_toml} before the stub build"
        );
        let crate_manifest: toml::Table =
            std::fs::read_to_string(root.join(&cargo_toml)).unwrap().parse().unwrap();
        for (kind, folder) in [("bench", "benches"), ("example", "examples"), ("test", "tests")] {
            for target in crate_manifest.get(kind).and_then(|t| t.as_array()).into_iter().flatten() {
                let name = target["name"].as_str().expect("a target name");
                let file = match target.get("path").and_then(|p| p.as_str()) {
                    Some(path) => format!("{dir}{path}"),
                    None => format!("{dir}{folder}/{name}.rs"),
                };
                assert!(root.join(&file).is_file(), "{file} named by {cargo_toml} is missing");
                let stubbed = before_build.contains(&format!(": > {file} "));
                assert!(
                    copied(&file, true) || stubbed,
                    "deploy/Dockerfile neither copies nor stubs {file} before the stub build"
                );
            }
        }
    }
    // The sources of the proxy and of every crate of the workspace it is built from.
    let mut needed = vec![PathBuf::from("crates/robotsgate-proxy")];
    let mut seen = Vec::new();
    while let Some(dir) = needed.pop() {
        let src = format!("{}/src", dir.display());
        let src = src.trim_start_matches("./");
        assert!(copied(src, false), "deploy/Dockerfile never copies {src}");
        let manifest: toml::Table =
            std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap().parse().unwrap();
        for dep in
            manifest.get("dependencies").and_then(|d| d.as_table()).into_iter().flat_map(|d| d.values())
        {
            if let Some(path) = dep.get("path").and_then(|p| p.as_str()) {
                let joined = normalise(&dir.join(path));
                if !seen.contains(&joined) {
                    seen.push(joined.clone());
                    needed.push(joined);
                }
            }
        }
    }
    assert!(
        seen.len() >= 3,
        "the proxy is built from the library, the engine and its HTTP/1.1 crate: {seen:?}"
    );
    // The profile-guided build trains the binary with the testkit's robotsgate-pgo-train.
    if read("Dockerfile").contains("benches/load/pgo.sh") {
        assert!(
            copied("crates/robotsgate-testkit/src", false),
            "pgo.sh needs robotsgate-pgo-train's sources"
        );
        assert!(copied("benches/load/pgo.sh", true), "deploy/Dockerfile does not copy benches/load/pgo.sh");
    }
    // The build context lets them through: deploy/Dockerfile.dockerignore is an allow-list.
    let ignore = read("Dockerfile.dockerignore");
    assert!(ignore.lines().any(|l| l.trim() == "*"), "the allow-list starts by leaving everything out");
    for allowed in ["!Cargo.toml", "!Cargo.lock", "!src/", "!benches/", "!examples/", "!crates/"] {
        assert!(ignore.lines().any(|l| l.trim() == allowed), "Dockerfile.dockerignore lacks {allowed}");
    }
}
