//! The `robotsgate` command line: wiring only; the logic lives in the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
