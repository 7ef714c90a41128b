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
    /// The key seals must be signed with (an Ed25519 public key file or the shared HMAC key
    /// file). Without it nothing is authenticated.
    #[arg(long, value_name = "FILE")]
    trust_key: Option<PathBuf>,
    /// Fail (exit 1) unless every receipt is covered by a seal signed with --trust-key.
    #[arg(long)]
    require_authenticated: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Junit,
}

/// A digest alone proves integrity against accidents, not against someone who can rewrite
/// the digest too: only a seal signature checked with a trusted key authenticates.
const AUTHENTICATED: &str = "AUTHENTICATED";
const UNAUTHENTICATED: &str = "UNAUTHENTICATED";

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let found = receipts_in::expand(&args.paths).map_err(Failure::input)?;
    let policies = Policies::new(args.policies.dir());
    let trust = args
        .trust_key
        .as_deref()
        .map(jev::sign::Key::read)
        .transpose()
        .map_err(|e| Failure::input(format!("--trust-key {e}")))?;
    // Seals first: a sealed directory's file set is checked whatever its receipts say.
    let seals: Vec<verify::SealReport> = found
        .dirs
        .iter()
        .map(|d| verify::verify_seal(d, trust.as_ref()))
        .collect();
    // Authenticated only when every path is a directory whose seal the trusted key signed.
    let authenticated = trust.is_some()
        && !seals.is_empty()
        && seals.len() == args.paths.len()
        && seals.iter().all(|s| s.authenticated);
    let authenticity = if authenticated {
        AUTHENTICATED
    } else {
        UNAUTHENTICATED
    };
    let mut seal_errors: Vec<String> = Vec::new();
    for s in &seals {
        for e in &s.errors {
            seal_errors.push(format!("{}: {e}", s.dir.display()));
        }
    }
    let seal_present = seals.iter().any(|s| s.present);
    let check = |r: &receipts_in::ReceiptText| match &r.text {
        Ok(text) => verify::verify_text(text, &policies),
        Err(e) => verify::ReceiptReport {
            id: None,
            errors: vec![format!("unreadable: {e}")],
        },
    };
    let mut failed = 0usize;
    let mut junit_cases = Vec::new();
    let mut first = true;
    if let Format::Json = args.format {
        out.line("{\"receipts\": [")?;
    }
    let total = receipts_in::process(found.stream(), check, |r, report| -> Result<(), Failure> {
        if !report.errors.is_empty() {
            failed += 1;
        }
        match args.format {
            Format::Table => {
                let id = report
                    .id
                    .as_deref()
                    .map(|i| format!(" ({i})"))
                    .unwrap_or_default();
                if report.errors.is_empty() {
                    out.line(&format!("ok    {}{id}", r.place))?;
                }
                for e in &report.errors {
                    out.line(&format!("FAIL  {}{id}: {e}", r.place))?;
                }
            }
            Format::Json => {
                let item = json!({"path": r.place, "id": report.id, "ok": report.errors.is_empty(), "errors": report.errors});
                out.line(&format!("{}{item}", if first { "  " } else { ", " }))?;
                first = false;
            }
            Format::Junit => junit_cases.push(junit_case(&r.place, &report.errors)),
        }
        Ok(())
    })?;
    warn(&policies.warnings());
    let none = total == 0;
    let ok = !none && failed == 0 && seal_errors.is_empty();
    match args.format {
        Format::Json => {
            let rest = json!({
                "summary": {"total": total, "ok": total - failed, "failed": failed},
                "authenticity": authenticity,
                "seal": {"present": seal_present, "ok": seal_errors.is_empty(), "errors": seal_errors},
            });
            // Close the streamed array, then the remaining members of the same object.
            let rest = rest.to_string();
            out.line(&format!("], {}", &rest[1..]))?;
        }
        Format::Junit => {
            if seal_present || !seal_errors.is_empty() {
                junit_cases.push(junit_case("seal", &seal_errors));
            }
            let failures = failed + usize::from(!seal_errors.is_empty());
            out.line(&format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"jev verify\" tests=\"{}\" failures=\"{failures}\">\n{}\n  </testsuite>\n</testsuites>",
                junit_cases.len(),
                junit_cases.join("\n")
            ))?;
        }
        Format::Table => {
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
                "{total} receipt{}: {} ok, {failed} failed; {seal}; {authenticity}{}",
                if total == 1 { "" } else { "s" },
                total - failed,
                match (&trust, authenticated) {
                    (_, true) => format!(
                        " (signed by trusted key {})",
                        trust.as_ref().map(|k| k.id()).unwrap_or_default()
                    ),
                    (None, false) => " (no signature checked: no --trust-key)".into(),
                    (Some(_), false) =>
                        " (no seal signed by the trusted key covers every receipt)".into(),
                }
            ))?;
        }
    }
    if none {
        return Err(Failure {
            code: jev::exit::FOUND,
            message: "no receipts found: nothing was verified".into(),
        });
    }
    if ok && args.require_authenticated && !authenticated {
        eprintln!("jev: --require-authenticated: the receipts are {UNAUTHENTICATED}");
        return Ok(jev::exit::FOUND);
    }
    Ok(if ok { jev::exit::OK } else { jev::exit::FOUND })
}

fn junit_case(name: &str, errors: &[String]) -> String {
    let name = xml_escape(name);
    if errors.is_empty() {
        format!("    <testcase classname=\"jev.verify\" name=\"{name}\"/>")
    } else {
        let msg = xml_escape(&errors.join("; "));
        format!(
            "    <testcase classname=\"jev.verify\" name=\"{name}\">\n      <failure message=\"{msg}\">{msg}</failure>\n    </testcase>"
        )
    }
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
