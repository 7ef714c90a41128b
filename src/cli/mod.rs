//! The command-line layer: argument types, error rendering and output plumbing. One module per
//! subcommand; each returns an exit code or a [`Failure`], and only [`main`] prints errors and
//! decides how the process ends.

mod calibrate;
mod decide;
mod digest;
mod keygen;
mod measure;
mod output;
mod policy;
mod replay;
mod seal;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jev::exit;

pub use output::Out;

/// Deterministic policy decisions from judge probabilities and reliability records.
#[derive(Parser)]
#[command(name = "jev", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: 0 ok, 1 a gate tripped or a check failed, 2 usage or input error, 3 only indeterminate rows tripped a gate."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure labelled fixtures once, sweep each policy's threshold grid, report agreement.
    Calibrate(calibrate::Args),
    /// Fill the measurement cache for the fixtures (one backend call per state, never twice).
    Measure(measure::Args),
    /// Evaluate records under a policy and print the explained decisions.
    Decide(decide::Args),
    /// List, show, lint and digest policies.
    #[command(subcommand)]
    Policy(policy::Command),
    /// Verify receipts: digest, policy binding, re-derivation, directory seal. Fails closed.
    Verify(verify::Args),
    /// Seal a directory of receipts: SEAL.json with every file's SHA-256 and a Merkle root,
    /// chained to the previous seal and optionally signed.
    Seal(seal::Args),
    /// Write a new signing key for seals (Ed25519 pair, or an HMAC shared secret).
    Keygen(keygen::Args),
    /// Replay receipts under two policies (measurements frozen) and print the decision diff.
    Replay(replay::Args),
    /// Print the RFC 8785 canonical form or its SHA-256 digest of a JSON document.
    Digest(digest::Args),
}

/// Why a command could not finish: an exit code and a message for stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// A usage or input error (exit 2).
    pub fn input(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: exit::INPUT_ERROR,
            message: message.to_string(),
        }
    }
}

/// The result of a subcommand: the exit code to end with, or a failure.
pub type Outcome = Result<u8, Failure>;

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::INPUT_ERROR
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let mut out = Out::stdout();
    let result = match cli.command {
        Command::Calibrate(args) => calibrate::run(args, &mut out),
        Command::Measure(args) => measure::run(args, &mut out),
        Command::Decide(args) => decide::run(args, &mut out),
        Command::Policy(cmd) => policy::run(cmd, &mut out),
        Command::Verify(args) => verify::run(args, &mut out),
        Command::Seal(args) => seal::run(args, &mut out),
        Command::Keygen(args) => keygen::run(args, &mut out),
        Command::Replay(args) => replay::run(args, &mut out),
        Command::Digest(args) => digest::run(args, &mut out),
    };
    let result = result.and_then(|code| out.finish().map(|()| code));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) if f.code == output::BROKEN_PIPE => ExitCode::from(exit::OK),
        Err(f) => {
            eprintln!("jev: {}", bounded(&f.message));
            ExitCode::from(f.code)
        }
    }
}

/// Error messages quote what was wrong; a hostile input can make that enormous (a 60 MB
/// string where an enum value belongs). Keep the start, say how much was left out.
fn bounded(message: &str) -> String {
    const MAX: usize = 4096;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut cut = MAX;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… ({} more bytes)", &message[..cut], message.len() - cut)
}

/// Prints warnings the domain handed back (stderr, never stdout).
pub fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("jev: warning: {}", bounded(w));
    }
}
