//! `jev replay --diff --from REF|recorded --to REF PATH...`.

use std::path::PathBuf;

use clap::ValueEnum;
use comfy_table::Table;
use jev::policy::model::Policy;
use jev::receipts_in;
use jev::replay::{self, Row, Side, Status, Summary, Transition};
use serde_json::json;

use super::output::md_cell;
use super::{Failure, Out, Outcome, policy::PolicyArgs};

#[derive(clap::Args)]
pub struct Args {
    /// Print the decision diff between two policies (the only mode).
    #[arg(long, required = true)]
    diff: bool,
    /// The older policy (NAME@VERSION or a file), or `recorded` for the receipts' own decisions.
    #[arg(long, value_name = "REF|recorded")]
    from: String,
    /// The newer policy (NAME@VERSION or a file).
    #[arg(long, value_name = "REF")]
    to: String,
    /// Receipt files, directories or JSON Lines bundles.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    policies: PolicyArgs,
    /// Show only rows that changed (the summary still counts every row).
    #[arg(long)]
    only_changed: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Exit non-zero when rows of these kinds exist: 1 for changed, looser or invalid; 3 when
    /// only indeterminate tripped.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KIND,...")]
    fail_on: Vec<FailOn>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Jsonl,
    Csv,
    Markdown,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FailOn {
    Changed,
    Looser,
    Indeterminate,
    Invalid,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let _ = args.diff;
    if args.to == "recorded" {
        return Err(Failure::input(
            "--to recorded: the newer side must be a policy",
        ));
    }
    let from_policy: Option<Policy> = match args.from.as_str() {
        "recorded" => None,
        r => Some(args.policies.resolve(r)?),
    };
    let to_policy = args.policies.resolve(&args.to)?;
    let from = match &from_policy {
        Some(p) => Side::Policy(p),
        None => Side::Recorded,
    };
    let to = Side::Policy(&to_policy);
    let ref_json = |p: &Option<Policy>| match p {
        Some(p) => json!({"name": p.name, "version": p.version, "digest": p.digest}),
        None => json!("recorded"),
    };
    let from_json = ref_json(&from_policy);
    let to_json = ref_json(&Some(to_policy.clone()));

    let found = receipts_in::expand(&args.paths).map_err(Failure::input)?;
    let mut summary = Summary::default();
    let mut transitions: Vec<Transition> = Vec::new();
    // Table and markdown need every row before printing; JSON, JSON Lines and CSV stream.
    let mut rows: Vec<Row> = Vec::new();
    let mut first = true;
    match args.format {
        Format::Json => out.line(&format!(
            "{{\"from\": {from_json}, \"to\": {to_json}, \"rows\": ["
        ))?,
        Format::Csv => {
            out.line("id,path,status,from,to,changed_fields,missing_required_fields,error")?
        }
        _ => {}
    }
    let replay_one = |r: &receipts_in::ReceiptText| match &r.text {
        Ok(text) => replay::replay_text(&r.place, text, &from, &to),
        Err(e) => Row::invalid(&r.place, format!("unreadable: {e}")),
    };
    let total = receipts_in::process(
        found.stream(),
        replay_one,
        |_, row| -> Result<(), Failure> {
            summary.add(row.status);
            replay::add_transition(&mut transitions, &row);
            if args.only_changed && !row.status.is_change() {
                return Ok(());
            }
            match args.format {
                Format::Jsonl => out.line(&serde_json::to_string(&row).unwrap_or_default())?,
                Format::Json => {
                    out.line(&format!(
                        "{}{}",
                        if first { "  " } else { ", " },
                        serde_json::to_string(&row).unwrap_or_default()
                    ))?;
                    first = false;
                }
                Format::Csv => out.line(&csv_line(&row)?)?,
                Format::Table | Format::Markdown => rows.push(row),
            }
            Ok(())
        },
    )?;
    if total == 0 {
        return Err(Failure::input("no receipts found in the given paths"));
    }
    match args.format {
        Format::Jsonl => out.line(&json!({"summary": summary}).to_string())?,
        Format::Json => out.line(&format!(
            "], \"summary\": {}, \"transitions\": {}}}",
            serde_json::to_string(&summary).unwrap_or_default(),
            serde_json::to_string(&transitions).unwrap_or_default()
        ))?,
        Format::Csv => {}
        Format::Table => render_table(out, &args, &rows, &summary, &transitions)?,
        Format::Markdown => render_markdown(out, &args, &rows, &summary, &transitions)?,
    }
    Ok(gate(&args.fail_on, &summary))
}

/// The exit code `--fail-on` asks for.
fn gate(fail_on: &[FailOn], s: &Summary) -> u8 {
    let tripped = |k: FailOn, n: usize| fail_on.contains(&k) && n > 0;
    if tripped(FailOn::Changed, s.changed())
        || tripped(FailOn::Looser, s.looser)
        || tripped(FailOn::Invalid, s.invalid)
    {
        jev::exit::FOUND
    } else if tripped(FailOn::Indeterminate, s.indeterminate) {
        jev::exit::INDETERMINATE
    } else {
        jev::exit::OK
    }
}

/// The `change` column: the status, what changed, or why the row could not be replayed.
fn change(row: &Row) -> String {
    match row.status {
        Status::Same => "same".into(),
        Status::Invalid => format!("INVALID: {}", row.error.as_deref().unwrap_or("")),
        Status::Indeterminate => {
            let mut parts = Vec::new();
            if !row.missing_required_fields.is_empty() {
                parts.push(format!(
                    "missing {}",
                    row.missing_required_fields.join(", ")
                ));
            }
            if let Some(e) = &row.error {
                parts.push(e.clone());
            }
            format!("POLICY_REPLAY_INDETERMINATE: {}", parts.join("; "))
        }
        s => format!("{} ({})", s.name(), row.changed_fields.join(", ")),
    }
}

fn case(row: &Row) -> String {
    row.id.clone().unwrap_or_else(|| row.path.clone())
}

fn summary_line(s: &Summary) -> String {
    format!(
        "{} receipts: {} same, {} changed ({} stricter, {} looser, {} lateral), {} indeterminate, {} invalid",
        s.total,
        s.same,
        s.changed(),
        s.stricter,
        s.looser,
        s.lateral,
        s.indeterminate,
        s.invalid
    )
}

fn header(args: &Args) -> String {
    format!("replay {} -> {}", args.from, args.to)
}

fn render_table(
    out: &mut Out,
    args: &Args,
    rows: &[Row],
    s: &Summary,
    transitions: &[Transition],
) -> Result<(), Failure> {
    out.line(&header(args))?;
    let mut table = Table::new();
    table.set_header(["case", "from", "to", "change"]);
    for row in rows {
        table.add_row([
            case(row),
            row.from_label.clone(),
            row.to_label.clone(),
            change(row),
        ]);
    }
    out.line(&table.to_string())?;
    out.line(&summary_line(s))?;
    for t in transitions {
        out.line(&format!("{} → {}: {}", t.from, t.to, t.count))?;
    }
    Ok(())
}

fn render_markdown(
    out: &mut Out,
    args: &Args,
    rows: &[Row],
    s: &Summary,
    transitions: &[Transition],
) -> Result<(), Failure> {
    out.line(&format!("### jev {}", header(args)))?;
    out.line("")?;
    out.line(&format!("**{}**", summary_line(s)))?;
    out.line("")?;
    if !transitions.is_empty() {
        out.line("| transition | count |")?;
        out.line("|---|---:|")?;
        for t in transitions {
            out.line(&format!(
                "| `{}` → `{}` | {} |",
                md_cell(&t.from),
                md_cell(&t.to),
                t.count
            ))?;
        }
        out.line("")?;
    }
    out.line("| case | from | to | change |")?;
    out.line("|---|---|---|---|")?;
    for row in rows {
        out.line(&format!(
            "| {} | `{}` | `{}` | {} |",
            md_cell(&case(row)),
            md_cell(&row.from_label),
            md_cell(&row.to_label),
            md_cell(&change(row))
        ))?;
    }
    Ok(())
}

/// One CSV record (RFC 4180 quoting by the csv crate), without its line break.
fn csv_line(row: &Row) -> Result<String, Failure> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record([
        row.id.clone().unwrap_or_default(),
        row.path.clone(),
        row.status.name().to_owned(),
        row.from_label.clone(),
        row.to_label.clone(),
        row.changed_fields.join(" "),
        row.missing_required_fields.join(" "),
        row.error.clone().unwrap_or_default(),
    ])
    .map_err(|e| Failure::input(e.to_string()))?;
    let bytes = w.into_inner().map_err(|e| Failure::input(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes)
        .trim_end_matches('\n')
        .to_owned())
}
