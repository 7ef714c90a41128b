//! `jev verify PATH...`: digest, policy binding, re-derivation and seal of every receipt.

use std::path::PathBuf;

use clap::ValueEnum;
use jev::receipts_in;
use jev::verify::{self, Policies};
use serde_json::json;

use super::{Failure, Out, Outcome, policy::PolicyArgs, warn};

#[derive(clap::Args)]
pub struct Args {
    /// Receipt files, directories of receipts (with their SEAL.json, if any) or JSON Lines
    /// bundles (`*.jsonl`, one receipt per line).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    policies: PolicyArgs,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Junit,
}

/// Without signatures (a later feature) nothing is authenticated: a digest alone proves
/// integrity against accidents, not against someone who can rewrite the digest too.
const AUTHENTICITY: &str = "UNAUTHENTICATED";

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let found = receipts_in::expand(&args.paths).map_err(Failure::input)?;
    let mut policies = Policies::new(args.policies.dir());
    let mut rows = Vec::new();
    for r in &found.receipts {
        let report = match &r.text {
            Ok(text) => verify::verify_text(text, &mut policies),
            Err(e) => verify::ReceiptReport {
                id: None,
                errors: vec![format!("unreadable: {e}")],
            },
        };
        rows.push((r.place.clone(), report));
    }
    warn(&policies.warnings);
    let seals: Vec<verify::SealReport> =
        found.dirs.iter().map(|d| verify::verify_seal(d)).collect();
    let failed = rows.iter().filter(|(_, r)| !r.errors.is_empty()).count();
    let mut seal_errors: Vec<String> = Vec::new();
    for s in &seals {
        for e in &s.errors {
            seal_errors.push(format!("{}: {e}", s.dir.display()));
        }
    }
    let seal_present = seals.iter().any(|s| s.present);
    let none = rows.is_empty();
    let ok = !none && failed == 0 && seal_errors.is_empty();

    match args.format {
        Format::Json => {
            let receipts: Vec<_> = rows
                .iter()
                .map(|(path, r)| json!({"path": path, "id": r.id, "ok": r.errors.is_empty(), "errors": r.errors}))
                .collect();
            let doc = json!({
                "summary": {"total": rows.len(), "ok": rows.len() - failed, "failed": failed},
                "authenticity": AUTHENTICITY,
                "seal": {"present": seal_present, "ok": seal_errors.is_empty(), "errors": seal_errors},
                "receipts": receipts,
            });
            out.line(&serde_json::to_string_pretty(&doc).unwrap_or_default())?;
        }
        Format::Junit => out.line(&junit(&rows, &seal_errors, seal_present))?,
        Format::Table => {
            for (path, r) in &rows {
                let id =
                    r.id.as_deref()
                        .map(|i| format!(" ({i})"))
                        .unwrap_or_default();
                if r.errors.is_empty() {
                    out.line(&format!("ok    {path}{id}"))?;
                }
                for e in &r.errors {
                    out.line(&format!("FAIL  {path}{id}: {e}"))?;
                }
            }
            for s in &seals {
                if s.present && s.errors.is_empty() {
                    out.line(&format!("ok    {}: seal", s.dir.display()))?;
                }
            }
            for e in &seal_errors {
                out.line(&format!("FAIL  {e}"))?;
            }
            let seal = match (seal_present, seal_errors.is_empty()) {
                (false, _) => "no seal",
                (true, true) => "seal ok",
                (true, false) => "seal FAILED",
            };
            out.line(&format!(
                "{} receipt{}: {} ok, {failed} failed; {seal}; {AUTHENTICITY} (no signature checked)",
                rows.len(),
                if rows.len() == 1 { "" } else { "s" },
                rows.len() - failed
            ))?;
        }
    }
    if none {
        return Err(Failure {
            code: jev::exit::FOUND,
            message: "no receipts found: nothing was verified".into(),
        });
    }
    Ok(if ok { jev::exit::OK } else { jev::exit::FOUND })
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn junit(
    rows: &[(String, verify::ReceiptReport)],
    seal_errors: &[String],
    seal_present: bool,
) -> String {
    let mut cases = Vec::new();
    for (path, r) in rows {
        let name = xml_escape(path);
        if r.errors.is_empty() {
            cases.push(format!(
                "    <testcase classname=\"jev.verify\" name=\"{name}\"/>"
            ));
        } else {
            let msg = xml_escape(&r.errors.join("; "));
            cases.push(format!(
                "    <testcase classname=\"jev.verify\" name=\"{name}\">\n      <failure message=\"{msg}\">{msg}</failure>\n    </testcase>"
            ));
        }
    }
    if seal_present || !seal_errors.is_empty() {
        if seal_errors.is_empty() {
            cases.push("    <testcase classname=\"jev.verify\" name=\"seal\"/>".into());
        } else {
            let msg = xml_escape(&seal_errors.join("; "));
            cases.push(format!(
                "    <testcase classname=\"jev.verify\" name=\"seal\">\n      <failure message=\"{msg}\">{msg}</failure>\n    </testcase>"
            ));
        }
    }
    let failures = rows.iter().filter(|(_, r)| !r.errors.is_empty()).count()
        + usize::from(!seal_errors.is_empty());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"jev verify\" tests=\"{}\" failures=\"{failures}\">\n{}\n  </testsuite>\n</testsuites>",
        cases.len(),
        cases.join("\n")
    )
}
