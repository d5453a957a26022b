//! The `robotsgate` command line: wiring only; the logic lives in the library.

fn main() -> std::process::ExitCode {
    robotsgate::server::cli::main()
}
