//! Records: the typed state a policy decides on. A record's JSON is checked against the
//! policy's input declarations once, here; evaluation then works on [`TypedValue`]s only.
//!
//! Absent fields are kept apart from explicit states: an absent required field is reported
//! (decide: input error; replay: indeterminate), never defaulted.

use serde_json::{Map, Value};

use crate::policy::model::{InputDecl, Policy, Presence, Section};
use crate::value::{TypedValue, describe, parse_value};

/// Top-level keys a record may carry besides its sections.
pub const METADATA_KEYS: [&str; 2] = ["id", "measurement"];

/// A record checked against one policy.
#[derive(Debug, Clone)]
pub struct Record {
    /// The record's `id`, when it has one.
    pub id: Option<String>,
    /// One frame for an ordinary policy; one per unit for a units policy.
    pub frames: Vec<Frame>,
}

/// The values of every declared input, in declaration order. `None` only for an optional
/// input that is absent.
#[derive(Debug, Clone)]
pub struct Frame {
    pub unit: Option<String>,
    pub values: Vec<Option<TypedValue>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A value is present but wrong. `path` is its JSON path in the record.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// Required inputs the record does not have (paths as the policy names them).
    #[error("missing required field{} {}", if .0.len() == 1 { "" } else { "s" }, .0.join(", "))]
    MissingRequired(Vec<String>),
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> RecordError {
    RecordError::Invalid {
        path: path.into(),
        message: message.into(),
    }
}

/// Splits a record into its sections, refusing unknown top-level keys and non-object sections.
/// A record's sections, in the order they appear.
pub type Sections<'a> = Vec<(Section, &'a Map<String, Value>)>;

pub fn sections(raw: &Value) -> Result<Sections<'_>, RecordError> {
    let obj = raw.as_object().ok_or_else(|| {
        invalid(
            "(record)",
            format!(
                "expected an object with record/answers/context/history, found {}",
                describe(raw)
            ),
        )
    })?;
    let mut out = Vec::new();
    for (key, value) in obj {
        if METADATA_KEYS.contains(&key.as_str()) {
            continue;
        }
        let Some(section) = Section::parse(key) else {
            return Err(invalid(
                key.clone(),
                "unknown top-level section (expected record, answers, context, history, id or measurement)",
            ));
        };
        let map = value.as_object().ok_or_else(|| {
            invalid(
                key.clone(),
                format!("expected an object, found {}", describe(value)),
            )
        })?;
        out.push((section, map));
    }
    Ok(out)
}

/// Checks `raw` against `policy` and returns the typed record.
pub fn parse_record(policy: &Policy, raw: &Value) -> Result<Record, RecordError> {
    let secs = sections(raw)?;
    let id = match raw.get("id") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(invalid(
                "id",
                format!("expected a string, found {}", describe(other)),
            ));
        }
    };
    let lookup = |section: Section, field: &str| -> Option<&Value> {
        secs.iter()
            .find(|(s, _)| *s == section)
            .and_then(|(_, m)| m.get(field))
    };
    let mut missing = Vec::new();
    let units: Vec<Option<String>> = match &policy.units {
        None => vec![None],
        Some(u) => {
            let decl = &policy.inputs[u.discover];
            let placeholder = format!("{{{}}}", u.name);
            let (prefix, suffix) = decl
                .field
                .split_once(&placeholder)
                .unwrap_or((&decl.field, ""));
            secs.iter()
                .filter(|(s, _)| *s == decl.section)
                .flat_map(|(_, m)| m.keys())
                .filter_map(|k| {
                    let name = k.strip_prefix(prefix)?.strip_suffix(suffix)?;
                    (!name.is_empty()).then(|| Some(name.to_owned()))
                })
                .collect::<Vec<_>>()
        }
    };
    // No units found: one frame without a unit, decided by the policy's `units.empty` rule.
    let units = if units.is_empty() { vec![None] } else { units };
    let mut frames = Vec::with_capacity(units.len());
    for unit in units {
        let mut values = Vec::with_capacity(policy.inputs.len());
        for decl in &policy.inputs {
            if decl.per_unit && unit.is_none() {
                // A units policy with no units: its per-unit inputs have nothing to read.
                values.push(None);
                continue;
            }
            // Per-unit fields are named for their unit; the rest are read by their declared
            // name without building a string.
            let owned;
            let field: &str = if decl.per_unit {
                owned = field_name(policy, decl, unit.as_deref());
                &owned
            } else {
                &decl.field
            };
            let path = || format!("{}.{field}", decl.section.name());
            let value = match lookup(decl.section, field) {
                Some(raw) => Some(parse_value(&decl.ty, raw).map_err(|m| invalid(path(), m))?),
                None => match &decl.presence {
                    Presence::Required => {
                        let path = path();
                        if !missing.contains(&path) {
                            missing.push(path);
                        }
                        None
                    }
                    Presence::Default(v) => Some(v.clone()),
                    Presence::Optional => None,
                },
            };
            values.push(value);
        }
        frames.push(Frame { unit, values });
    }
    if !missing.is_empty() {
        return Err(RecordError::MissingRequired(missing));
    }
    Ok(Record { id, frames })
}

/// The record field an input reads, with the unit placeholder filled in.
pub fn field_name(policy: &Policy, decl: &InputDecl, unit: Option<&str>) -> String {
    match (&policy.units, unit) {
        (Some(u), Some(name)) if decl.per_unit => {
            decl.field.replace(&format!("{{{}}}", u.name), name)
        }
        _ => decl.field.clone(),
    }
}
