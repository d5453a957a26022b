//! `robotsgate hash-password`: make an Argon2 hash for `[auth.users]`.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct HashArgs {
    /// Print a ready `[auth.users]` line for this user name.
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
}

pub fn run(args: HashArgs) -> anyhow::Result<ExitCode> {
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("password: ").context("cannot read the password")?;
        let again = rpassword::prompt_password("again: ").context("cannot read the password")?;
        anyhow::ensure!(first == again, "the passwords differ");
        first
    } else {
        // One line from standard input, without its line ending.
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    anyhow::ensure!(!password.is_empty(), "the password is empty");
    let hash = crate::auth::hash_password(&password)?;
    match args.user {
        Some(user) => println!("{user} = \"{hash}\""),
        None => println!("{hash}"),
    }
    Ok(ExitCode::SUCCESS)
}
