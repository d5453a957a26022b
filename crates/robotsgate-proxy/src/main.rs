//! The `robotsgate` command line: wiring only; the logic lives in the libraries.

fn main() -> std::process::ExitCode {
    robotsgate_proxy::cli::main()
}
