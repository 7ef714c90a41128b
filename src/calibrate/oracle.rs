//! Expectations: an exact outcome, or a set-valued oracle (`acceptable`, `must_not`,
//! `must_not_commit`, `required_obligations`). Escalation is read on the policy's primary
//! ordered dimension: deciding looser than every acceptable outcome is an under-escalation
//! (the dangerous error), stricter than every acceptable outcome an over-escalation.

use serde_json::Value;

use crate::policy::model::Policy;
use crate::policy::{Decision, OutcomeValue};

#[derive(Debug, Clone, PartialEq)]
pub enum Oracle {
    Exact(Vec<OutcomeValue>),
    Set {
        acceptable: Vec<Vec<OutcomeValue>>,
        must_not: Vec<Vec<OutcomeValue>>,
        /// Values of the primary ordered dimension that must not be decided.
        must_not_commit: Vec<String>,
        required_obligations: Vec<String>,
    },
}

/// How one decision compares with its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub agree: bool,
    pub under: bool,
    pub over: bool,
}

/// The rank of an outcome on the policy's primary ordered dimension.
fn primary_rank(policy: &Policy, outcome: &[OutcomeValue]) -> Option<usize> {
    let p = policy.primary()?;
    match &outcome[p] {
        OutcomeValue::One(s) => policy.dimensions[p].rank(s),
        _ => None,
    }
}

const ORACLE_KEYS: [&str; 4] = [
    "acceptable",
    "must_not",
    "must_not_commit",
    "required_obligations",
];

/// Parses one outcome: a label (`HOLD/REVIEW`, `deny`) or an object keyed by dimension.
pub fn parse_outcome(policy: &Policy, v: &Value) -> Result<Vec<OutcomeValue>, String> {
    let dims = &policy.dimensions;
    let parts: Vec<Value> = match v {
        Value::String(s) => {
            let parts: Vec<&str> = s.split('/').collect();
            if parts.len() != dims.len() {
                return Err(format!(
                    "{s:?} has {} part(s); {} outcomes have {} ({})",
                    parts.len(),
                    policy.reference(),
                    dims.len(),
                    dims.iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
            parts
                .iter()
                .map(|p| match *p {
                    "-" => Value::Null,
                    p if p.starts_with('[') && p.ends_with(']') => Value::Array(
                        p[1..p.len() - 1]
                            .split(',')
                            .filter(|x| !x.is_empty())
                            .map(|x| Value::String(x.to_owned()))
                            .collect(),
                    ),
                    p => Value::String(p.to_owned()),
                })
                .collect()
        }
        Value::Object(map) => {
            if let Some(k) = map.keys().find(|k| !dims.iter().any(|d| &d.name == *k)) {
                return Err(format!(
                    "{k:?} is not an outcome dimension of {}",
                    policy.reference()
                ));
            }
            dims.iter()
                .map(|d| {
                    map.get(&d.name)
                        .cloned()
                        .ok_or_else(|| format!("{} is missing", d.name))
                })
                .collect::<Result<_, _>>()?
        }
        other => {
            return Err(format!(
                "expected an outcome label or object, found {other}"
            ));
        }
    };
    let mut out = Vec::with_capacity(dims.len());
    for (dim, part) in dims.iter().zip(parts) {
        let check = |s: &str| match &dim.values {
            Some(values) if !values.iter().any(|x| x == s) => Err(format!(
                "{s:?} is not a value of {} [{}]",
                dim.name,
                values.join(", ")
            )),
            _ => Ok(()),
        };
        out.push(match part {
            Value::Null => OutcomeValue::Nothing,
            Value::String(s) => {
                check(&s)?;
                OutcomeValue::One(s)
            }
            Value::Array(items) => {
                let mut set = Vec::new();
                for i in items {
                    let s = i
                        .as_str()
                        .ok_or_else(|| format!("{}: expected strings", dim.name))?;
                    check(s)?;
                    set.push(s.to_owned());
                }
                set.sort();
                set.dedup();
                OutcomeValue::Set(set)
            }
            other => return Err(format!("{}: unexpected {other}", dim.name)),
        });
    }
    Ok(out)
}

fn strings(v: Option<&Value>, key: &str) -> Result<Vec<String>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{key}: expected strings"))
            })
            .collect(),
        Some(_) => Err(format!("{key}: expected a list")),
    }
}

impl Oracle {
    pub fn parse(policy: &Policy, v: &Value) -> Result<Oracle, String> {
        let Some(map) = v
            .as_object()
            .filter(|m| m.keys().any(|k| ORACLE_KEYS.contains(&k.as_str())))
        else {
            return parse_outcome(policy, v).map(Oracle::Exact);
        };
        if let Some(k) = map.keys().find(|k| !ORACLE_KEYS.contains(&k.as_str())) {
            return Err(format!(
                "{k:?}: an oracle has only {}",
                ORACLE_KEYS.join(", ")
            ));
        }
        let list = |key: &str| -> Result<Vec<Vec<OutcomeValue>>, String> {
            match map.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| parse_outcome(policy, i).map_err(|e| format!("{key}: {e}")))
                    .collect(),
                Some(_) => Err(format!("{key}: expected a list of outcomes")),
            }
        };
        let acceptable = list("acceptable")?;
        let must_not = list("must_not")?;
        let must_not_commit = strings(map.get("must_not_commit"), "must_not_commit")?;
        if !must_not_commit.is_empty() {
            let primary = policy.primary().map(|p| &policy.dimensions[p]);
            let Some(dim) = primary else {
                return Err("must_not_commit needs an ordered outcome dimension".into());
            };
            if let Some(v) = must_not_commit.iter().find(|v| dim.rank(v).is_none()) {
                return Err(format!(
                    "must_not_commit: {v:?} is not a value of {}",
                    dim.name
                ));
            }
        }
        let required_obligations =
            strings(map.get("required_obligations"), "required_obligations")?;
        if acceptable.is_empty()
            && must_not.is_empty()
            && must_not_commit.is_empty()
            && required_obligations.is_empty()
        {
            return Err("an empty oracle accepts everything; give at least one constraint".into());
        }
        Ok(Oracle::Set {
            acceptable,
            must_not,
            must_not_commit,
            required_obligations,
        })
    }

    /// The expectation as text (`deny`, `any of [ask, hold]; not allow`).
    pub fn label(&self) -> String {
        let join = |o: &[OutcomeValue]| {
            o.iter()
                .map(OutcomeValue::label)
                .collect::<Vec<_>>()
                .join("/")
        };
        match self {
            Oracle::Exact(o) => join(o),
            Oracle::Set {
                acceptable,
                must_not,
                must_not_commit,
                required_obligations,
            } => {
                let outcomes = |os: &[Vec<OutcomeValue>]| {
                    os.iter().map(|o| join(o)).collect::<Vec<_>>().join(", ")
                };
                let mut parts = Vec::new();
                if !acceptable.is_empty() {
                    parts.push(format!("any of [{}]", outcomes(acceptable)));
                }
                if !must_not.is_empty() {
                    parts.push(format!("not [{}]", outcomes(must_not)));
                }
                if !must_not_commit.is_empty() {
                    parts.push(format!("never {}", must_not_commit.join("/")));
                }
                if !required_obligations.is_empty() {
                    parts.push(format!("with {}", required_obligations.join(", ")));
                }
                parts.join("; ")
            }
        }
    }

    /// The rank on the primary dimension the expectation points at: the exact outcome's, or
    /// the least strict acceptable one's (for confusion matrices).
    pub fn expected_rank(&self, policy: &Policy) -> Option<usize> {
        match self {
            Oracle::Exact(o) => primary_rank(policy, o),
            Oracle::Set { acceptable, .. } => acceptable
                .iter()
                .filter_map(|o| primary_rank(policy, o))
                .min(),
        }
    }

    pub fn judge(&self, policy: &Policy, d: &Decision) -> Verdict {
        let primary = policy.primary();
        let rank_of = |o: &[OutcomeValue]| primary_rank(policy, o);
        let decided = rank_of(&d.outcome);
        match self {
            Oracle::Exact(o) => {
                let agree = &d.outcome == o;
                let expected = rank_of(o);
                let (under, over) = match (agree, decided, expected) {
                    (false, Some(a), Some(b)) => (a < b, a > b),
                    _ => (false, false),
                };
                Verdict { agree, under, over }
            }
            Oracle::Set {
                acceptable,
                must_not,
                must_not_commit,
                required_obligations,
            } => {
                let committed_forbidden = primary.is_some_and(|p| match &d.outcome[p] {
                    OutcomeValue::One(s) => must_not_commit.contains(s),
                    _ => false,
                });
                let agree = (acceptable.is_empty() || acceptable.contains(&d.outcome))
                    && !must_not.contains(&d.outcome)
                    && !committed_forbidden
                    && required_obligations
                        .iter()
                        .all(|o| d.obligations.contains(o));
                if agree {
                    return Verdict {
                        agree,
                        under: false,
                        over: false,
                    };
                }
                let ranks: Vec<usize> = acceptable.iter().filter_map(|o| rank_of(o)).collect();
                let (under, over) = match (decided, ranks.iter().min(), ranks.iter().max()) {
                    (Some(a), Some(lo), Some(hi)) => (a < *lo, a > *hi),
                    _ => (committed_forbidden, false),
                };
                Verdict {
                    agree,
                    under: under || (committed_forbidden && !over),
                    over,
                }
            }
        }
    }
}
