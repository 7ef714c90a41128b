//! `jev policy list | show | lint | digest`.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};
use comfy_table::Table;
use jev::policy::model::{Policy, Presence};
use jev::policy::registry::{self, Located};
use jev::policy::{lint, render};
use serde_json::json;

use super::{Failure, Out, Outcome, warn};

/// Where `NAME@VERSION` references are looked up before the bundled policies.
#[derive(clap::Args, Clone, Default)]
pub struct PolicyArgs {
    /// Policy directory searched before the bundled policies [default: policies/ when it exists].
    #[arg(long, value_name = "DIR", global = true)]
    policies: Option<PathBuf>,
}

impl PolicyArgs {
    pub fn dir(&self) -> Option<PathBuf> {
        self.policies.clone().or_else(registry::default_dir)
    }

    /// Finds a policy by reference, printing lookup warnings to stderr.
    pub fn resolve(&self, reference: &str) -> Result<Policy, Failure> {
        Ok(self.locate(reference)?.policy)
    }

    pub fn locate(&self, reference: &str) -> Result<Located, Failure> {
        if let Some(dir) = &self.policies {
            if !dir.is_dir() {
                return Err(Failure::input(format!(
                    "--policies {}: not a directory",
                    dir.display()
                )));
            }
        }
        let resolved =
            registry::resolve(reference, self.dir().as_deref()).map_err(Failure::input)?;
        warn(&resolved.warnings);
        Ok(resolved.located)
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// List the policies available: the policy directory's, then the bundled ones.
    List {
        #[command(flatten)]
        policies: PolicyArgs,
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Show a policy: inputs, params, outcome dimensions and rules.
    Show {
        /// NAME@VERSION or a file path.
        reference: String,
        #[command(flatten)]
        policies: PolicyArgs,
        /// `json` prints the policy document itself.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Validate policies and run the safety checks; exit 1 when any check finds a problem.
    Lint {
        /// Policy files or NAME@VERSION references. Nothing: every available policy.
        references: Vec<String>,
        #[command(flatten)]
        policies: PolicyArgs,
    },
    /// Print a policy's digest (sha256 of its RFC 8785 canonical form).
    Digest {
        reference: String,
        #[command(flatten)]
        policies: PolicyArgs,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ListFormat {
    Table,
    Json,
}

pub fn run(cmd: Command, out: &mut Out) -> Outcome {
    match cmd {
        Command::List { policies, format } => list(&policies, format, out),
        Command::Show {
            reference,
            policies,
            format,
        } => show(&policies, &reference, format, out),
        Command::Lint {
            references,
            policies,
        } => lint_all(&policies, &references, out),
        Command::Digest {
            reference,
            policies,
        } => {
            out.line(&policies.resolve(&reference)?.digest)?;
            Ok(jev::exit::OK)
        }
    }
}

/// The directory's policies first, then bundled ones not shadowed by an identical copy.
fn available(policies: &PolicyArgs) -> Result<Vec<Located>, Failure> {
    let mut all = match policies.dir() {
        Some(dir) => registry::directory(&dir).map_err(Failure::input)?,
        None => Vec::new(),
    };
    for b in registry::bundled().map_err(Failure::input)? {
        match all
            .iter()
            .find(|l| l.policy.reference() == b.policy.reference())
        {
            Some(local) if local.policy.digest == b.policy.digest => {}
            Some(local) => warn(&[format!(
                "{}: {} differs from the bundled copy ({} vs {})",
                local.origin,
                b.policy.reference(),
                local.policy.digest,
                b.policy.digest
            )]),
            None => all.push(b),
        }
    }
    Ok(all)
}

fn list(policies: &PolicyArgs, format: ListFormat, out: &mut Out) -> Outcome {
    let all = available(policies)?;
    match format {
        ListFormat::Json => {
            let items: Vec<_> = all
                .iter()
                .map(|l| {
                    json!({"name": l.policy.name, "version": l.policy.version, "digest": l.policy.digest,
                           "origin": l.origin.to_string(), "description": l.policy.description})
                })
                .collect();
            out.line(&serde_json::to_string_pretty(&items).unwrap_or_default())?;
        }
        ListFormat::Table => {
            let mut table = Table::new();
            table.set_header(["policy", "digest", "origin"]);
            for l in &all {
                table.add_row([
                    l.policy.reference(),
                    l.policy.digest.clone(),
                    l.origin.to_string(),
                ]);
            }
            out.line(&table.to_string())?;
        }
    }
    Ok(jev::exit::OK)
}

fn show(policies: &PolicyArgs, reference: &str, format: ListFormat, out: &mut Out) -> Outcome {
    let located = policies.locate(reference)?;
    let p = &located.policy;
    if let ListFormat::Json = format {
        out.line(&serde_json::to_string_pretty(&p.document).unwrap_or_default())?;
        return Ok(jev::exit::OK);
    }
    out.line(&format!("{}  {}", p.reference(), p.digest))?;
    out.line(&format!("origin: {}", located.origin))?;
    out.line(&p.description)?;
    out.line("")?;
    let mut inputs = Table::new();
    inputs.set_header(["input", "type", "presence"]);
    for i in &p.inputs {
        inputs.add_row([i.path.clone(), render::input_type(i), render::presence(i)]);
    }
    out.line(&inputs.to_string())?;
    if !p.params.is_empty() {
        let mut params = Table::new();
        params.set_header(["param", "default", "range", "step", "description"]);
        for q in &p.params {
            params.add_row([
                q.name.clone(),
                q.default.to_string(),
                format!("{}..{}", q.lo, q.hi),
                q.step.to_string(),
                q.description.clone(),
            ]);
        }
        out.line(&params.to_string())?;
    }
    let dims: Vec<String> = p
        .dimensions
        .iter()
        .map(|d| {
            let values = d
                .values
                .as_ref()
                .map(|v| v.join(if d.ordered { " < " } else { ", " }));
            format!("{}: {}", d.name, values.unwrap_or_else(|| "(open)".into()))
        })
        .collect();
    out.line(&format!("outcome: {}", dims.join("; ")))?;
    for r in &p.routes {
        let cases: Vec<String> = r
            .cases
            .iter()
            .map(|(when, v)| match when {
                Some(c) => format!("{v} if {}", render::condition(p, c)),
                None => format!("else {v}"),
            })
            .collect();
        out.line(&format!("route {}: {}", r.name, cases.join("; ")))?;
    }
    let mut rules = Table::new();
    rules.set_header(["rule", "prio", "when", "outcome", "reasons", "obligations"]);
    let groups = [("", &p.rules), ("fallback ", &p.fallback)];
    for (prefix, list) in groups {
        for r in list {
            rules.add_row([
                format!("{prefix}{}", r.id),
                r.priority.to_string(),
                r.when
                    .as_ref()
                    .map(|c| render::condition(p, c))
                    .unwrap_or_else(|| "otherwise".into()),
                render::outcome(p, r),
                r.reasons.join(", "),
                r.obligations.join(", "),
            ]);
        }
    }
    if let Some(f) = &p.failure {
        rules.add_row([
            format!("failure {}", f.id),
            "-".into(),
            "a measurement failed".into(),
            render::outcome(p, f),
            f.reasons.join(", "),
            f.obligations.join(", "),
        ]);
    }
    out.line(&rules.to_string())?;
    let required: Vec<&str> = p
        .inputs
        .iter()
        .filter(|i| matches!(i.presence, Presence::Required))
        .map(|i| i.path.as_str())
        .collect();
    out.line(&format!("required: {}", required.join(", ")))?;
    Ok(jev::exit::OK)
}

fn lint_all(policies: &PolicyArgs, references: &[String], out: &mut Out) -> Outcome {
    let targets = if references.is_empty() {
        available(policies)?
    } else {
        references
            .iter()
            .map(|r| policies.locate(r))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut findings = 0;
    for l in &targets {
        let found = lint::lint(&l.policy);
        if found.is_empty() {
            out.line(&format!("ok    {} ({})", l.policy.reference(), l.origin))?;
        }
        for f in &found {
            out.line(&format!(
                "FAIL  {} ({}): {f}",
                l.policy.reference(),
                l.origin
            ))?;
        }
        findings += found.len();
    }
    Ok(if findings == 0 {
        jev::exit::OK
    } else {
        jev::exit::FOUND
    })
}
