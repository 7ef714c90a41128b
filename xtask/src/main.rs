//! Project automation, in Rust (`cargo xtask <task>`).
//!
//! - `ci`: the checks CI runs — `cargo fmt --check`, `cargo clippy --all-targets -D warnings`,
//!   and `cargo test --workspace --locked`.
//! - `receipts`: regenerate the bundled example receipts under `receipts/` from the recipes in
//!   `xtask/receipts.json` (fixed timestamps, so the output is reproducible) and seal each
//!   directory. A test in `tests/cli.rs` fails when the committed files differ.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    let result = match task.as_deref() {
        Some("ci") => ci(),
        Some("receipts") => receipts(),
        _ => Err("usage: cargo xtask ci|receipts".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(1)
        }
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_owned()
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask: {shown}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} failed ({s})")),
        Err(e) => Err(format!("cannot run {shown}: {e}")),
    }
}

fn ci() -> Result<(), String> {
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
    for step in steps {
        run(Command::new(cargo()).args(step).current_dir(root()))?;
    }
    Ok(())
}

/// Reads one string member of a flat JSON object written by us (no serde dependency needed
/// for a three-key recipe file).
fn member(obj: &str, key: &str) -> Result<String, String> {
    let needle = format!("\"{key}\": \"");
    let start = obj.find(&needle).ok_or(format!("recipe lacks {key}"))? + needle.len();
    let end = obj[start..]
        .find('"')
        .ok_or(format!("recipe {key} is unterminated"))?;
    Ok(obj[start..start + end].to_string())
}

fn receipts() -> Result<(), String> {
    let root = root();
    let recipes =
        std::fs::read_to_string(root.join("xtask/receipts.json")).map_err(|e| e.to_string())?;
    let created_at = member(&recipes, "created_at")?;
    run(Command::new(cargo())
        .args(["build", "--quiet", "--package", "jev"])
        .current_dir(&root))?;
    let jev = root.join("target/debug/jev");
    for line in recipes.lines().filter(|l| l.contains("\"dir\"")) {
        let dir = member(line, "dir")?;
        let policy = member(line, "policy")?;
        let records = member(line, "records")?;
        let target = root.join(&dir);
        if target.exists() {
            std::fs::remove_dir_all(&target).map_err(|e| format!("{dir}: {e}"))?;
        }
        run(Command::new(&jev)
            .args([
                "decide",
                "--policy",
                &policy,
                "--receipts",
                &dir,
                "--created-at",
                &created_at,
                &records,
            ])
            .current_dir(&root)
            .stdout(std::process::Stdio::null()))?;
        run(Command::new(&jev).args(["seal", &dir]).current_dir(&root))?;
    }
    Ok(())
}
