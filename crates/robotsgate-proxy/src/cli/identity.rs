//! `robotsgate identity keygen` and `robotsgate identity directory`: the Web Bot Auth keys
//! of `[identity]`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::config::Config;
use crate::identity::{directory_text, keygen, read_key};

#[derive(Debug, Args)]
pub struct IdentityArgs {
    #[command(subcommand)]
    command: IdentityCommand,
}

#[derive(Debug, Subcommand)]
enum IdentityCommand {
    /// Create an Ed25519 key pair: DIR/identity.key (private JWK, 0600; [identity]
    /// signing_key) and DIR/identity.jwk (the public JWK, kid = its RFC 7638 thumbprint).
    Keygen {
        /// Where to put the keys.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Replace existing keys (the old key stops signing: keep a copy in
        /// identity.published_keys until its last signatures expire).
        #[arg(long)]
        force: bool,
    },
    /// Print the key directory (JWKS) the proxy serves: of --key files, or of the
    /// configuration's signing_key and published_keys.
    Directory {
        /// A private key file (repeatable).
        #[arg(long, value_name = "FILE")]
        key: Vec<PathBuf>,
        /// A configuration file whose [identity] keys to list.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// With --config: the keys of [identity.users.NAME] instead of the default ones.
        #[arg(long, value_name = "NAME", requires = "config")]
        user: Option<String>,
    },
}

pub fn run(args: IdentityArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        IdentityCommand::Keygen { dir, force } => {
            let (key_path, jwk_path, key) = keygen(&dir, force)?;
            println!("Created {} (keep it secret) and {}", key_path.display(), jwk_path.display());
            println!("keyid (RFC 7638 thumbprint): {}", key.public().thumbprint());
            println!();
            println!("Sign with it:");
            println!("    [identity]");
            println!("    signing_key = \"{}\"", key_path.display());
            println!("    signature_agent = \"https://bot.example.com\"   # where the directory is served");
            println!("    directory_listen = \"127.0.0.1:8443\"            # put it behind that domain");
            Ok(ExitCode::SUCCESS)
        }
        IdentityCommand::Directory { key, config, user } => {
            let mut keys = Vec::new();
            if let Some(path) = config {
                let config = Config::load(&path)?;
                match user {
                    Some(name) => {
                        let users = crate::identity::users(&config)?;
                        let Some(u) = users.into_iter().find(|u| u.name == name) else {
                            anyhow::bail!("{}: no [identity.users.{name}]", path.display());
                        };
                        keys.extend(u.keys);
                    }
                    None => keys.extend(crate::identity::keys(&config)?.unwrap_or_default()),
                }
            }
            for path in &key {
                let k =
                    read_key(path).map_err(anyhow::Error::msg).with_context(|| path.display().to_string())?;
                if !keys.iter().any(|o| o.public() == k.public()) {
                    keys.push(std::sync::Arc::new(k));
                }
            }
            if keys.is_empty() {
                anyhow::bail!("no keys: pass --key FILE or --config FILE with [identity] signing_key");
            }
            println!("{}", directory_text(&keys));
            Ok(ExitCode::SUCCESS)
        }
    }
}
