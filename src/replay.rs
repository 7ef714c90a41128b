//! Replaying receipts under two policies with the measurements frozen: only the policy changes.
//! A receipt whose digest fails is INVALID and not replayed; one whose input lacks a field the
//! policy requires, or whose measurements come from another question set, is
//! POLICY_REPLAY_INDETERMINATE — never decided with a silent default.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::policy::model::Policy;
use crate::receipt::{self, Receipt};
use crate::record::RecordError;
use crate::verify::rederive;

/// One side of the comparison.
pub enum Side<'a> {
    /// The decision stored in the receipt.
    Recorded,
    Policy(&'a Policy),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Status {
    #[serde(rename = "same")]
    Same,
    #[serde(rename = "stricter")]
    Stricter,
    #[serde(rename = "looser")]
    Looser,
    #[serde(rename = "lateral")]
    Lateral,
    #[serde(rename = "POLICY_REPLAY_INDETERMINATE")]
    Indeterminate,
    #[serde(rename = "INVALID")]
    Invalid,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Same => "same",
            Status::Stricter => "stricter",
            Status::Looser => "looser",
            Status::Lateral => "lateral",
            Status::Indeterminate => "POLICY_REPLAY_INDETERMINATE",
            Status::Invalid => "INVALID",
        }
    }
    pub fn is_change(self) -> bool {
        matches!(self, Status::Stricter | Status::Looser | Status::Lateral)
    }
}

/// One replayed receipt (the `rows[]` shape of `replay --format json`).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: Option<String>,
    pub path: String,
    pub status: Status,
    pub from: Option<Map<String, Value>>,
    pub to: Option<Map<String, Value>>,
    pub changed_fields: Vec<String>,
    pub missing_required_fields: Vec<String>,
    pub error: Option<String>,
    #[serde(skip)]
    pub from_label: String,
    #[serde(skip)]
    pub to_label: String,
}

/// The explanation fields compared after the outcome.
const EXPLANATION: [&str; 4] = [
    "matched_rule",
    "suppressed_rules",
    "reason_codes",
    "obligations",
];

impl Row {
    /// A row that could not be replayed because the receipt itself is bad.
    pub fn invalid(place: &str, error: String) -> Row {
        Row {
            id: None,
            path: place.to_owned(),
            status: Status::Invalid,
            from: None,
            to: None,
            changed_fields: Vec::new(),
            missing_required_fields: Vec::new(),
            error: Some(error),
            from_label: String::new(),
            to_label: String::new(),
        }
    }
}

/// Replays one receipt text.
pub fn replay_text(place: &str, text: &str, from: &Side, to: &Side) -> Row {
    let receipt = match receipt::parse(text) {
        Ok(r) => r,
        Err(e) => return Row::invalid(place, format!("parse: {e}")),
    };
    let mut row = Row::invalid(place, String::new());
    row.error = None;
    row.id = Some(receipt.id.clone());
    if let Err(e) = receipt::check_digest(&receipt) {
        row.error = Some(e.to_string());
        return row;
    }
    row.status = Status::Same;
    let mut missing = Vec::new();
    let mut problems = Vec::new();
    let from_decision = side_decision(&receipt, from, &mut missing, &mut problems);
    let to_decision = side_decision(&receipt, to, &mut missing, &mut problems);
    // Strictness is read from the newer policy's dimensions (the older one's when replaying to
    // the recorded decisions).
    let dims_policy = match (to, from) {
        (Side::Policy(p), _) | (Side::Recorded, Side::Policy(p)) => Some(*p),
        _ => None,
    };
    let dims: Vec<(String, Option<Vec<String>>)> = match dims_policy {
        Some(p) => p
            .dimensions
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    d.ordered.then(|| d.values.clone().unwrap_or_default()),
                )
            })
            .collect(),
        None => Vec::new(),
    };
    row.from_label = from_decision
        .as_ref()
        .map(|d| label(&dims, d))
        .unwrap_or_default();
    row.to_label = to_decision
        .as_ref()
        .map(|d| label(&dims, d))
        .unwrap_or_default();
    let (Some(a), Some(b)) = (from_decision.clone(), to_decision.clone()) else {
        row.status = Status::Indeterminate;
        row.missing_required_fields = missing;
        row.error = (!problems.is_empty()).then(|| problems.join("; "));
        row.from = from_decision;
        row.to = to_decision;
        return row;
    };
    let (status, changed) = classify(&dims, &a, &b);
    row.status = status;
    row.changed_fields = changed;
    row.from = Some(a);
    row.to = Some(b);
    row
}

fn side_decision(
    receipt: &Receipt,
    side: &Side,
    missing: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Option<Map<String, Value>> {
    let policy = match side {
        Side::Recorded => return Some(receipt.decision.clone()),
        Side::Policy(p) => *p,
    };
    if let (Some(want), Some(m)) = (&policy.question_set, &receipt.measurement) {
        if want != &m.question_set {
            problems.push(format!(
                "question set mismatch: measured with {} {}, {} consumes {} {}",
                m.question_set.id,
                m.question_set.digest,
                policy.reference(),
                want.id,
                want.digest
            ));
            return None;
        }
    }
    // Frozen measurements, the policy's own defaults for its params (a param is policy, not
    // measurement); a receipt decided with overrides under the same policy keeps them.
    let params = if receipt.policy.name == policy.name && receipt.policy.version == policy.version {
        crate::verify::receipt_params(policy, receipt).unwrap_or_else(|_| policy.default_params())
    } else {
        policy.default_params()
    };
    match rederive(policy, receipt, &params) {
        Ok(d) => Some(d.to_json(policy)),
        Err(RecordError::MissingRequired(fields)) => {
            for f in fields {
                if !missing.contains(&f) {
                    missing.push(f);
                }
            }
            None
        }
        Err(e @ RecordError::Invalid { .. }) => {
            problems.push(format!("{}: input {e}", policy.reference()));
            None
        }
    }
}

/// `same` when everything is equal. Otherwise the ordered dimensions decide: `stricter` or
/// `looser` when every ordered dimension that moved moved that way, `lateral` when they moved
/// both ways or only unordered values and explanations changed.
fn classify(
    dims: &[(String, Option<Vec<String>>)],
    a: &Map<String, Value>,
    b: &Map<String, Value>,
) -> (Status, Vec<String>) {
    let mut stricter = false;
    let mut looser = false;
    let mut outcome_changed = false;
    let outcome_keys: Vec<&str> = if dims.is_empty() {
        // No policy to name the dimensions: everything that is not explanation.
        a.keys()
            .chain(b.keys())
            .map(String::as_str)
            .filter(|k| !EXPLANATION.contains(k) && *k != "units")
            .collect()
    } else {
        dims.iter().map(|(n, _)| n.as_str()).collect()
    };
    for key in &outcome_keys {
        let (va, vb) = (a.get(*key), b.get(*key));
        if va == vb {
            continue;
        }
        outcome_changed = true;
        let ranks = dims
            .iter()
            .find(|(n, _)| n == key)
            .and_then(|(_, values)| values.as_ref())
            .and_then(|values| {
                let rank = |v: Option<&Value>| {
                    v.and_then(Value::as_str)
                        .and_then(|s| values.iter().position(|x| x == s))
                };
                Some((rank(va)?, rank(vb)?))
            });
        match ranks {
            Some((ra, rb)) if rb > ra => stricter = true,
            Some((ra, rb)) if rb < ra => looser = true,
            _ => {}
        }
    }
    let mut changed = Vec::new();
    if outcome_changed {
        changed.push("outcome".to_owned());
    }
    for key in EXPLANATION.iter().chain(&["units"]) {
        if a.get(*key) != b.get(*key) {
            changed.push((*key).to_owned());
        }
    }
    let status = match (changed.is_empty(), stricter, looser) {
        (true, _, _) => Status::Same,
        (false, true, false) => Status::Stricter,
        (false, false, true) => Status::Looser,
        _ => Status::Lateral,
    };
    (status, changed)
}

/// `PERMIT/NONE`: the outcome dimensions joined by `/`.
fn label(dims: &[(String, Option<Vec<String>>)], d: &Map<String, Value>) -> String {
    let names: Vec<&str> = if dims.is_empty() {
        d.keys()
            .map(String::as_str)
            .filter(|k| !EXPLANATION.contains(k) && *k != "units")
            .collect()
    } else {
        dims.iter().map(|(n, _)| n.as_str()).collect()
    };
    names
        .iter()
        .map(|n| match d.get(*n) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(items)) => format!(
                "[{}]",
                items
                    .iter()
                    .map(|v| v.as_str().unwrap_or("?").to_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Some(Value::Null) => "-".into(),
            _ => "?".into(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Totals over all rows (the `summary` shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub total: usize,
    pub same: usize,
    pub stricter: usize,
    pub looser: usize,
    pub lateral: usize,
    pub indeterminate: usize,
    pub invalid: usize,
}

impl Summary {
    pub fn add(&mut self, status: Status) {
        self.total += 1;
        match status {
            Status::Same => self.same += 1,
            Status::Stricter => self.stricter += 1,
            Status::Looser => self.looser += 1,
            Status::Lateral => self.lateral += 1,
            Status::Indeterminate => self.indeterminate += 1,
            Status::Invalid => self.invalid += 1,
        }
    }
    pub fn changed(&self) -> usize {
        self.stricter + self.looser + self.lateral
    }
}

/// `from → to: count` for changed rows, in order of first appearance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub count: usize,
}

pub fn add_transition(transitions: &mut Vec<Transition>, row: &Row) {
    if !row.status.is_change() {
        return;
    }
    match transitions
        .iter_mut()
        .find(|t| t.from == row.from_label && t.to == row.to_label)
    {
        Some(t) => t.count += 1,
        None => transitions.push(Transition {
            from: row.from_label.clone(),
            to: row.to_label.clone(),
            count: 1,
        }),
    }
}
