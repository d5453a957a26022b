//! The architecture rule (docs/architecture.md), checked on every test run: no import
//! cycle between modules, inside a folder or across folders, in any crate of the workspace;
//! and the crates in one direction only (proxy → library → engine).
//!
//! A module is a source file. `A` depends on `B` when `A` names `B` or an item `B` defines:
//! `crate::…` and `super::…` paths are resolved to the file that defines the item named
//! (found by its `struct`/`enum`/`fn`/`trait`/`type`/`const`/`static`/`mod` line), so a
//! folder's `mod.rs` that only declares and re-exports its children is not a dependency of
//! the children that the folder re-exports. This reads source text, as the compiler would
//! not tell: an item defined twice in one folder is taken to be the nearest one.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates checked: (name, source root).
const CRATES: &[(&str, &str)] = &[
    ("robotsgate", "src"),
    ("robotsgate-rep", "crates/robotsgate-rep/src"),
    ("robotsgate-h1", "crates/robotsgate-h1/src"),
    ("robotsgate-proxy", "crates/robotsgate-proxy/src"),
];

/// A crate's modules: module path (`["pacing", "lane"]`) → its file's text.
struct Crate {
    modules: BTreeMap<Vec<String>, String>,
    /// Item name → the modules that define an item of that name.
    items: BTreeMap<String, Vec<Vec<String>>>,
}

fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text without comments and string literals (so that docs naming a path are not
/// imports), and without `#[cfg(test)]` modules (tests may reach anywhere in their crate).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tests = false;
    let mut depth = 0i32;
    let mut test_depth = 0;
    let mut pending_test = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        // Strings (roughly): drop the text between quotes.
        let mut clean = String::new();
        let mut in_str = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' && prev != '\'' {
                in_str = !in_str;
            } else if !in_str {
                clean.push(c);
            }
            prev = c;
        }
        let clean = clean.split("//").next().unwrap_or("").to_owned();
        if pending_test && clean.contains('{') {
            in_tests = true;
            test_depth = depth;
            pending_test = false;
        } else if pending_test && !clean.trim().is_empty() && clean.trim().ends_with(';') {
            pending_test = false;
            continue;
        }
        depth += clean.matches('{').count() as i32 - clean.matches('}').count() as i32;
        if in_tests {
            if depth <= test_depth {
                in_tests = false;
            }
            continue;
        }
        out.push_str(&clean);
        out.push('\n');
    }
    out
}

fn load(root: &Path) -> Crate {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut modules = BTreeMap::new();
    let mut items: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for file in files {
        let path = module_path(root, &file);
        // `src/main.rs` beside `src/lib.rs` is a crate of its own: the binary.
        if file.file_name().is_some_and(|n| n == "main.rs") && root.join("lib.rs").exists() {
            continue;
        }
        let text = code(&fs::read_to_string(&file).unwrap());
        for line in text.lines() {
            let words: Vec<&str> =
                line.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
            for pair in words.windows(2) {
                if matches!(
                    pair[0],
                    "struct" | "enum" | "fn" | "trait" | "type" | "const" | "static" | "union"
                ) {
                    items.entry(pair[1].to_owned()).or_default().push(path.clone());
                }
            }
        }
        modules.insert(path, text);
    }
    Crate { modules, items }
}

impl Crate {
    /// The module a path `base :: segments` names, and the item in it if the path goes on
    /// to one: the longest prefix that is a module.
    fn resolve(&self, mut base: Vec<String>, segments: &[String]) -> Option<Vec<String>> {
        let mut i = 0;
        while i < segments.len() {
            let mut next = base.clone();
            next.push(segments[i].clone());
            if self.modules.contains_key(&next) {
                base = next;
                i += 1;
            } else {
                break;
            }
        }
        let Some(item) = segments.get(i) else { return Some(base) };
        // The item: defined in `base` itself, else in the one module under `base` (a
        // re-export) that defines it.
        let defining = self.items.get(item.as_str())?;
        if defining.contains(&base) {
            return Some(base);
        }
        let under: Vec<_> = defining.iter().filter(|m| m.starts_with(&base)).collect();
        match under.as_slice() {
            [one] => Some((*one).clone()),
            _ => Some(base),
        }
    }

    /// What each module depends on.
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, text) in &self.modules {
            let deps = edges.entry(module.clone()).or_default();
            for path in paths(text) {
                let (base, rest) = match path.first().map(String::as_str) {
                    Some("crate") => (Vec::new(), &path[1..]),
                    Some("super") => {
                        let mut base = module.clone();
                        let mut rest = &path[..];
                        while rest.first().map(String::as_str) == Some("super") {
                            base.pop();
                            rest = &rest[1..];
                        }
                        (base, rest)
                    }
                    _ => continue,
                };
                // `use crate::{a, b::C}` is expanded by `paths`.
                if let Some(target) = self.resolve(base, rest)
                    && &target != module
                    && !module.starts_with(&target)
                {
                    deps.insert(target);
                }
            }
        }
        edges
    }
}

/// Every path that starts with `crate::` or `super::` in `text`, with `{…}` groups of a
/// `use` expanded.
fn paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = |w: &str| chars[i..].iter().take(w.len()).copied().eq(w.chars());
        let boundary =
            i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':');
        if boundary && (starts("crate::") || starts("super::")) {
            let (tree, end) = read_tree(&chars, i);
            expand(&tree, Vec::new(), &mut out);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// A use tree: segments, then maybe a `{…}` group of trees.
enum Tree {
    Path(Vec<String>, Vec<Tree>),
}

fn read_tree(chars: &[char], mut i: usize) -> (Tree, usize) {
    let mut segments = Vec::new();
    let mut word = String::new();
    loop {
        let c = chars.get(i).copied().unwrap_or(';');
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            i += 1;
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            segments.push(std::mem::take(&mut word));
            i += 2;
        } else if c == '{' && word.is_empty() {
            let mut children = Vec::new();
            i += 1;
            loop {
                while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    i += 1;
                }
                match chars.get(i) {
                    Some('}') | None => {
                        i += 1;
                        break;
                    }
                    _ => {
                        let (child, end) = read_tree(chars, i);
                        children.push(child);
                        i = end.max(i + 1);
                    }
                }
            }
            return (Tree::Path(segments, children), i);
        } else {
            if !word.is_empty() {
                segments.push(word);
            }
            // `self` in a group names the group's own module.
            segments.retain(|s| s != "self");
            return (Tree::Path(segments, Vec::new()), i);
        }
    }
}

fn expand(tree: &Tree, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let Tree::Path(segments, children) = tree;
    let mut path = prefix;
    path.extend(segments.iter().cloned());
    if children.is_empty() {
        out.push(path);
    } else {
        for child in children {
            expand(child, path.clone(), out);
        }
    }
}

/// The cycles of a graph (its strongly connected components with more than one node).
fn cycles<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    // Tarjan, iteratively small enough to recurse: module graphs are a few hundred nodes.
    struct State<N> {
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on_stack: BTreeSet<N>,
        next: usize,
        out: Vec<Vec<N>>,
    }
    fn visit<N: Ord + Clone>(n: &N, edges: &BTreeMap<N, BTreeSet<N>>, s: &mut State<N>) {
        s.index.insert(n.clone(), s.next);
        s.low.insert(n.clone(), s.next);
        s.next += 1;
        s.stack.push(n.clone());
        s.on_stack.insert(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if !s.index.contains_key(m) {
                visit(m, edges, s);
                let low = s.low[n].min(s.low[m]);
                s.low.insert(n.clone(), low);
            } else if s.on_stack.contains(m) {
                let low = s.low[n].min(s.index[m]);
                s.low.insert(n.clone(), low);
            }
        }
        if s.low[n] == s.index[n] {
            let mut component = Vec::new();
            while let Some(m) = s.stack.pop() {
                s.on_stack.remove(&m);
                let done = &m == n;
                component.push(m);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for n in edges.keys() {
        if !s.index.contains_key(n) {
            visit(n, edges, &mut s);
        }
    }
    s.out
}

fn name(m: &[String]) -> String {
    if m.is_empty() { "(crate root)".into() } else { m.join("::") }
}

#[test]
fn no_import_cycles_between_modules_or_folders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for (krate, src) in CRATES {
        let c = load(&root.join(src));
        assert!(c.modules.len() > 3, "{krate}: no modules found under {src}");
        let edges = c.edges();
        for cycle in cycles(&edges) {
            let names: Vec<_> = cycle.iter().map(|m| name(m)).collect();
            problems.push(format!("{krate}: modules {}", names.join(" <-> ")));
        }
        // Folders: a module's folder is its path without the file; an edge between two
        // files is an edge between every pair of folders on their way apart (siblings).
        let mut folders: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (from, tos) in &edges {
            for to in tos {
                let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
                if common < from.len().min(to.len()) {
                    let a = from[..=common].to_vec();
                    let b = to[..=common].to_vec();
                    folders.entry(a).or_default().insert(b);
                }
            }
        }
        for cycle in cycles(&folders) {
            let names: Vec<_> = cycle.iter().map(|m| name(m)).collect();
            problems.push(format!("{krate}: folders {}", names.join(" <-> ")));
        }
    }
    assert!(problems.is_empty(), "import cycles (see docs/architecture.md):\n{}", problems.join("\n"));
}

#[test]
fn the_crates_depend_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = |p: &str| fs::read_to_string(root.join(p)).unwrap();
    let deps = |text: &str| -> Vec<String> {
        let mut in_deps = false;
        let mut names = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            if in_deps && let Some((name, _)) = line.split_once('=') {
                names.push(name.trim().to_owned());
            }
        }
        names
    };
    let engine = deps(&manifest("crates/robotsgate-rep/Cargo.toml"));
    assert!(
        !engine.iter().any(|d| d.starts_with("robotsgate")),
        "the engine depends on no other crate of ours"
    );
    for bad in ["hyper", "tokio", "http", "tower", "rustls"] {
        assert!(!engine.iter().any(|d| d == bad), "the engine is pure: no {bad}");
    }
    let codec = deps(&manifest("crates/robotsgate-h1/Cargo.toml"));
    assert!(
        !codec.iter().any(|d| d.starts_with("robotsgate")),
        "the HTTP/1.1 codec depends on no other crate of ours"
    );
    for bad in ["hyper", "tokio", "tower", "rustls"] {
        assert!(!codec.iter().any(|d| d == bad), "the HTTP/1.1 codec does no I/O: no {bad}");
    }
    let library = deps(&manifest("Cargo.toml"));
    assert!(!library.iter().any(|d| d == "robotsgate-h1"), "the library does not use the proxy's codec");
    assert!(library.contains(&"robotsgate-rep".to_owned()));
    assert!(!library.iter().any(|d| d == "robotsgate-proxy"), "the library does not depend on the proxy");
    let proxy = deps(&manifest("crates/robotsgate-proxy/Cargo.toml"));
    assert!(proxy.contains(&"robotsgate".to_owned()), "the proxy stands on the library");
}

/// The checker itself: it finds a cycle where there is one.
#[test]
fn the_cycle_check_finds_cycles() {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    edges.entry("a").or_default().insert("b");
    edges.entry("b").or_default().insert("c");
    edges.entry("c").or_default().insert("a");
    edges.entry("d").or_default().insert("a");
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c"]]);
    let text =
        "use crate::pacing::{lane::Lane, store::{PauseInfo, self}};\nfn f() { super::super::x::Y::new() }";
    let found = paths(&code(text));
    let s = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(found.contains(&s(&["crate", "pacing", "lane", "Lane"])), "{found:?}");
    assert!(found.contains(&s(&["crate", "pacing", "store", "PauseInfo"])), "{found:?}");
    assert!(found.contains(&s(&["crate", "pacing", "store"])), "{found:?}");
    assert!(found.contains(&s(&["super", "super", "x", "Y", "new"])), "{found:?}");
}
