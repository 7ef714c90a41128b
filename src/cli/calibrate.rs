//! `jev calibrate`: measure what is missing, sweep each family's threshold grid, report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::ValueEnum;
use comfy_table::Table;
use jev::calibrate::grid::{self, AxisSpec, Grid};
use jev::calibrate::report::{self, Family, Objective};
use jev::calibrate::{self as cal, Case};
use jev::fsutil;
use jev::policy::model::Policy;
use serde_json::{Value, json};

use super::measure::{BackendKind, MeasureArgs};
use super::output::md_cell;
use super::{Failure, Out, Outcome};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    measure: MeasureArgs,
    /// Override a param's axis: NAME=LO:HI:STEP or NAME=v1,v2,... (decimals; repeatable).
    #[arg(long = "grid", value_name = "SPEC")]
    grid: Vec<String>,
    /// Use every distinct measured value compared with a param as its axis: exact over all
    /// real thresholds (plus the declared bounds).
    #[arg(long)]
    exact: bool,
    /// What the recommendation maximises: agreement, or agreement with no under-escalation.
    #[arg(long, value_enum, default_value_t = ObjectiveArg::Agreement)]
    objective: ObjectiveArg,
    /// Write every combination to CSV (one column per param, then agree,under,over,n). With
    /// several families, the family is added to the name: grid.tool-call-assessment@v1.csv.
    #[arg(long, value_name = "FILE.csv")]
    grid_out: Option<PathBuf>,
    /// Exit 1 when agreement at the defaults is below RATE (0..1) in any family.
    #[arg(long, value_name = "RATE")]
    fail_under: Option<f64>,
    /// The largest grid swept without complaint.
    #[arg(long, default_value_t = 100_000_000)]
    max_grid: u64,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// The sweep engine: `fast` decomposes each fixture into the boxes where its decision is
    /// constant; `brute` decides every fixture at every grid point (a verification aid: both
    /// give the same counts, the brute force is slower by orders of magnitude).
    #[arg(long, value_enum, default_value_t = Engine::Fast)]
    engine: Engine,
}

#[derive(Clone, Copy, ValueEnum)]
enum Engine {
    Fast,
    Brute,
}

#[derive(Clone, Copy, ValueEnum)]
enum ObjectiveArg {
    Agreement,
    Safe,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Markdown,
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    // Everything that can be wrong with the arguments is found before anything is measured.
    let overrides: Vec<(String, AxisSpec)> = args
        .grid
        .iter()
        .map(|g| grid::parse_override(g))
        .collect::<Result<_, _>>()
        .map_err(Failure::input)?;
    if let Some(rate) = args.fail_under {
        if !(0.0..=1.0).contains(&rate) {
            return Err(Failure::input(format!(
                "--fail-under {rate}: expected a rate in [0, 1]"
            )));
        }
    }
    if let Some(path) = &args.grid_out {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(Failure::input(format!(
                "--grid-out {}: {} is not a directory",
                path.display(),
                dir.display()
            )));
        }
    }
    let mut families = args.measure.families()?;
    for (name, _) in &overrides {
        if !families
            .iter()
            .any(|f| f.policy.param_index(name).is_some())
        {
            return Err(Failure::input(format!(
                "--grid {name}: no family being calibrated has such a param"
            )));
        }
    }
    let mut grids = Vec::with_capacity(families.len());
    for fam in &families {
        let mine: Vec<(String, AxisSpec)> = overrides
            .iter()
            .filter(|(n, _)| fam.policy.param_index(n).is_some())
            .cloned()
            .collect();
        let g = grid::build(&fam.policy, &mine, u128::from(args.max_grid))
            .map_err(|e| Failure::input(format!("{}: {e}", fam.policy.reference())))?;
        grids.push(g);
    }
    args.measure.measure(&mut families)?;

    let objective = match args.objective {
        ObjectiveArg::Agreement => Objective::Agreement,
        ObjectiveArg::Safe => Objective::Safe,
    };
    let synthetic = args.measure.backend == BackendKind::Recorded;
    let mut reports = Vec::new();
    let mut csvs = Vec::new();
    for (fam, g) in families.iter().zip(grids) {
        let refs: Vec<&jev::fixtures::Fixture> = fam.fixtures.iter().collect();
        let cases =
            cal::cases(&fam.policy, &refs, &fam.jobs, &fam.measured).map_err(Failure::input)?;
        let g = if args.exact {
            exact_grid(&fam.policy, &cases, &g)
        } else {
            g
        };
        if g.size() > u128::from(args.max_grid) {
            return Err(Failure::input(format!(
                "{}: the exact grid has {} points, over --max-grid {}",
                fam.policy.reference(),
                g.size(),
                args.max_grid
            )));
        }
        let pairs = cal::usable(&cases);
        let defaults = fam.policy.default_params();
        let sweep = |p: &Policy, grid: &Grid| match args.engine {
            Engine::Fast => cal::fast::sweep(p, &pairs, grid, &defaults),
            Engine::Brute => cal::sweep(p, &pairs, grid, &defaults),
        };
        let started = Instant::now();
        let cells = sweep(&fam.policy, &g);
        let sweep_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let family = report::build(
            report::Inputs {
                policy: &fam.policy,
                cases: &cases,
                grid: &g,
                cells: &cells,
                exact: args.exact,
                sweep_us,
                objective,
                measurement: report::Measurement {
                    calls: fam.stats.calls,
                    cached: fam.stats.cached,
                    backend: args
                        .measure
                        .backend()
                        .map(|b| b.name().to_owned())
                        .unwrap_or_default(),
                    synthetic,
                    note: synthetic
                        .then(|| "recorded answers — plumbing, not a calibration".to_owned()),
                },
            },
            &sweep,
        );
        if args.grid_out.is_some() {
            csvs.push((fam.policy.reference(), grid_csv(&g, &cells, pairs.len())?));
        }
        reports.push(family);
    }

    if let Some(path) = &args.grid_out {
        let several = csvs.len() > 1;
        for (reference, bytes) in &csvs {
            let target = if several {
                family_path(path, reference)
            } else {
                path.clone()
            };
            fsutil::write_atomic(&target, bytes)
                .map_err(|e| Failure::input(format!("--grid-out {}: {e}", target.display())))?;
        }
    }
    match args.format {
        Format::Json => out.line(
            &serde_json::to_string_pretty(&json!({"families": reports})).unwrap_or_default(),
        )?,
        Format::Table => render_table(out, &reports)?,
        Format::Markdown => render_markdown(out, &reports)?,
    }
    if let Some(rate) = args.fail_under {
        let below: Vec<String> = reports
            .iter()
            .filter(|f| {
                f.defaults.n == 0 || f64::from(f.defaults.agree) / (f.defaults.n as f64) < rate
            })
            .map(|f| format!("{}@{}", f.policy.name, f.policy.version))
            .collect();
        if !below.is_empty() {
            eprintln!(
                "jev: agreement at the defaults is below {rate} in {}",
                below.join(", ")
            );
            return Ok(jev::exit::FOUND);
        }
    }
    Ok(jev::exit::OK)
}

fn exact_grid(policy: &Policy, cases: &[Case], g: &Grid) -> Grid {
    let mut measured: Vec<Vec<f64>> = vec![Vec::new(); policy.params.len()];
    for c in cases {
        if let Ok(r) = &c.record {
            for (p, _, v) in jev::policy::eval::param_comparisons(policy, r) {
                measured[p].push(v);
            }
        }
    }
    let mixed = jev::policy::transform::mixed_param_comparisons(policy);
    grid::exact(g, policy, &measured, &mixed)
}

fn family_path(path: &Path, reference: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "grid".into());
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.{reference}{ext}"))
}

fn grid_csv(g: &Grid, cells: &[cal::Cell], n: usize) -> Result<Vec<u8>, Failure> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = g.axes.iter().map(|a| a.name.clone()).collect();
    header.extend(["agree", "under", "over", "n"].map(String::from));
    w.write_record(&header)
        .map_err(|e| Failure::input(e.to_string()))?;
    for (i, c) in cells.iter().enumerate() {
        let mut row: Vec<String> = g
            .axes
            .iter()
            .zip(g.coords(i))
            .map(|(a, k)| a.labels[k].clone())
            .collect();
        row.extend([
            c.agree.to_string(),
            c.under.to_string(),
            c.over.to_string(),
            n.to_string(),
        ]);
        w.write_record(&row)
            .map_err(|e| Failure::input(e.to_string()))?;
    }
    w.into_inner().map_err(|e| Failure::input(e.to_string()))
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(f) => {
            let mut b = ryu_js::Buffer::new();
            b.format_finite(f).to_owned()
        }
        None => v.to_string(),
    }
}

fn params_text(m: &serde_json::Map<String, Value>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={}", num(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn ranges_text(r: &report::Region) -> String {
    if r.ranges.is_empty() {
        return "(no params)".into();
    }
    r.ranges
        .iter()
        .map(|(k, v)| match v.as_array() {
            Some(a) if a.len() == 2 => format!("{k} {}..{}", num(&a[0]), num(&a[1])),
            _ => format!("{k} -"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn pct(k: u32, n: usize) -> String {
    if n == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * f64::from(k) / n as f64)
    }
}

/// The report's lines, shared by the table and markdown renderers (`md` adds emphasis).
fn summary_lines(f: &Family, md: bool) -> Vec<String> {
    let b = |s: &str| if md { format!("**{s}**") } else { s.to_owned() };
    let mut lines = Vec::new();
    let n = f.defaults.n;
    if let Some(note) = &f.measurement.note {
        lines.push(b(note));
    }
    lines.push(format!(
        "fixtures: {} total, {} usable, {} excluded{}",
        f.fixtures.total,
        f.fixtures.usable,
        f.fixtures.excluded,
        if f.fixtures.excluded_cases.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                f.fixtures
                    .excluded_cases
                    .iter()
                    .map(|e| format!("{}: {}", e.id, e.reason))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        }
    ));
    lines.push(format!(
        "measurement: {} backend calls, {} answers from the cache (backend {})",
        f.measurement.calls, f.measurement.cached, f.measurement.backend
    ));
    let shape: Vec<String> = f
        .grid
        .params
        .iter()
        .map(|p| format!("{} {}", p.name, p.values.len()))
        .collect();
    lines.push(format!(
        "grid: {} = {} combination{}{}, swept in {:.1} ms",
        if shape.is_empty() {
            "no params".to_owned()
        } else {
            shape.join(" × ")
        },
        f.grid.size,
        if f.grid.size == 1 { "" } else { "s" },
        if f.grid.exact {
            " (exact: every measured breakpoint)"
        } else {
            ""
        },
        f.grid.sweep_us as f64 / 1000.0
    ));
    let d = &f.defaults;
    lines.push(format!(
        "defaults {}: {}/{n} agree ({}, Wilson 95% {:.1}%–{:.1}%), {} under-escalation{}, {} over-escalation{}",
        if d.params.is_empty() { "(no params)".to_owned() } else { params_text(&d.params) },
        d.agree,
        pct(d.agree, n),
        100.0 * d.wilson95[0],
        100.0 * d.wilson95[1],
        d.under,
        if d.under == 1 { "" } else { "s" },
        d.over,
        if d.over == 1 { "" } else { "s" }
    ));
    if f.best.count == 0 {
        lines.push(format!(
            "best ({}): no combination satisfies the objective",
            f.objective
        ));
    } else {
        lines.push(format!(
            "best ({}): {}/{n} in {} combination{}; ranges {}; {}; defaults {}",
            f.objective,
            f.best.agree,
            f.best.count,
            if f.best.count == 1 { "" } else { "s" },
            ranges_text(&f.best),
            if f.best.solid {
                "solid (the ranges form a box)"
            } else {
                "NOT solid: the box of these ranges also holds worse combinations"
            },
            if f.best.defaults_outside.is_empty() {
                "inside".to_owned()
            } else {
                format!("outside on {}", f.best.defaults_outside.join(", "))
            }
        ));
    }
    if f.perfect.count == 0 {
        lines.push(format!("perfect: no combination agrees on all {n}"));
    } else {
        lines.push(format!(
            "perfect: {} combination{}; ranges {}; {}",
            f.perfect.count,
            if f.perfect.count == 1 { "" } else { "s" },
            ranges_text(&f.perfect),
            if f.perfect.solid {
                "solid"
            } else {
                "NOT solid"
            }
        ));
    }
    if let Some(r) = &f.recommended {
        if !r.params.is_empty() {
            lines.push(format!(
                "recommended ({}): {}, margin {}",
                r.note,
                params_text(&r.params),
                match r.margin {
                    Some(m) => format!(
                        "{m} grid step{} to a worse combination",
                        if m == 1 { "" } else { "s" }
                    ),
                    None => "unbounded (no combination on the grid is worse)".into(),
                }
            ));
        }
    }
    for p in &f.polarity {
        match &p.warning {
            Some(w) => lines.push(format!("{} {w}", b("POLARITY WARNING:"))),
            None => lines.push(format!(
                "polarity {}: ok (flipped best {}/{n} ≤ {}/{n})",
                p.param, p.flipped_best, p.best
            )),
        }
    }
    for c in &f.curves {
        let (lo, hi) = (
            c.values.first().copied().unwrap_or(0.0),
            c.values.last().copied().unwrap_or(0.0),
        );
        let spark = report::sparkline(&c.agree, n as u32);
        lines.push(format!(
            "curve {}: {} {}..{} (agreement {}..{} of {n}, others at defaults)",
            c.param,
            if md { format!("`{spark}`") } else { spark },
            num(&json!(lo)),
            num(&json!(hi)),
            c.agree.iter().min().unwrap_or(&0),
            c.agree.iter().max().unwrap_or(&0)
        ));
    }
    lines
}

fn values_text(m: &serde_json::Map<String, Value>) -> String {
    m.iter()
        .map(|(k, v)| match v {
            Value::Object(o) if o.contains_key("probabilities") => {
                let probs = o["probabilities"].as_object().map(|p| {
                    p.iter()
                        .map(|(l, x)| format!("{l}:{}", num(x)))
                        .collect::<Vec<_>>()
                        .join(",")
                });
                format!("{k}={{{}}}", probs.unwrap_or_default())
            }
            Value::Number(_) => format!("{k}={}", num(v)),
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn kind(d: &report::Disagreement) -> &'static str {
    if d.under {
        "UNDER"
    } else if d.over {
        "over"
    } else {
        "lateral"
    }
}

fn render_table(out: &mut Out, reports: &[Family]) -> Result<(), Failure> {
    for (i, f) in reports.iter().enumerate() {
        if i > 0 {
            out.line("")?;
        }
        out.line(&format!(
            "== {}@{}  {}",
            f.policy.name, f.policy.version, f.policy.digest
        ))?;
        for l in summary_lines(f, false) {
            out.line(&l)?;
        }
        if let Some(c) = &f.defaults.confusion {
            let mut t = Table::new();
            let mut header = vec!["expected \\ decided".to_owned()];
            header.extend(c.labels.iter().cloned());
            t.set_header(header);
            for (label, row) in c.labels.iter().zip(&c.rows) {
                let mut cells = vec![label.clone()];
                cells.extend(row.iter().map(u32::to_string));
                t.add_row(cells);
            }
            out.line("confusion at the defaults (primary outcome):")?;
            out.line(&t.to_string())?;
        }
        if !f.disagreements.is_empty() {
            let mut t = Table::new();
            t.set_header(["fixture", "expected", "decided", "kind", "rule", "values"]);
            for d in &f.disagreements {
                t.add_row([
                    d.id.clone(),
                    d.expected.clone(),
                    d.decided.clone(),
                    kind(d).into(),
                    d.rule.clone(),
                    values_text(&d.values),
                ]);
            }
            out.line("disagreements at the defaults:")?;
            out.line(&t.to_string())?;
        }
    }
    Ok(())
}

fn render_markdown(out: &mut Out, reports: &[Family]) -> Result<(), Failure> {
    for f in reports {
        out.line(&format!(
            "### jev calibrate: `{}@{}`",
            f.policy.name, f.policy.version
        ))?;
        out.line("")?;
        out.line(&format!("digest `{}`", f.policy.digest))?;
        out.line("")?;
        for l in summary_lines(f, true) {
            out.line(&format!("- {}", md_cell(&l)))?;
        }
        out.line("")?;
        if let Some(c) = &f.defaults.confusion {
            out.line(&format!(
                "| expected \\ decided | {} |",
                c.labels.join(" | ")
            ))?;
            out.line(&format!("|---|{}", "---:|".repeat(c.labels.len())))?;
            for (label, row) in c.labels.iter().zip(&c.rows) {
                out.line(&format!(
                    "| {label} | {} |",
                    row.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(" | ")
                ))?;
            }
            out.line("")?;
        }
        if !f.disagreements.is_empty() {
            out.line("| fixture | expected | decided | kind | rule | values |")?;
            out.line("|---|---|---|---|---|---|")?;
            for d in &f.disagreements {
                out.line(&format!(
                    "| {} | {} | {} | {} | {} | {} |",
                    md_cell(&d.id),
                    md_cell(&d.expected),
                    md_cell(&d.decided),
                    kind(d),
                    md_cell(&d.rule),
                    md_cell(&values_text(&d.values))
                ))?;
            }
            out.line("")?;
        }
    }
    Ok(())
}
