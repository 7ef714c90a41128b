//! `jev digest`: RFC 8785 canonical form and SHA-256 of any JSON document.

use std::io::Read;
use std::path::{Path, PathBuf};

use jev::canonical;

use super::{Failure, Out, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// Print the canonical form instead of the digest.
    #[arg(long)]
    canonical: bool,
    /// The JSON document (`-` or nothing: stdin). Parsed strictly: duplicate keys, lone
    /// surrogates and integers beyond ±(2^53−1) are refused.
    input: Option<PathBuf>,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let (name, text) = read_input(args.input.as_deref())?;
    let value =
        canonical::parse_strict(&text).map_err(|e| Failure::input(format!("{name}: {e}")))?;
    if args.canonical {
        out.line(&canonical::canonical_string(&value))?;
    } else {
        out.line(&canonical::canonical_digest(&value))?;
    }
    Ok(jev::exit::OK)
}

/// Reads a file (or stdin for `None` / `-`) as UTF-8, returning the name to use in messages.
pub fn read_input(path: Option<&Path>) -> Result<(String, String), Failure> {
    match path {
        None => read_stdin(),
        Some(p) if p == Path::new("-") => read_stdin(),
        Some(p) => {
            let name = p.display().to_string();
            let bytes = std::fs::read(p).map_err(|e| Failure::input(format!("{name}: {e}")))?;
            let text = String::from_utf8(bytes).map_err(|e| {
                Failure::input(format!(
                    "{name}: not UTF-8 (byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })?;
            Ok((name, text))
        }
    }
}

fn read_stdin() -> Result<(String, String), Failure> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::input(format!("<stdin>: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        Failure::input(format!(
            "<stdin>: not UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok(("<stdin>".into(), text))
}
