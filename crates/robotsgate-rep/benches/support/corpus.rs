//! Where the corpus benchmarks find their robots.txt files: `ROBOTS_CORPUS` if set, else
//! the project's full reference corpus (`../shared/corpus/robots` beside the repository)
//! when it is there, else the sample kept in the repository (`benches/corpus`, see its
//! `SOURCES.md`). The chosen directory is printed, so figures say what they were measured on.

use std::path::{Path, PathBuf};

/// The corpus directory (see the module docs).
pub fn dir() -> PathBuf {
    // The repository root, from whichever package's bench includes this file.
    const SAMPLE: &str = "crates/robotsgate-rep/benches/corpus";
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join(SAMPLE).is_dir())
        .unwrap_or_else(|| panic!("no {SAMPLE} above {}", env!("CARGO_MANIFEST_DIR")));
    let dir = match std::env::var_os("ROBOTS_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => {
            let shared = repo.join("../shared/corpus/robots");
            if shared.is_dir() { shared } else { repo.join(SAMPLE) }
        }
    };
    eprintln!("corpus: {}", dir.display());
    dir
}

/// The `.txt` files of the corpus, sorted by name.
#[allow(dead_code)]
pub fn files() -> Vec<PathBuf> {
    let dir = dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}
