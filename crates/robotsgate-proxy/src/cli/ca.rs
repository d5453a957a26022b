//! `robotsgate ca init`: create the local CA for TLS interception.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::ca::init_ca;
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct CaArgs {
    #[command(subcommand)]
    command: CaCommand,
}

#[derive(Debug, Subcommand)]
enum CaCommand {
    /// Create a CA: DIR/ca.pem (to trust in scrapers) and DIR/ca-key.pem (secret, 0600).
    Init {
        /// Where to put the CA.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Replace an existing CA (clients trusting the old one will fail).
        #[arg(long)]
        force: bool,
    },
}

pub fn run(args: CaArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CaCommand::Init { dir, force } => {
            let files = init_ca(&dir, force)?;
            let ca = std::fs::canonicalize(&files.cert).unwrap_or(files.cert.clone());
            let ca = ca.display();
            let key = files.key.display();
            let dir = dir.display();
            let lines = [
                format!("Created {ca}"),
                format!(
                    "    and {key} (keep it secret: whoever has it can impersonate any site to your scrapers)."
                ),
                String::new(),
                "Start the proxy with interception:".into(),
                format!("    robotsgate run --ca-dir {dir}"),
                String::new(),
                "Then make the scrapers trust the CA:".into(),
                format!(
                    "    curl:                     curl --cacert {ca} -x http://127.0.0.1:3128 https://example.com/"
                ),
                format!("    OpenSSL-based tools:      export SSL_CERT_FILE={ca}"),
                format!("    Python requests, Scrapy:  export REQUESTS_CA_BUNDLE={ca}"),
                format!("    Node.js:                  export NODE_EXTRA_CA_CERTS={ca}"),
                format!(
                    "    Debian system store:      sudo cp {ca} /usr/local/share/ca-certificates/robotsgate.crt && sudo update-ca-certificates"
                ),
                format!(
                    "    Chromium (NSS):           certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n robotsgate -i {ca}"
                ),
                String::new(),
                "Trust it only where robotsgate is the proxy, and only for as long as you need it.".into(),
            ];
            println!("{}", lines.join("\n"));
            Ok(ExitCode::SUCCESS)
        }
    }
}
