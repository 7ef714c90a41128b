//! `jev decide`: evaluate records under a policy.

use std::collections::HashSet;
use std::path::PathBuf;

use clap::ValueEnum;
use comfy_table::Table;
use jev::policy::{Policy, decide};
use jev::record::{RecordError, parse_record};
use jev::{canonical, fsutil, receipt};
use serde_json::{Map, Value, json};

use super::{Failure, Out, Outcome, policy::PolicyArgs};

#[derive(clap::Args)]
pub struct Args {
    /// The policy: NAME@VERSION (looked up in --policies, then the bundled set) or a file path.
    #[arg(long)]
    policy: String,
    #[command(flatten)]
    policies: PolicyArgs,
    /// Override a param for this run: NAME=VALUE (repeatable); the value must lie in the
    /// param's declared range.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Output format. jsonl streams one decision per record.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    format: Format,
    /// Also write one hashed receipt per decision into DIR (created if missing), each file
    /// written atomically and named after the record's `id` (else `record-N`).
    #[arg(long, value_name = "DIR")]
    receipts: Option<PathBuf>,
    /// The receipts' `created_at` (RFC 3339 UTC, e.g. 2026-01-01T00:00:00Z) instead of now;
    /// for reproducible examples.
    #[arg(long, value_name = "TIMESTAMP", requires = "receipts")]
    created_at: Option<String>,
    /// Records: JSON Lines (one record per line; blank lines skipped), or a `.json` file
    /// holding one record object or an array of them. `-` or nothing reads stdin (JSON Lines).
    input: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Jsonl,
    Json,
    Table,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let policy = args.policies.resolve(&args.policy)?;
    let params = param_values(&policy, &args.params)?;
    let (name, text) = super::digest::read_input(args.input.as_deref())?;
    let whole_document = args
        .input
        .as_deref()
        .is_some_and(|p| p.extension().is_some_and(|e| e == "json"));

    let created_at = match &args.created_at {
        Some(ts) if receipt::is_rfc3339_utc(ts) => ts.clone(),
        Some(ts) => {
            return Err(Failure::input(format!(
                "--created-at {ts:?}: expected an RFC 3339 UTC timestamp like 2026-01-01T00:00:00Z"
            )));
        }
        None => receipt::rfc3339_utc(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        ),
    };
    if let Some(dir) = &args.receipts {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::input(format!("--receipts {}: {e}", dir.display())))?;
    }
    let mut written: HashSet<String> = HashSet::new();
    let policy_json =
        json!({"name": policy.name, "version": policy.version, "digest": policy.digest});
    let mut rows = Vec::new();
    for (index, item) in records(&name, &text, whole_document).enumerate() {
        let (place, raw) = item?;
        let record = parse_record(&policy, &raw).map_err(|e| match e {
            RecordError::Invalid { path, message } => {
                Failure::input(format!("{place}: {path}: {message}"))
            }
            missing @ RecordError::MissingRequired(_) => Failure::input(format!(
                "{place}: {missing} (required by {})",
                policy.reference()
            )),
        })?;
        let decision = decide(&policy, &record, &params);
        if let Some(dir) = &args.receipts {
            let measurement = match raw.get("measurement") {
                None | Some(Value::Null) => None,
                Some(m) => Some(
                    serde_json::from_value::<receipt::Measurement>(m.clone())
                        .map_err(|e| Failure::input(format!("{place}: measurement: {e}")))?,
                ),
            };
            let id = record
                .id
                .clone()
                .unwrap_or_else(|| format!("record-{}", index + 1));
            let file = receipt::file_name(&id);
            if !written.insert(file.clone()) {
                return Err(Failure::input(format!(
                    "{place}: id {id:?} gives receipt file {file}, already written in this run (ids must be unique)"
                )));
            }
            let doc = receipt::build(
                &policy,
                &id,
                &created_at,
                receipt::input_of(&raw),
                measurement.as_ref(),
                &params,
                &decision,
            );
            let path = dir.join(&file);
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
            fsutil::write_atomic(&path, text.as_bytes())
                .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
        }
        let mut obj = Map::new();
        if let Some(id) = &record.id {
            obj.insert("id".into(), json!(id));
        }
        obj.extend(decision.to_json(&policy));
        obj.insert("policy".into(), policy_json.clone());
        match args.format {
            Format::Jsonl => {
                out.line(&Value::Object(obj).to_string())?;
                out.flush()?;
            }
            _ => rows.push((place, decision, Value::Object(obj))),
        }
    }
    match args.format {
        Format::Jsonl => {}
        Format::Json => {
            let all: Vec<Value> = rows.into_iter().map(|(_, _, v)| v).collect();
            out.line(&serde_json::to_string_pretty(&all).unwrap_or_default())?;
        }
        Format::Table => {
            let mut table = Table::new();
            table.set_header([
                "record",
                "outcome",
                "matched_rule",
                "suppressed",
                "reasons",
                "obligations",
            ]);
            for (place, d, v) in rows {
                let label = v
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or(place);
                table.add_row([
                    label,
                    d.label(),
                    d.matched_rule.clone(),
                    d.suppressed_rules.join(", "),
                    d.reason_codes.join(", "),
                    d.obligations.join(", "),
                ]);
            }
            out.line(&format!("{} ({})", policy.reference(), policy.digest))?;
            out.line(&table.to_string())?;
        }
    }
    Ok(jev::exit::OK)
}

/// The input's records, each with its place (`FILE:LINE`) for error messages. JSON Lines are
/// parsed lazily, so decisions for earlier lines are out before a bad line stops the run.
fn records<'a>(
    name: &'a str,
    text: &'a str,
    whole_document: bool,
) -> Box<dyn Iterator<Item = Result<(String, Value), Failure>> + 'a> {
    if whole_document {
        return match canonical::parse_strict(text) {
            Err(e) => Box::new(std::iter::once(Err(Failure::input(format!("{name}: {e}"))))),
            Ok(Value::Array(items)) => Box::new(
                items
                    .into_iter()
                    .enumerate()
                    .map(move |(i, v)| Ok((format!("{name}: [{i}]"), v))),
            ),
            Ok(other) => Box::new(std::iter::once(Ok((name.to_owned(), other)))),
        };
    }
    Box::new(
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(move |(i, line)| {
                let place = format!("{name}:{}", i + 1);
                canonical::parse_strict(line)
                    .map(|v| (place.clone(), v))
                    .map_err(|e| {
                        let at = if e.path.is_empty() {
                            String::new()
                        } else {
                            format!("{}: ", e.path)
                        };
                        Failure::input(format!("{place}: {at}{} (column {})", e.message, e.column))
                    })
            }),
    )
}

/// The policy's defaults with `NAME=VALUE` overrides applied and range-checked.
pub fn param_values(policy: &Policy, overrides: &[String]) -> Result<Vec<f64>, Failure> {
    let mut values = policy.default_params();
    for text in overrides {
        let Some((name, value)) = text.split_once('=') else {
            return Err(Failure::input(format!(
                "--param {text:?}: expected NAME=VALUE"
            )));
        };
        let Some(idx) = policy.param_index(name) else {
            let known: Vec<&str> = policy.params.iter().map(|p| p.name.as_str()).collect();
            return Err(Failure::input(format!(
                "--param {name}: {} has no such param (it has: {})",
                policy.reference(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        let v: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| Failure::input(format!("--param {name}={value}: expected a number")))?;
        let p = &policy.params[idx];
        if !(p.lo <= v && v <= p.hi) {
            return Err(Failure::input(format!(
                "--param {name}={value}: outside the declared range [{}, {}]",
                p.lo, p.hi
            )));
        }
        values[idx] = v;
    }
    Ok(values)
}
