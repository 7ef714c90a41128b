//! `jev seal DIR`: write `DIR/SEAL.json` over every file in the directory.

use std::path::PathBuf;

use jev::seal;

use super::{Failure, Out, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// The directory to seal. Every regular file in it (recursively, SEAL.json aside) is
    /// listed with its SHA-256; the seal also records the count and the Merkle root.
    dir: PathBuf,
    /// Sign the seal with this key file (Ed25519 secret key or HMAC key; see `jev keygen`).
    #[arg(long, value_name = "FILE")]
    sign_key: Option<PathBuf>,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    if !args.dir.is_dir() {
        return Err(Failure::input(format!(
            "{}: not a directory",
            args.dir.display()
        )));
    }
    let key = args
        .sign_key
        .as_deref()
        .map(jev::sign::Key::read)
        .transpose()
        .map_err(|e| Failure::input(format!("--sign-key {e}")))?;
    let sealed = seal::reseal(&args.dir, key.as_ref()).map_err(Failure::input)?;
    out.line(&format!(
        "sealed {} file{} in {}: seal {}, root {} ({})",
        sealed.count,
        if sealed.count == 1 { "" } else { "s" },
        args.dir.display(),
        sealed.sequence,
        sealed.root,
        match &sealed.signature {
            Some(sig) => format!("signed {} key {}", sig.algorithm, sig.key_id),
            None => "unsigned".into(),
        }
    ))?;
    Ok(jev::exit::OK)
}
