//! `jev seal DIR`: write `DIR/SEAL.json` over every file in the directory.

use std::path::PathBuf;

use jev::{fsutil, seal};

use super::{Failure, Out, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// The directory to seal. Every regular file in it (recursively, SEAL.json aside) is
    /// listed with its SHA-256; the seal also records the count and the Merkle root.
    dir: PathBuf,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    if !args.dir.is_dir() {
        return Err(Failure::input(format!(
            "{}: not a directory",
            args.dir.display()
        )));
    }
    let sealed = seal::seal_dir(&args.dir).map_err(Failure::input)?;
    let path = args.dir.join(seal::SEAL_FILE);
    let text = serde_json::to_string_pretty(&sealed).unwrap_or_default() + "\n";
    fsutil::write_atomic(&path, text.as_bytes())
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    out.line(&format!(
        "sealed {} file{} in {}: root {} (unsigned)",
        sealed.count,
        if sealed.count == 1 { "" } else { "s" },
        args.dir.display(),
        sealed.root
    ))?;
    Ok(jev::exit::OK)
}
