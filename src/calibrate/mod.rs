//! Calibration: fixtures with labels, measured once, decided at every point of a threshold
//! grid, and summarised honestly (agreement, the shape of the agreeing region, margins,
//! polarity, disagreements).

pub mod fast;
pub mod grid;
pub mod oracle;
pub mod report;

use rayon::prelude::*;
use serde_json::{Map, Value};

use crate::fixtures::Fixture;
use crate::measure::{Asked, Job, Measured, bounds};
use crate::policy::decide;
use crate::policy::model::{InputType, Policy, Presence};
use crate::questions::QuestionSet;
use crate::record::{Record, RecordError, parse_record};
use crate::value::parse_value;
pub use oracle::Oracle;

/// One fixture ready to decide, or the reason it cannot be.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub place: String,
    pub oracle: Oracle,
    /// `Err(reason)`: the measurement failed and the case is excluded.
    pub record: Result<Record, String>,
}

/// A fixture error found while preparing a family: exit 2, naming the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct PrepareError {
    pub place: String,
    pub message: String,
}

fn perr(place: &str, message: impl Into<String>) -> PrepareError {
    PrepareError {
        place: place.to_owned(),
        message: message.into(),
    }
}

/// The measurement jobs of a family's fixtures (one per fixture; an empty job for record-only
/// fixtures). Checks every fixture against the policy and question set first, including its
/// recorded answers, so a bad fixture stops the run before anything is measured.
pub fn jobs(
    policy: &Policy,
    questions: Option<&QuestionSet>,
    fixtures: &[&Fixture],
) -> Result<Vec<Job>, PrepareError> {
    let measured: Vec<_> = policy
        .inputs
        .iter()
        .filter(|i| i.is_measured() && !matches!(i.presence, Presence::Optional))
        .collect();
    let placeholder = policy.units.as_ref().map(|u| u.name.as_str());
    let mut out = Vec::with_capacity(fixtures.len());
    for f in fixtures {
        Oracle::parse(policy, &f.expected).map_err(|e| perr(&f.place, format!("expected: {e}")))?;
        if measured.is_empty() {
            if f.state.is_some() || f.recorded.is_some() {
                return Err(perr(
                    &f.place,
                    format!(
                        "{} decides records without a judge: give `record`, not `state` or `recorded`",
                        policy.reference()
                    ),
                ));
            }
            out.push(Job {
                id: f.id.clone(),
                state: bounds::Bounded::Send {
                    state: Value::Null,
                    truncated: false,
                },
                questions: Vec::new(),
                recorded: None,
            });
            continue;
        }
        let Some(qs) = questions else {
            return Err(perr(
                &f.place,
                format!(
                    "{} has judge inputs but binds no question set",
                    policy.reference()
                ),
            ));
        };
        let Some(state) = &f.state else {
            return Err(perr(
                &f.place,
                "a measured fixture needs the `state` the judge sees",
            ));
        };
        if policy.units.is_none() && !f.units.is_empty() {
            return Err(perr(
                &f.place,
                format!("units: {} does not decide per unit", policy.reference()),
            ));
        }
        let mut asked = Vec::new();
        for decl in &measured {
            let Some(q) = qs.question(&decl.field) else {
                return Err(perr(
                    &f.place,
                    format!(
                        "question set {} has no question {} (input {})",
                        qs.reference, decl.field, decl.path
                    ),
                ));
            };
            let units: Vec<Option<(&str, &str)>> = if decl.per_unit {
                f.units
                    .iter()
                    .map(|(n, d)| Some((n.as_str(), d.as_str())))
                    .collect()
            } else {
                vec![None]
            };
            for unit in units {
                let id = match (placeholder, unit) {
                    (Some(ph), Some((name, _))) => decl.field.replace(&format!("{{{ph}}}"), name),
                    _ => decl.field.clone(),
                };
                let options = f.options.get(&id).and_then(Value::as_object);
                let definition = q
                    .instantiate(placeholder, unit, options)
                    .map_err(|e| perr(&f.place, e))?;
                let ty = match (&decl.ty, q.per_case) {
                    (InputType::Choice { .. }, true) => InputType::Choice {
                        labels: Some(
                            definition["criteria"]
                                .as_object()
                                .map(|c| c.keys().cloned().collect())
                                .unwrap_or_default(),
                        ),
                    },
                    (ty, _) => ty.clone(),
                };
                asked.push(Asked { id, definition, ty });
            }
        }
        if let Some(rec) = &f.recorded {
            for (qid, answer) in rec {
                let Some(a) = asked.iter().find(|a| &a.id == qid) else {
                    return Err(perr(
                        &f.place,
                        format!("recorded.{qid}: not a question this fixture asks"),
                    ));
                };
                parse_value(&a.ty, answer)
                    .map_err(|e| perr(&f.place, format!("recorded.{qid}: {e}")))?;
            }
        }
        out.push(Job {
            id: f.id.clone(),
            state: bounds::bound(state),
            questions: asked,
            recorded: f.recorded.clone(),
        });
    }
    Ok(out)
}

/// Turns fixtures and their measurements into cases. A record that does not fit the policy is
/// a fixture error; a failed measurement excludes the case.
pub fn cases(
    policy: &Policy,
    fixtures: &[&Fixture],
    jobs: &[Job],
    measured: &[Vec<Measured>],
) -> Result<Vec<Case>, PrepareError> {
    let mut out = Vec::with_capacity(fixtures.len());
    for ((f, job), results) in fixtures.iter().zip(jobs).zip(measured) {
        let oracle = Oracle::parse(policy, &f.expected)
            .map_err(|e| perr(&f.place, format!("expected: {e}")))?;
        let mut answers = Map::new();
        let mut failure = None;
        for (q, m) in job.questions.iter().zip(results) {
            match m {
                Measured::Answer(a) => {
                    answers.insert(q.id.clone(), a.clone());
                }
                Measured::Failed { reason, .. } => {
                    failure.get_or_insert_with(|| reason.clone());
                }
            }
        }
        let record = match failure {
            Some(reason) => Err(reason),
            None => {
                let mut doc = f.record.clone();
                if !job.questions.is_empty() {
                    doc.insert("answers".into(), Value::Object(answers));
                }
                match parse_record(policy, &Value::Object(doc)) {
                    Ok(r) => Ok(r),
                    Err(RecordError::Invalid { path, message }) => {
                        return Err(perr(&f.place, format!("{path}: {message}")));
                    }
                    Err(e) => return Err(perr(&f.place, e.to_string())),
                }
            }
        };
        out.push(Case {
            id: f.id.clone(),
            place: f.place.clone(),
            oracle,
            record,
        });
    }
    Ok(out)
}

/// Agreement counts at one grid point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cell {
    pub agree: u32,
    pub under: u32,
    pub over: u32,
}

/// Decides every usable case with `params` and counts.
pub fn score(policy: &Policy, cases: &[(&Record, &Oracle)], params: &[f64]) -> Cell {
    let mut cell = Cell::default();
    for (record, oracle) in cases {
        let d = decide(policy, record, params);
        let v = oracle.judge(policy, &d);
        cell.agree += u32::from(v.agree);
        cell.under += u32::from(v.under);
        cell.over += u32::from(v.over);
    }
    cell
}

/// The brute-force sweep: every grid point decided directly, in parallel.
pub fn sweep(
    policy: &Policy,
    cases: &[(&Record, &Oracle)],
    grid: &grid::Grid,
    base: &[f64],
) -> Vec<Cell> {
    let size = usize::try_from(grid.size()).unwrap_or(usize::MAX);
    (0..size)
        .into_par_iter()
        .map(|i| score(policy, cases, &grid.params_at(i, base)))
        .collect()
}

/// The usable cases as the sweep takes them.
pub fn usable(cases: &[Case]) -> Vec<(&Record, &Oracle)> {
    cases
        .iter()
        .filter_map(|c| c.record.as_ref().ok().map(|r| (r, &c.oracle)))
        .collect()
}

#[cfg(test)]
mod tests;
