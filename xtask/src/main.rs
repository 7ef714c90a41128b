//! Project automation, in Rust (`cargo xtask <task>`).
//!
//! - `ci`: the checks CI runs — `cargo fmt --check`, `cargo clippy --all-targets -D warnings`,
//!   and `cargo test --workspace --locked`.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => ci(),
        _ => {
            eprintln!("usage: cargo xtask ci");
            ExitCode::from(2)
        }
    }
}

fn ci() -> ExitCode {
    let steps: [&[&str]; 3] = [
        &["fmt", "--all", "--check"],
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &["test", "--workspace", "--locked"],
    ];
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for step in steps {
        eprintln!("xtask: cargo {}", step.join(" "));
        match Command::new(&cargo).args(step).status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("xtask: cargo {} failed ({s})", step[0]);
                return ExitCode::from(1);
            }
            Err(e) => {
                eprintln!("xtask: cannot run cargo: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}
