//! Reading a policy document: strict JSON, then serde into raw shapes (unknown keys refused),
//! then validation into the typed [`Policy`]. Every error names the JSON path.

use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;

use super::model::*;
use crate::canonical::{self, JsonError};
use crate::value::{self, describe};

/// The format version this build reads (`"jev_policy": 1`).
pub const FORMAT_VERSION: u64 = 1;

/// A policy that could not be loaded. `path` is the JSON path inside the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Json(#[from] JsonError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> PolicyError {
    let path = path.into();
    PolicyError::Invalid {
        path: if path.is_empty() {
            "(document)".into()
        } else {
            path
        },
        message: message.into(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    jev_policy: u64,
    name: String,
    version: String,
    description: String,
    #[serde(default)]
    question_set: Option<QuestionSetRef>,
    #[serde(default)]
    units: Option<RawUnits>,
    inputs: IndexMap<String, RawInput>,
    #[serde(default)]
    params: IndexMap<String, RawParam>,
    outcome: Vec<RawDimension>,
    #[serde(default)]
    routes: IndexMap<String, Vec<RawRouteCase>>,
    rules: Vec<RawRule>,
    fallback: Vec<RawRule>,
    #[serde(default)]
    failure: Option<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUnits {
    name: String,
    discover: String,
    empty: RawRule,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    values: Option<Vec<String>>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default)]
    levels: Option<Vec<String>>,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    required: Option<bool>,
    #[serde(default)]
    default: Option<Value>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    default: f64,
    lo: f64,
    hi: f64,
    step: f64,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDimension {
    name: String,
    ordered: bool,
    #[serde(default)]
    values: Option<Vec<String>>,
    #[serde(default)]
    across_units: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouteCase {
    #[serde(default)]
    when: Option<RawCondition>,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    when: Option<RawCondition>,
    outcome: IndexMap<String, Value>,
    #[serde(default)]
    reasons: Vec<String>,
    #[serde(default)]
    obligations: Vec<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    before_failure: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    #[serde(default)]
    all: Option<Vec<RawCondition>>,
    #[serde(default)]
    any: Option<Vec<RawCondition>>,
    #[serde(default)]
    not: Option<Box<RawCondition>>,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    derive: Option<String>,
    #[serde(default)]
    op: Option<String>,
    #[serde(default)]
    value: Option<Value>,
    #[serde(default)]
    values: Option<Vec<String>>,
    #[serde(default)]
    param: Option<String>,
    #[serde(default)]
    other: Option<String>,
    #[serde(default)]
    other_derive: Option<String>,
}

/// Parses and validates a policy document.
pub fn load_policy(text: &str) -> Result<Policy, PolicyError> {
    let document = canonical::parse_strict(text)?;
    let digest = canonical::canonical_digest(&document);
    // The typed shape is read from the text itself so declaration order (of inputs and
    // params: the order of grid axes and reports) is the file's; the strict parse above has
    // already refused duplicate keys and unsafe numbers.
    let mut de = serde_json::Deserializer::from_str(text);
    let raw: RawPolicy = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        invalid(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })?;
    Builder::default().build(raw, document, digest)
}

/// What a comparison's left side is, for type checking.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Bool,
    Int,
    Prob,
    /// A closed set of string values.
    Enum(Vec<String>),
    /// Labels that vary per case.
    OpenLabel,
}

impl Kind {
    fn describe(&self) -> String {
        match self {
            Kind::Bool => "a bool".into(),
            Kind::Int => "an int".into(),
            Kind::Prob => "a probability".into(),
            Kind::Enum(v) => format!("one of [{}]", v.join(", ")),
            Kind::OpenLabel => "a label".into(),
        }
    }
}

#[derive(Default)]
struct Builder {
    inputs: Vec<InputDecl>,
    params: Vec<ParamDecl>,
    dimensions: Vec<Dimension>,
    routes: Vec<Route>,
    unit_placeholder: Option<String>,
}

impl Builder {
    fn build(
        mut self,
        raw: RawPolicy,
        document: Value,
        digest: String,
    ) -> Result<Policy, PolicyError> {
        if raw.jev_policy != FORMAT_VERSION {
            return Err(invalid(
                "jev_policy",
                format!(
                    "format version {} is not supported (expected {FORMAT_VERSION})",
                    raw.jev_policy
                ),
            ));
        }
        for (field, text) in [("name", &raw.name), ("version", &raw.version)] {
            if text.is_empty()
                || text.contains(['@', '/', '\\'])
                || text.chars().any(char::is_whitespace)
            {
                return Err(invalid(
                    field,
                    format!("{text:?} must be non-empty, without '@', '/' or spaces"),
                ));
            }
        }
        if let Some(units) = &raw.units {
            if units.name.is_empty()
                || !units
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(invalid(
                    "units.name",
                    "expected a placeholder name of letters, digits and _",
                ));
            }
            self.unit_placeholder = Some(format!("{{{}}}", units.name));
        }
        for (path, input) in &raw.inputs {
            let decl = self.input(path, input)?;
            self.inputs.push(decl);
        }
        for (name, p) in &raw.params {
            let decl = param(name, p)?;
            self.params.push(decl);
        }
        if raw.outcome.is_empty() {
            return Err(invalid("outcome", "declare at least one outcome dimension"));
        }
        for (i, d) in raw.outcome.iter().enumerate() {
            let dim = self.dimension(i, d, raw.units.is_some())?;
            self.dimensions.push(dim);
        }
        // Routes may refer to inputs only, so they are built before the rules.
        for (name, cases) in &raw.routes {
            let path = format!("routes.{name}");
            if cases.is_empty() {
                return Err(invalid(path, "a route needs at least one case"));
            }
            let mut built = Vec::new();
            for (i, case) in cases.iter().enumerate() {
                let cpath = format!("{path}[{i}]");
                let last = i + 1 == cases.len();
                if last != case.when.is_none() {
                    return Err(invalid(
                        cpath,
                        "every case but the last needs `when`, and the last must have none",
                    ));
                }
                let when = case
                    .when
                    .as_ref()
                    .map(|c| self.condition(&format!("{cpath}.when"), c))
                    .transpose()?;
                built.push((when, case.value.clone()));
            }
            self.routes.push(Route {
                name: name.clone(),
                cases: built,
            });
        }

        let mut seen_ids: Vec<String> = Vec::new();
        let mut rules = Vec::new();
        for (i, r) in raw.rules.iter().enumerate() {
            let path = format!("rules[{i}]");
            if r.when.is_none() {
                return Err(invalid(
                    path,
                    "a rule needs a `when` condition (unconditional outcomes belong in `fallback`)",
                ));
            }
            rules.push(self.rule(&path, r, &mut seen_ids, OutcomeContext::Rule)?);
        }
        if raw.fallback.is_empty() {
            return Err(invalid(
                "fallback",
                "declare at least one fallback rule; the last must have no condition",
            ));
        }
        let mut fallback = Vec::new();
        for (i, r) in raw.fallback.iter().enumerate() {
            let path = format!("fallback[{i}]");
            let last = i + 1 == raw.fallback.len();
            if last && r.when.is_some() {
                return Err(invalid(
                    path,
                    "the last fallback rule must have no condition, so every state is decided",
                ));
            }
            fallback.push(self.rule(&path, r, &mut seen_ids, OutcomeContext::Rule)?);
        }
        let measured = self.inputs.iter().any(InputDecl::is_measured);
        let failure = match &raw.failure {
            Some(f) => {
                if f.when.is_some() {
                    return Err(invalid(
                        "failure.when",
                        "the failure outcome has no condition",
                    ));
                }
                Some(self.rule("failure", f, &mut seen_ids, OutcomeContext::Failure)?)
            }
            None if measured => {
                return Err(invalid(
                    "failure",
                    "a policy with judge measurements (noul, choice, score) must declare its failure outcome",
                ));
            }
            None => None,
        };
        let units = match &raw.units {
            Some(u) => {
                let Some(discover) = self.inputs.iter().position(|i| i.path == u.discover) else {
                    return Err(invalid(
                        "units.discover",
                        format!("{:?} is not a declared input", u.discover),
                    ));
                };
                if !self.inputs[discover].per_unit {
                    return Err(invalid(
                        "units.discover",
                        "the discovering input must contain the unit placeholder",
                    ));
                }
                let empty = self.rule(
                    "units.empty",
                    &u.empty,
                    &mut seen_ids,
                    OutcomeContext::Empty,
                )?;
                Some(Units {
                    name: u.name.clone(),
                    discover,
                    empty,
                })
            }
            None => None,
        };
        if let Some(qs) = &raw.question_set {
            if !is_digest(&qs.digest) {
                return Err(invalid(
                    "question_set.digest",
                    "expected sha256: followed by 64 lowercase hex digits",
                ));
            }
        }
        Ok(Policy {
            name: raw.name,
            version: raw.version,
            description: raw.description,
            digest,
            question_set: raw.question_set,
            units,
            inputs: self.inputs,
            params: self.params,
            dimensions: self.dimensions,
            routes: self.routes,
            rules,
            fallback,
            failure,
            document,
        })
    }

    fn input(&self, path: &str, raw: &RawInput) -> Result<InputDecl, PolicyError> {
        let jpath = format!("inputs.{path}");
        let Some((section, field)) = path.split_once('.') else {
            return Err(invalid(
                jpath,
                "an input path is SECTION.FIELD (record, answers, context, history)",
            ));
        };
        let Some(section) = Section::parse(section) else {
            return Err(invalid(
                jpath,
                format!(
                    "unknown section {section:?} (expected record, answers, context or history)"
                ),
            ));
        };
        if field.is_empty() || field.contains('.') {
            return Err(invalid(
                jpath,
                "the field name must be non-empty and contain no '.'",
            ));
        }
        let per_unit = match &self.unit_placeholder {
            Some(ph) => field.contains(ph.as_str()),
            None => false,
        };
        if field.contains('{') && !per_unit {
            return Err(invalid(
                jpath,
                "a '{...}' placeholder is only allowed with the declared `units` name",
            ));
        }
        let unexpected = |key: &str| {
            invalid(
                format!("{jpath}.{key}"),
                format!("not allowed for type {:?}", raw.ty),
            )
        };
        let non_empty_unique =
            |key: &str, list: &Option<Vec<String>>| -> Result<Vec<String>, PolicyError> {
                let Some(list) = list else {
                    return Err(invalid(
                        format!("{jpath}.{key}"),
                        format!("type {:?} needs `{key}`", raw.ty),
                    ));
                };
                if list.is_empty() {
                    return Err(invalid(
                        format!("{jpath}.{key}"),
                        "expected at least one value",
                    ));
                }
                if let Some(dup) = first_duplicate(list) {
                    return Err(invalid(
                        format!("{jpath}.{key}"),
                        format!("{dup:?} is listed twice"),
                    ));
                }
                Ok(list.clone())
            };
        let ty = match raw.ty.as_str() {
            "bool" => InputType::Bool,
            "int" => {
                if let (Some(lo), Some(hi)) = (raw.min, raw.max) {
                    if lo > hi {
                        return Err(invalid(format!("{jpath}.min"), "min is above max"));
                    }
                }
                InputType::Int {
                    min: raw.min,
                    max: raw.max,
                }
            }
            "enum" => InputType::Enum {
                values: non_empty_unique("values", &raw.values)?,
            },
            "noul" => InputType::Noul,
            "choice" => InputType::Choice {
                labels: match &raw.labels {
                    None => None,
                    some => Some(non_empty_unique("labels", some)?),
                },
            },
            "score" => InputType::Score {
                levels: non_empty_unique("levels", &raw.levels)?,
            },
            other => {
                return Err(invalid(
                    format!("{jpath}.type"),
                    format!(
                        "unknown type {other:?} (expected bool, int, enum, noul, choice or score)"
                    ),
                ));
            }
        };
        if raw.values.is_some() && !matches!(ty, InputType::Enum { .. }) {
            return Err(unexpected("values"));
        }
        if raw.labels.is_some() && !matches!(ty, InputType::Choice { .. }) {
            return Err(unexpected("labels"));
        }
        if raw.levels.is_some() && !matches!(ty, InputType::Score { .. }) {
            return Err(unexpected("levels"));
        }
        if (raw.min.is_some() || raw.max.is_some()) && !matches!(ty, InputType::Int { .. }) {
            return Err(unexpected(if raw.min.is_some() { "min" } else { "max" }));
        }
        let presence = match (raw.required, &raw.default) {
            (Some(true), Some(_)) => {
                return Err(invalid(
                    format!("{jpath}.default"),
                    "a required input has no default",
                ));
            }
            (Some(true), None) => Presence::Required,
            (_, Some(d)) => {
                let v = value::parse_value(&ty, d)
                    .map_err(|e| invalid(format!("{jpath}.default"), e))?;
                if matches!(v, crate::value::TypedValue::Failed(_)) {
                    return Err(invalid(
                        format!("{jpath}.default"),
                        "a default cannot be a failed measurement",
                    ));
                }
                Presence::Default(v)
            }
            (Some(false), None) => Presence::Optional,
            (None, None) => {
                return Err(invalid(
                    jpath,
                    "declare `required: true`, a `default`, or `required: false` (optional)",
                ));
            }
        };
        Ok(InputDecl {
            path: path.to_owned(),
            section,
            field: field.to_owned(),
            ty,
            presence,
            per_unit,
            description: raw.description.clone().unwrap_or_default(),
        })
    }

    fn dimension(
        &self,
        i: usize,
        d: &RawDimension,
        has_units: bool,
    ) -> Result<Dimension, PolicyError> {
        let path = format!("outcome[{i}]");
        if self.dimensions.iter().any(|x| x.name == d.name) {
            return Err(invalid(
                format!("{path}.name"),
                format!("dimension {:?} is declared twice", d.name),
            ));
        }
        if matches!(
            d.name.as_str(),
            "matched_rule"
                | "suppressed_rules"
                | "reason_codes"
                | "obligations"
                | "policy"
                | "units"
                | "id"
        ) || d.name.is_empty()
        {
            return Err(invalid(
                format!("{path}.name"),
                format!("{:?} is reserved in decision output", d.name),
            ));
        }
        if let Some(values) = &d.values {
            if values.is_empty() {
                return Err(invalid(
                    format!("{path}.values"),
                    "expected at least one value",
                ));
            }
            if let Some(dup) = first_duplicate(values) {
                return Err(invalid(
                    format!("{path}.values"),
                    format!("{dup:?} is listed twice"),
                ));
            }
        } else if d.ordered {
            return Err(invalid(
                format!("{path}.values"),
                "an ordered dimension needs its values, least strict first",
            ));
        }
        let across_units = match (has_units, d.across_units.as_deref()) {
            (false, None) => Aggregate::None,
            (false, Some(_)) => {
                return Err(invalid(
                    format!("{path}.across_units"),
                    "only a policy with `units` combines units",
                ));
            }
            (true, Some("max")) if d.ordered => Aggregate::Max,
            (true, Some("min")) if d.ordered => Aggregate::Min,
            (true, Some("set")) if !d.ordered => Aggregate::Set,
            (true, _) => {
                return Err(invalid(
                    format!("{path}.across_units"),
                    "expected \"max\" or \"min\" for an ordered dimension, \"set\" for an unordered one",
                ));
            }
        };
        Ok(Dimension {
            name: d.name.clone(),
            ordered: d.ordered,
            values: d.values.clone(),
            across_units,
        })
    }

    fn rule(
        &self,
        path: &str,
        r: &RawRule,
        seen_ids: &mut Vec<String>,
        ctx: OutcomeContext,
    ) -> Result<Rule, PolicyError> {
        if r.id.is_empty() {
            return Err(invalid(format!("{path}.id"), "a rule id must be non-empty"));
        }
        if seen_ids.contains(&r.id) {
            return Err(invalid(
                format!("{path}.id"),
                format!("rule id {:?} is used twice", r.id),
            ));
        }
        seen_ids.push(r.id.clone());
        let when = r
            .when
            .as_ref()
            .map(|c| self.condition(&format!("{path}.when"), c))
            .transpose()?;
        let mut outcome = Vec::new();
        for key in r.outcome.keys() {
            if !self.dimensions.iter().any(|d| &d.name == key) {
                return Err(invalid(
                    format!("{path}.outcome.{key}"),
                    "not a declared outcome dimension",
                ));
            }
        }
        for dim in &self.dimensions {
            let opath = format!("{path}.outcome.{}", dim.name);
            let Some(v) = r.outcome.get(&dim.name) else {
                return Err(invalid(opath, "every outcome dimension needs a value"));
            };
            outcome.push(self.outcome_value(&opath, dim, v, ctx)?);
        }
        for (key, list) in [("reasons", &r.reasons), ("obligations", &r.obligations)] {
            if let Some(dup) = first_duplicate(list) {
                return Err(invalid(
                    format!("{path}.{key}"),
                    format!("{dup:?} is listed twice"),
                ));
            }
            if list.iter().any(String::is_empty) {
                return Err(invalid(format!("{path}.{key}"), "codes must be non-empty"));
            }
        }
        let _ = &r.description;
        if r.before_failure {
            let reads_measurement = when.as_ref().is_some_and(|c| {
                let mut inputs = Vec::new();
                super::transform::inputs_in(c, &mut inputs);
                inputs.iter().any(|i| self.inputs[*i].is_measured())
            });
            if ctx != OutcomeContext::Rule || when.is_none() || reads_measurement {
                return Err(invalid(
                    format!("{path}.before_failure"),
                    "only a rule whose condition reads no judge measurement may be decided before the failure outcome",
                ));
            }
        }
        Ok(Rule {
            id: r.id.clone(),
            priority: r.priority,
            when,
            outcome,
            reasons: r.reasons.clone(),
            obligations: r.obligations.clone(),
            before_failure: r.before_failure,
        })
    }

    fn outcome_value(
        &self,
        path: &str,
        dim: &Dimension,
        v: &Value,
        ctx: OutcomeContext,
    ) -> Result<OutcomeSpec, PolicyError> {
        let check_literal = |value: &str, path: &str| -> Result<(), PolicyError> {
            match &dim.values {
                Some(values) if !values.iter().any(|x| x == value) => Err(invalid(
                    path,
                    format!(
                        "{value:?} is not a value of dimension {:?} [{}]",
                        dim.name,
                        values.join(", ")
                    ),
                )),
                _ => Ok(()),
            }
        };
        match v {
            Value::String(s) => {
                check_literal(s, path)?;
                Ok(OutcomeSpec::Literal(s.clone()))
            }
            Value::Null if !dim.ordered => Ok(OutcomeSpec::Nothing),
            Value::Object(obj) if obj.contains_key("route") => {
                if obj.len() != 1 {
                    return Err(invalid(
                        path,
                        "a route outcome is {\"route\": NAME} and nothing else",
                    ));
                }
                let name = obj["route"].as_str().unwrap_or_default();
                let Some(idx) = self.routes.iter().position(|r| r.name == name) else {
                    return Err(invalid(
                        format!("{path}.route"),
                        format!("{name:?} is not a declared route"),
                    ));
                };
                for (i, (_, value)) in self.routes[idx].cases.iter().enumerate() {
                    check_literal(value, &format!("routes.{name}[{i}].value"))?;
                }
                Ok(OutcomeSpec::Route(idx))
            }
            Value::Object(obj) if obj.contains_key("input") => {
                if ctx != OutcomeContext::Rule {
                    return Err(invalid(
                        path,
                        "this outcome cannot take its value from an input",
                    ));
                }
                if dim.ordered {
                    return Err(invalid(
                        path,
                        "an ordered dimension takes literal or route values only",
                    ));
                }
                if let Some(k) = obj.keys().find(|k| *k != "input" && *k != "derive") {
                    return Err(invalid(
                        format!("{path}.{k}"),
                        "unknown key (expected input, derive)",
                    ));
                }
                let ipath = obj["input"].as_str().unwrap_or_default();
                let derive = match obj.get("derive") {
                    None => Derive::Value,
                    Some(d) => d.as_str().and_then(Derive::parse).ok_or_else(|| {
                        invalid(
                            format!("{path}.derive"),
                            "expected argmax, p_max, confidence or answer",
                        )
                    })?,
                };
                let input = self.input_ref(&format!("{path}.input"), ipath)?;
                let kind = self.kind(&format!("{path}.derive"), input, derive)?;
                match (kind, &dim.values) {
                    (Kind::Enum(vals), Some(dvals)) => {
                        if let Some(v) = vals.iter().find(|v| !dvals.contains(v)) {
                            return Err(invalid(
                                path,
                                format!(
                                    "{v:?} from {ipath} is not a value of dimension {:?}",
                                    dim.name
                                ),
                            ));
                        }
                    }
                    (Kind::Enum(_), None) => {}
                    (Kind::OpenLabel, None) => {}
                    (Kind::OpenLabel, Some(_)) => {
                        return Err(invalid(
                            path,
                            format!(
                                "{ipath} has open labels; dimension {:?} must be open too",
                                dim.name
                            ),
                        ));
                    }
                    (other, _) => {
                        return Err(invalid(
                            path,
                            format!("{ipath} gives {}, not a dimension value", other.describe()),
                        ));
                    }
                }
                Ok(OutcomeSpec::FromInput { input, derive })
            }
            other => Err(invalid(
                path,
                format!(
                    "expected a value of {:?}, {{\"route\": NAME}} or {{\"input\": PATH, \"derive\": ...}}, found {}",
                    dim.name,
                    describe(other)
                ),
            )),
        }
    }

    fn input_ref(&self, path: &str, input: &str) -> Result<usize, PolicyError> {
        let Some(idx) = self.inputs.iter().position(|i| i.path == input) else {
            return Err(invalid(path, format!("{input:?} is not a declared input")));
        };
        if matches!(self.inputs[idx].presence, Presence::Optional) {
            return Err(invalid(
                path,
                format!("{input:?} is optional without a default; a decision may not depend on it"),
            ));
        }
        Ok(idx)
    }

    fn kind(&self, path: &str, input: usize, derive: Derive) -> Result<Kind, PolicyError> {
        let ty = &self.inputs[input].ty;
        let k = match (ty, derive) {
            (InputType::Bool, Derive::Value) => Kind::Bool,
            (InputType::Int { .. }, Derive::Value) => Kind::Int,
            (InputType::Enum { values }, Derive::Value) => Kind::Enum(values.clone()),
            (InputType::Noul, Derive::Value | Derive::Confidence) => Kind::Prob,
            (InputType::Noul, Derive::Answer) => Kind::Enum(vec!["no".into(), "yes".into()]),
            (InputType::Choice { labels }, Derive::Argmax) => match labels {
                Some(l) => Kind::Enum(l.clone()),
                None => Kind::OpenLabel,
            },
            (InputType::Score { levels }, Derive::Argmax) => Kind::Enum(levels.clone()),
            (
                InputType::Choice { .. } | InputType::Score { .. },
                Derive::PMax | Derive::Confidence,
            ) => Kind::Prob,
            (ty, d) => {
                return Err(invalid(
                    path,
                    format!(
                        "derive {:?} does not apply to a {} input",
                        d.name(),
                        ty.name()
                    ),
                ));
            }
        };
        Ok(k)
    }

    fn condition(&self, path: &str, c: &RawCondition) -> Result<Condition, PolicyError> {
        let forms = [
            c.all.is_some(),
            c.any.is_some(),
            c.not.is_some(),
            c.input.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if forms != 1 {
            return Err(invalid(
                path,
                "a condition is exactly one of {\"all\": [...]}, {\"any\": [...]}, {\"not\": {...}} or a comparison {\"input\": ..., \"op\": ..., ...}",
            ));
        }
        let comparison_keys = c.derive.is_some()
            || c.op.is_some()
            || c.value.is_some()
            || c.values.is_some()
            || c.param.is_some()
            || c.other.is_some()
            || c.other_derive.is_some();
        if c.input.is_none() && comparison_keys {
            return Err(invalid(
                path,
                "comparison keys (op, value, ...) belong with `input`",
            ));
        }
        if let Some(list) = c.all.as_ref().or(c.any.as_ref()) {
            let key = if c.all.is_some() { "all" } else { "any" };
            if list.is_empty() {
                return Err(invalid(
                    format!("{path}.{key}"),
                    "expected at least one condition",
                ));
            }
            let mut out = Vec::new();
            for (i, sub) in list.iter().enumerate() {
                out.push(self.condition(&format!("{path}.{key}[{i}]"), sub)?);
            }
            return Ok(if c.all.is_some() {
                Condition::All(out)
            } else {
                Condition::Any(out)
            });
        }
        if let Some(sub) = &c.not {
            return Ok(Condition::Not(Box::new(
                self.condition(&format!("{path}.not"), sub)?,
            )));
        }
        let input_path = c.input.as_deref().unwrap_or_default();
        let input = self.input_ref(&format!("{path}.input"), input_path)?;
        let derive = match &c.derive {
            None => Derive::Value,
            Some(d) => Derive::parse(d).ok_or_else(|| {
                invalid(
                    format!("{path}.derive"),
                    "expected argmax, p_max, confidence or answer",
                )
            })?,
        };
        let kind = self.kind(&format!("{path}.derive"), input, derive)?;
        let Some(op_text) = &c.op else {
            return Err(invalid(
                format!("{path}.op"),
                "a comparison needs `op` (== != < <= > >= in not_in)",
            ));
        };
        let op = Op::parse(op_text).ok_or_else(|| {
            invalid(
                format!("{path}.op"),
                format!("unknown operator {op_text:?} (expected == != < <= > >= in not_in)"),
            )
        })?;
        let rights = [
            c.value.is_some(),
            c.values.is_some(),
            c.param.is_some(),
            c.other.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if rights != 1 {
            return Err(invalid(
                path,
                "a comparison has exactly one of value, values, param or other",
            ));
        }
        if c.other_derive.is_some() && c.other.is_none() {
            return Err(invalid(format!("{path}.other_derive"), "only with `other`"));
        }
        let mismatch = |what: &str| {
            invalid(
                path,
                format!(
                    "{input_path} is {}; it cannot be compared with {what}",
                    kind.describe()
                ),
            )
        };
        let numeric = matches!(kind, Kind::Int | Kind::Prob);
        let ordering = matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge);
        if ordering && !numeric {
            return Err(invalid(
                format!("{path}.op"),
                format!(
                    "{op_text} needs a numeric input; {input_path} is {}",
                    kind.describe()
                ),
            ));
        }
        if matches!(op, Op::In | Op::NotIn) != c.values.is_some() {
            return Err(invalid(
                format!("{path}.op"),
                "`in` and `not_in` go with `values`, and `values` only with them",
            ));
        }
        let right = if let Some(values) = &c.values {
            match &kind {
                Kind::Enum(allowed) => {
                    if let Some(v) = values.iter().find(|v| !allowed.contains(v)) {
                        return Err(invalid(
                            format!("{path}.values"),
                            format!("{v:?} is not one of [{}]", allowed.join(", ")),
                        ));
                    }
                }
                Kind::OpenLabel => {}
                _ => return Err(mismatch("a list of labels")),
            }
            if values.is_empty() {
                return Err(invalid(
                    format!("{path}.values"),
                    "expected at least one value",
                ));
            }
            Operand::Set(values.clone())
        } else if let Some(v) = &c.value {
            match (&kind, v) {
                (Kind::Bool, Value::Bool(b)) => Operand::Bool(*b),
                (Kind::Int, Value::Number(n)) if n.as_i64().is_some() => {
                    Operand::Int(n.as_i64().unwrap_or_default())
                }
                (Kind::Prob, Value::Number(n)) => {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    if !(0.0..=1.0).contains(&f) {
                        return Err(invalid(
                            format!("{path}.value"),
                            format!("probability {f} is outside [0, 1]"),
                        ));
                    }
                    Operand::Number(f)
                }
                (Kind::Enum(allowed), Value::String(s)) => {
                    if !allowed.contains(s) {
                        return Err(invalid(
                            format!("{path}.value"),
                            format!("{s:?} is not one of [{}]", allowed.join(", ")),
                        ));
                    }
                    Operand::Str(s.clone())
                }
                (Kind::OpenLabel, Value::String(s)) => Operand::Str(s.clone()),
                (_, other) => return Err(mismatch(&describe(other))),
            }
        } else if let Some(p) = &c.param {
            if !numeric {
                return Err(mismatch("a numeric param"));
            }
            let Some(idx) = self.params.iter().position(|x| &x.name == p) else {
                return Err(invalid(
                    format!("{path}.param"),
                    format!("{p:?} is not a declared param"),
                ));
            };
            Operand::Param(idx)
        } else {
            let other_path = c.other.as_deref().unwrap_or_default();
            let other = self.input_ref(&format!("{path}.other"), other_path)?;
            let other_derive = match &c.other_derive {
                None => Derive::Value,
                Some(d) => Derive::parse(d).ok_or_else(|| {
                    invalid(
                        format!("{path}.other_derive"),
                        "expected argmax, p_max, confidence or answer",
                    )
                })?,
            };
            let other_kind = self.kind(&format!("{path}.other_derive"), other, other_derive)?;
            let compatible = match (&kind, &other_kind) {
                (Kind::Enum(a), Kind::Enum(b)) => a == b,
                (a, b) => a == b && *a != Kind::OpenLabel,
            };
            if !compatible {
                return Err(mismatch(&format!(
                    "{other_path} ({})",
                    other_kind.describe()
                )));
            }
            Operand::Input {
                input: other,
                derive: other_derive,
            }
        };
        Ok(Condition::Compare(Comparison {
            input,
            derive,
            op,
            right,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutcomeContext {
    Rule,
    Failure,
    Empty,
}

fn param(name: &str, p: &RawParam) -> Result<ParamDecl, PolicyError> {
    let path = format!("params.{name}");
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid(path, "a param name is letters, digits and _"));
    }
    if p.step <= 0.0 {
        return Err(invalid(format!("{path}.step"), "step must be positive"));
    }
    if p.lo > p.hi {
        return Err(invalid(
            format!("{path}.lo"),
            format!("lo {} is above hi {}", p.lo, p.hi),
        ));
    }
    if p.default < p.lo || p.default > p.hi {
        return Err(invalid(
            format!("{path}.default"),
            format!(
                "default {} is outside its range [{}, {}]",
                p.default, p.lo, p.hi
            ),
        ));
    }
    Ok(ParamDecl {
        name: name.to_owned(),
        description: p.description.clone().unwrap_or_default(),
        default: p.default,
        lo: p.lo,
        hi: p.hi,
        step: p.step,
    })
}

fn first_duplicate(list: &[String]) -> Option<&String> {
    list.iter()
        .enumerate()
        .find(|(i, v)| list[..*i].contains(v))
        .map(|(_, v)| v)
}

fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
