//! Labelled fixtures for `jev calibrate`: the native format (one per `*.json` file or one per
//! line of a `*.jsonl` file) and the upstream calibrate script's JSON Lines format, read
//! unchanged and converted here. Errors name the file and line.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::canonical;

/// One labelled case.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub id: String,
    /// `NAME@VERSION` of the policy the fixture calibrates.
    pub policy: String,
    /// `file` or `file:line`, for messages.
    pub place: String,
    /// What the judge sees (measured families); `None` for record-only families.
    pub state: Option<Value>,
    /// Record sections that are not measured (`record`, `context`, `history`).
    pub record: Map<String, Value>,
    /// Units of a units policy: name → trusted description.
    pub units: IndexMap<String, String>,
    /// Labels of per-case choice questions: question id → {label: description}.
    pub options: Map<String, Value>,
    /// The expectation, checked against the policy when the family is prepared.
    pub expected: Value,
    /// Synthetic answers for the `recorded` backend, by question id.
    pub recorded: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct FixtureError {
    pub place: String,
    pub message: String,
}

fn err(place: &str, message: impl Into<String>) -> FixtureError {
    FixtureError {
        place: place.to_owned(),
        message: message.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFixture {
    id: String,
    policy: String,
    #[serde(default)]
    state: Option<Value>,
    #[serde(default)]
    record: Option<Map<String, Value>>,
    #[serde(default)]
    units: Option<IndexMap<String, String>>,
    #[serde(default)]
    options: Option<Map<String, Value>>,
    expected: Option<Value>,
    #[serde(default)]
    recorded: Option<Map<String, Value>>,
    #[serde(default)]
    lang: Option<String>,
    #[serde(default)]
    note: Option<String>,
}

/// Loads fixtures from files and directories (recursively: `*.json` one fixture per file,
/// `*.jsonl` one per line). Ids must be unique across everything loaded.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Fixture>, FixtureError> {
    let mut files = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| err(&p.display().to_string(), e.to_string()))?;
        if meta.is_dir() {
            collect(p, 0, &mut files)?;
        } else {
            files.push(p.clone());
        }
    }
    let mut out: Vec<Fixture> = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let bytes = std::fs::read(&f).map_err(|e| err(&name, e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            err(
                &name,
                format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
            )
        })?;
        if f.extension().is_some_and(|e| e == "jsonl") {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let place = format!("{name}:{}", i + 1);
                out.push(parse_text(&place, line)?);
            }
        } else {
            out.push(parse_text(&name, &text)?);
        }
    }
    for (i, f) in out.iter().enumerate() {
        if let Some(first) = out[..i].iter().find(|g| g.id == f.id) {
            return Err(err(
                &f.place,
                format!("duplicate fixture id {:?} (first at {})", f.id, first.place),
            ));
        }
    }
    Ok(out)
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), FixtureError> {
    let name = dir.display().to_string();
    if depth > 32 {
        return Err(err(
            &name,
            "directories nested deeper than 32 levels (a symlink loop?)",
        ));
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| err(&name, e.to_string()))?
        .map(|e| e.map(|e| e.path()).map_err(|e| err(&name, e.to_string())))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, depth + 1, out)?;
        } else if p.extension().is_some_and(|e| e == "json" || e == "jsonl") {
            out.push(p);
        }
    }
    Ok(())
}

/// Parses one fixture (a `*.json` file or one line of a `*.jsonl` file), native or upstream.
pub fn parse_text(place: &str, text: &str) -> Result<Fixture, FixtureError> {
    let v = canonical::parse_strict(text).map_err(|e| err(place, e.to_string()))?;
    if v.get("kind").is_some() && v.get("policy").is_none() {
        return upstream(place, &v);
    }
    let raw: RawFixture = serde_path_to_error::deserialize(&v).map_err(|e| {
        let path = e.path().to_string();
        err(
            place,
            if path == "." {
                e.inner().to_string()
            } else {
                format!("{path}: {}", e.inner())
            },
        )
    })?;
    let _ = (&raw.lang, &raw.note);
    if raw.id.trim().is_empty() {
        return Err(err(place, "id: must not be empty"));
    }
    let Some(expected) = raw.expected else {
        return Err(err(
            place,
            format!("fixture {:?} has no expectation (`expected`)", raw.id),
        ));
    };
    let record = raw.record.unwrap_or_default();
    for key in record.keys() {
        if !["record", "context", "history"].contains(&key.as_str()) {
            return Err(err(
                place,
                format!("record.{key}: expected record, context or history sections"),
            ));
        }
    }
    Ok(Fixture {
        id: raw.id,
        policy: raw.policy,
        place: place.to_owned(),
        state: raw.state,
        record,
        units: raw.units.unwrap_or_default(),
        options: raw.options.unwrap_or_default(),
        expected,
        recorded: raw.recorded,
    })
}

/// Upstream question ids replace anything but letters, digits and `_` with `_`.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The upstream mock's distribution for a choice given only its label and confidence:
/// the confidence on the chosen label, the rest split evenly, rounding drift put on the chosen.
fn mock_distribution(labels: &[String], chosen: &str, confidence: f64) -> Map<String, Value> {
    let mut out = Map::new();
    if labels.len() == 1 {
        out.insert(labels[0].clone(), json!(1.0));
        return out;
    }
    let rest = (1.0 - confidence) / (labels.len() - 1) as f64;
    let mut sum = 0.0;
    for l in labels {
        let v = round6(if l == chosen { confidence } else { rest });
        sum += v;
        out.insert(l.clone(), json!(v));
    }
    if let Some(v) = out.get(chosen).and_then(Value::as_f64) {
        out.insert(chosen.to_owned(), json!(round6(v + (1.0 - sum))));
    }
    out
}

/// Converts one upstream mock answer into the record syntax.
fn upstream_answer(
    place: &str,
    qid: &str,
    spec: Option<&Value>,
    labels: Option<(&[String], &str)>,
) -> Result<Value, FixtureError> {
    if spec.and_then(|s| s.get("omit")) == Some(&Value::Bool(true)) {
        return Ok(json!("UNAVAILABLE"));
    }
    match labels {
        None => match spec.and_then(|s| s.get("noul")) {
            None => Ok(json!(0.5)),
            Some(p) => Ok(p.clone()),
        },
        Some((labels, default)) => {
            let (choice, confidence, probabilities) = match spec.and_then(|s| s.get("choice")) {
                None => (default.to_owned(), 0.9, None),
                Some(Value::String(c)) => (c.clone(), 0.9, None),
                Some(Value::Object(o)) => (
                    o.get("choice")
                        .and_then(Value::as_str)
                        .unwrap_or(default)
                        .to_owned(),
                    o.get("confidence").and_then(Value::as_f64).unwrap_or(0.9),
                    o.get("probabilities").cloned(),
                ),
                Some(other) => {
                    return Err(err(
                        place,
                        format!(
                            "answers.{qid}.choice: expected a label or an object, found {other}"
                        ),
                    ));
                }
            };
            if !labels.contains(&choice) {
                return Err(err(
                    place,
                    format!(
                        "answers.{qid}: {choice:?} is not one of [{}]",
                        labels.join(", ")
                    ),
                ));
            }
            let probabilities = probabilities
                .unwrap_or_else(|| Value::Object(mock_distribution(labels, &choice, confidence)));
            Ok(
                json!({"type": "choice", "choice": choice, "confidence": confidence, "probabilities": probabilities}),
            )
        }
    }
}

fn upstream(place: &str, v: &Value) -> Result<Fixture, FixtureError> {
    let id = v
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| err(place, "id: expected a string"))?;
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let expect = v.get("expect").ok_or_else(|| {
        err(
            place,
            format!("fixture {id:?} has no expectation (`expect`)"),
        )
    })?;
    let answers = v
        .get("answers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let task = v.get("task").cloned().unwrap_or(Value::Null);
    let mut state = Map::new();
    state.insert("task".into(), task);
    if let Some(step) = v.get("step") {
        state.insert("step".into(), step.clone());
    }
    let status = expect
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| err(place, "expect.status: expected a string"))?;
    let mut recorded = Map::new();
    let mut options = Map::new();
    let mut units = IndexMap::new();
    let (policy, expected) = match kind {
        "assessment" => {
            state.insert(
                "tool".into(),
                v.get("toolId").cloned().unwrap_or(Value::Null),
            );
            state.insert(
                "arguments".into(),
                v.get("arguments").cloned().unwrap_or(Value::Null),
            );
            state.insert(
                "restrictions".into(),
                v.get("restrictions").cloned().unwrap_or(json!([])),
            );
            for q in [
                "matches_task",
                "missing_information",
                "violates_restriction",
            ] {
                recorded.insert(q.into(), upstream_answer(place, q, answers.get(q), None)?);
            }
            ("tool-call-assessment@v1", json!(status))
        }
        "selection" => {
            let candidates = v
                .get("candidates")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let descriptions: Map<String, Value> = v
                .get("categories")
                .and_then(Value::as_array)
                .map(|cs| {
                    cs.iter()
                        .filter_map(|c| {
                            Some((
                                c.get("id")?.as_str()?.to_owned(),
                                c.get("description").cloned().unwrap_or(Value::Null),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            // Categories in first-seen order over the candidates that may be sent at all.
            let mut groups: IndexMap<String, Vec<(String, String)>> = IndexMap::new();
            for c in &candidates {
                if c.get("restricted") == Some(&Value::Bool(true)) {
                    continue;
                }
                let Some(tool) = c.get("id").and_then(Value::as_str) else {
                    continue;
                };
                let description = c
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or(tool)
                    .to_owned();
                let cats: Vec<String> = c
                    .get("categories")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .filter(|v: &Vec<String>| !v.is_empty())
                    .unwrap_or_else(|| vec!["uncategorized".into()]);
                for cat in cats {
                    let members = groups.entry(cat).or_default();
                    if !members.iter().any(|(t, _)| t == tool) {
                        members.push((tool.to_owned(), description.clone()));
                    }
                }
            }
            for (cat, mut members) in groups {
                members.sort();
                let unit = sanitize(&cat);
                let description = descriptions
                    .get(&cat)
                    .and_then(Value::as_str)
                    .unwrap_or(&cat)
                    .to_owned();
                units.insert(unit.clone(), description);
                let labels: Vec<String> = members
                    .iter()
                    .map(|(t, _)| t.clone())
                    .chain(["__none__".to_owned()])
                    .collect();
                let opts: Map<String, Value> = members
                    .into_iter()
                    .map(|(t, d)| (t, Value::String(d)))
                    .collect();
                let rel = format!("rel_{unit}");
                let pick = format!("pick_{unit}");
                recorded.insert(
                    rel.clone(),
                    upstream_answer(place, &rel, answers.get(&rel), None)?,
                );
                recorded.insert(
                    pick.clone(),
                    upstream_answer(
                        place,
                        &pick,
                        answers.get(&pick),
                        Some((&labels, &labels[0])),
                    )?,
                );
                options.insert(pick, Value::Object(opts));
            }
            let mut selected: Vec<String> = expect
                .get("selected")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            selected.sort();
            (
                "tool-selection@v1",
                json!({"status": status, "tool": selected}),
            )
        }
        "skill" => {
            let candidates = v
                .get("candidates")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut opts = Map::new();
            for c in &candidates {
                let Some(name) = c.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let mut d = c
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or(name)
                    .to_owned();
                if let Some(when) = c.get("whenToUse").and_then(Value::as_str) {
                    d = format!("{d} When to use: {when}");
                }
                opts.insert(name.to_owned(), Value::String(d));
            }
            // Upstream lists __none__ first, so its default answer is __none__.
            let labels: Vec<String> = std::iter::once("__none__".to_owned())
                .chain(opts.keys().cloned())
                .collect();
            recorded.insert(
                "needs_skill".into(),
                upstream_answer(place, "needs_skill", answers.get("needs_skill"), None)?,
            );
            recorded.insert(
                "skill".into(),
                upstream_answer(
                    place,
                    "skill",
                    answers.get("skill"),
                    Some((&labels, "__none__")),
                )?,
            );
            options.insert("skill".into(), Value::Object(opts));
            let skill = expect.get("skill").cloned().unwrap_or(Value::Null);
            (
                "skill-routing@v1",
                json!({"status": status, "skill": skill}),
            )
        }
        other => {
            return Err(err(
                place,
                format!("kind: {other:?} is not selection, assessment or skill"),
            ));
        }
    };
    Ok(Fixture {
        id: id.to_owned(),
        policy: policy.to_owned(),
        place: place.to_owned(),
        state: Some(Value::Object(state)),
        record: Map::new(),
        units,
        options,
        expected,
        recorded: Some(recorded),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mock_distribution_puts_rounding_on_the_chosen_label() {
        let labels: Vec<String> = ["a", "b", "c", "__none__"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let d = mock_distribution(&labels, "b", 0.9);
        assert_eq!(
            d["b"],
            json!(0.900001),
            "3 × 0.033333 leaves 1e-6 for the chosen label"
        );
        assert_eq!(d["a"], json!(0.033333));
        let sum: f64 = d.values().map(|v| v.as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-9);
    }

    #[test]
    fn upstream_selection_skips_restricted_tools_and_sanitizes_ids() {
        let line = r#"{"id":"s1","lang":"en","kind":"selection","task":"t","candidates":[{"id":"b","categories":["host-events"]},{"id":"a","categories":["host-events"]},{"id":"x","categories":["danger"],"restricted":true}],"categories":[{"id":"host-events","description":"Host events"}],"answers":{"rel_host_events":{"noul":0.9}},"expect":{"status":"selected","selected":["a"]}}"#;
        let f = parse_text("f:1", line).unwrap();
        assert_eq!(f.policy, "tool-selection@v1");
        assert_eq!(f.units.keys().collect::<Vec<_>>(), ["host_events"]);
        let rec = f.recorded.unwrap();
        assert_eq!(rec["rel_host_events"], json!(0.9));
        assert_eq!(
            rec["pick_host_events"]["choice"], "a",
            "no spec: the first label (sorted) at 0.9"
        );
        assert!(
            !f.options["pick_host_events"]
                .as_object()
                .unwrap()
                .contains_key("x")
        );
        assert_eq!(f.expected, json!({"status": "selected", "tool": ["a"]}));
    }

    #[test]
    fn upstream_omit_is_a_failure_and_missing_noul_is_half() {
        let line = r#"{"id":"a1","kind":"assessment","task":"t","toolId":"x","arguments":{},"restrictions":[],"answers":{"matches_task":{"omit":true}},"expect":{"status":"ask"}}"#;
        let f = parse_text("f:1", line).unwrap();
        let rec = f.recorded.unwrap();
        assert_eq!(rec["matches_task"], json!("UNAVAILABLE"));
        assert_eq!(rec["violates_restriction"], json!(0.5));
    }
}
