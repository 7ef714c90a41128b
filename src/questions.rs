//! Question sets: what the judge is asked, versioned and hashed. A question holds the
//! instructions and criteria only; the state being judged travels separately as data.
//!
//! Questions of a units policy are templates (`rel_{category}`): `{unit}` in the id,
//! instructions and criteria is filled with the unit's name, `{description}` with the trusted
//! description a fixture gives for it. A choice whose labels vary per case (tool ids) takes
//! them from the fixture's `options` and appends the question's fixed `add` labels.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::canonical::{self, JsonError};

/// The format version this build reads (`"jev_questions": 1`).
pub const FORMAT_VERSION: u64 = 1;

/// The bundled question sets, compiled in (a tidy test checks `questions/` matches).
pub const BUNDLED: &[(&str, &str)] = &[
    (
        "tool-call-assessment.v1.json",
        include_str!("../questions/tool-call-assessment.v1.json"),
    ),
    (
        "tool-selection.v1.json",
        include_str!("../questions/tool-selection.v1.json"),
    ),
    (
        "skill-routing.v1.json",
        include_str!("../questions/skill-routing.v1.json"),
    ),
    (
        "model-routing.v1.json",
        include_str!("../questions/model-routing.v1.json"),
    ),
    (
        "proposal-review.v1.json",
        include_str!("../questions/proposal-review.v1.json"),
    ),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    #[error("{0}")]
    Json(#[from] JsonError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    jev_questions: u64,
    id: String,
    version: String,
    description: String,
    questions: IndexMap<String, RawQuestion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuestion {
    #[serde(rename = "type")]
    ty: String,
    instructions: String,
    criteria: Value,
}

/// A loaded question set.
#[derive(Debug, Clone)]
pub struct QuestionSet {
    /// `id@version`, the identifier policies bind (with the digest).
    pub reference: String,
    pub description: String,
    pub digest: String,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone)]
pub struct Question {
    /// The id, possibly a template (`pick_{category}`).
    pub id: String,
    pub kind: QuestionKind,
    pub instructions: String,
    /// noul: `{"true": ..., "false": ...}`; choice: `{label: description}`; score:
    /// `{level: description}` in order. For a per-case choice, the fixed labels to add.
    pub criteria: Map<String, Value>,
    /// A choice whose labels come from the fixture's `options`.
    pub per_case: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionKind {
    Noul,
    Choice,
    Score,
}

impl QuestionKind {
    pub fn name(self) -> &'static str {
        match self {
            QuestionKind::Noul => "noul",
            QuestionKind::Choice => "choice",
            QuestionKind::Score => "score",
        }
    }
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> QuestionError {
    QuestionError::Invalid {
        path: path.into(),
        message: message.into(),
    }
}

/// Parses and checks a question set.
pub fn load(text: &str) -> Result<QuestionSet, QuestionError> {
    let doc = canonical::parse_strict(text)?;
    let digest = canonical::canonical_digest(&doc);
    // Read from the text so the questions keep their file order.
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: RawSet = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| invalid(e.path().to_string(), e.inner().to_string()))?;
    if raw.jev_questions != FORMAT_VERSION {
        return Err(invalid(
            "jev_questions",
            format!("format version {} is not supported", raw.jev_questions),
        ));
    }
    let mut questions = Vec::new();
    for (id, q) in raw.questions {
        let path = format!("questions.{id}");
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_{}".contains(c))
        {
            return Err(invalid(
                path,
                "a question id is letters, digits, _ and an optional {unit} placeholder",
            ));
        }
        let kind = match q.ty.as_str() {
            "noul" => QuestionKind::Noul,
            "choice" => QuestionKind::Choice,
            "score" => QuestionKind::Score,
            other => {
                return Err(invalid(
                    format!("{path}.type"),
                    format!("unknown type {other:?} (expected noul, choice or score)"),
                ));
            }
        };
        if q.instructions.trim().is_empty() {
            return Err(invalid(
                format!("{path}.instructions"),
                "instructions must not be empty",
            ));
        }
        let Value::Object(criteria) = q.criteria else {
            return Err(invalid(format!("{path}.criteria"), "expected an object"));
        };
        let mut per_case = false;
        let criteria = match kind {
            QuestionKind::Noul => {
                let keys: Vec<&str> = criteria.keys().map(String::as_str).collect();
                if keys.len() != 2
                    || !criteria.contains_key("true")
                    || !criteria.contains_key("false")
                {
                    return Err(invalid(
                        format!("{path}.criteria"),
                        "a noul's criteria are exactly \"true\" and \"false\"",
                    ));
                }
                criteria
            }
            QuestionKind::Choice if criteria.contains_key("per_case") => {
                if criteria.get("per_case") != Some(&Value::Bool(true)) {
                    return Err(invalid(
                        format!("{path}.criteria.per_case"),
                        "expected true",
                    ));
                }
                if let Some(k) = criteria.keys().find(|k| *k != "per_case" && *k != "add") {
                    return Err(invalid(
                        format!("{path}.criteria.{k}"),
                        "unknown key (expected per_case, add)",
                    ));
                }
                per_case = true;
                match criteria.get("add") {
                    None => Map::new(),
                    Some(Value::Object(add)) => add.clone(),
                    Some(_) => {
                        return Err(invalid(
                            format!("{path}.criteria.add"),
                            "expected {label: description}",
                        ));
                    }
                }
            }
            QuestionKind::Choice | QuestionKind::Score => {
                if criteria.is_empty() {
                    return Err(invalid(
                        format!("{path}.criteria"),
                        "expected at least one label",
                    ));
                }
                criteria
            }
        };
        for (k, v) in &criteria {
            if !v.is_string() {
                return Err(invalid(
                    format!("{path}.criteria.{k}"),
                    "expected a description string",
                ));
            }
        }
        questions.push(Question {
            id,
            kind,
            instructions: q.instructions,
            criteria,
            per_case,
        });
    }
    Ok(QuestionSet {
        reference: format!("{}@{}", raw.id, raw.version),
        description: raw.description,
        digest,
        questions,
    })
}

impl QuestionSet {
    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }
}

impl Question {
    /// The concrete question sent to a judge: the template filled for `unit`, a per-case
    /// choice given its labels. Returns the System One shape `{type, instructions, criteria}`.
    pub fn instantiate(
        &self,
        placeholder: Option<&str>,
        unit: Option<(&str, &str)>,
        options: Option<&Map<String, Value>>,
    ) -> Result<Value, String> {
        let fill = |s: &str| match (placeholder, unit) {
            (Some(ph), Some((name, description))) => s
                .replace(&format!("{{{ph}}}"), name)
                .replace("{description}", description),
            _ => s.to_owned(),
        };
        let mut criteria = Map::new();
        if self.per_case {
            let Some(options) = options else {
                return Err(format!(
                    "question {} needs per-case options in the fixture",
                    self.id
                ));
            };
            if options.is_empty() {
                return Err(format!("question {}: options are empty", self.id));
            }
            for (label, description) in options {
                criteria.insert(
                    label.clone(),
                    Value::String(fill(description.as_str().unwrap_or_default())),
                );
            }
        }
        for (label, description) in &self.criteria {
            criteria.insert(
                label.clone(),
                Value::String(fill(description.as_str().unwrap_or_default())),
            );
        }
        Ok(
            json!({"type": self.kind.name(), "instructions": fill(&self.instructions), "criteria": criteria}),
        )
    }
}

/// Finds the question set `reference` (`id@version`) with the given digest: in `dir` (default
/// `questions/` when it exists), then among the bundled sets.
pub fn resolve(reference: &str, digest: &str, dir: Option<&Path>) -> Result<QuestionSet, String> {
    let mut candidates: Vec<(String, String)> = Vec::new();
    if let Some(dir) = dir {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut paths: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
            {
                let text =
                    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                candidates.push((p.display().to_string(), text));
            }
        }
    }
    for (name, text) in BUNDLED {
        candidates.push((format!("(bundled) {name}"), (*text).to_owned()));
    }
    let mut wrong_digest = None;
    for (origin, text) in candidates {
        let set = load(&text).map_err(|e| format!("{origin}: {e}"))?;
        if set.reference == reference {
            if set.digest == digest {
                return Ok(set);
            }
            wrong_digest.get_or_insert(format!(
                "{origin}: {reference} has digest {}, the policy binds {digest}",
                set.digest
            ));
        }
    }
    Err(wrong_digest.unwrap_or_else(|| format!("question set {reference} not found")))
}

/// The default question directory: `questions/` when it exists.
pub fn default_dir() -> Option<PathBuf> {
    let p = PathBuf::from("questions");
    p.is_dir().then_some(p)
}
