//! Typed input values: what a record's JSON becomes once checked against a policy's input
//! declarations. A [`Probability`] is never NaN or outside [0, 1]; a [`Distribution`] always
//! sums to 1 ± 1e-3 over its declared labels.

use serde_json::{Map, Value};

use crate::policy::model::InputType;

/// Tolerance on the sum of a distribution's probabilities.
pub const SUM_TOLERANCE: f64 = 1e-3;

/// A probability in [0, 1], never NaN.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Probability(f64);

impl Probability {
    pub fn new(p: f64) -> Option<Probability> {
        (0.0..=1.0).contains(&p).then_some(Probability(p))
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Why a judge measurement has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasurementFailure {
    /// The judge or the sensor failed.
    Unavailable,
    /// The state was too large to send whole, so it was not sent.
    IncompleteInput,
}

impl MeasurementFailure {
    pub fn code(self) -> &'static str {
        match self {
            MeasurementFailure::Unavailable => "UNAVAILABLE",
            MeasurementFailure::IncompleteInput => "INCOMPLETE_INPUT",
        }
    }
    pub fn parse(s: &str) -> Option<MeasurementFailure> {
        match s {
            "UNAVAILABLE" => Some(MeasurementFailure::Unavailable),
            "INCOMPLETE_INPUT" => Some(MeasurementFailure::IncompleteInput),
            _ => None,
        }
    }
}

/// A distribution over labels (a choice answer) or ordered levels (a score answer).
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    pub labels: Vec<String>,
    pub probs: Vec<f64>,
    /// The judge's own confidence, when it reported one.
    pub reported_confidence: Option<Probability>,
}

impl Distribution {
    /// Index of the most probable label; ties go to the first in label order.
    pub fn argmax(&self) -> usize {
        let mut best = 0;
        for (i, p) in self.probs.iter().enumerate() {
            if *p > self.probs[best] {
                best = i;
            }
        }
        best
    }
    pub fn argmax_label(&self) -> &str {
        &self.labels[self.argmax()]
    }
    pub fn p_max(&self) -> f64 {
        self.probs[self.argmax()]
    }
    /// Reported confidence when present, else `(max_p − 1/n)/(1 − 1/n)` (1 for a single label).
    pub fn confidence(&self) -> f64 {
        if let Some(c) = self.reported_confidence {
            return c.get();
        }
        let n = self.probs.len() as f64;
        if n <= 1.0 {
            return 1.0;
        }
        let uniform = 1.0 / n;
        ((self.p_max() - uniform) / (1.0 - uniform)).clamp(0.0, 1.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypedValue {
    Bool(bool),
    Int(i64),
    Enum(String),
    Prob(Probability),
    Choice(Distribution),
    Score(Distribution),
    Failed(MeasurementFailure),
}

impl TypedValue {
    /// Back to the JSON form a record would carry (used to show defaults and the values that
    /// drove a decision).
    pub fn to_json(&self) -> Value {
        match self {
            TypedValue::Bool(b) => Value::Bool(*b),
            TypedValue::Int(i) => Value::from(*i),
            TypedValue::Enum(s) => Value::String(s.clone()),
            TypedValue::Prob(p) => Value::from(p.get()),
            TypedValue::Choice(d) | TypedValue::Score(d) => {
                let mut probs = Map::new();
                for (l, p) in d.labels.iter().zip(&d.probs) {
                    probs.insert(l.clone(), Value::from(*p));
                }
                let mut obj = Map::new();
                obj.insert("probabilities".into(), Value::Object(probs));
                if let Some(c) = d.reported_confidence {
                    obj.insert("confidence".into(), Value::from(c.get()));
                }
                Value::Object(obj)
            }
            TypedValue::Failed(f) => Value::String(f.code().into()),
        }
    }
}

/// Parses `raw` as a value of type `ty`. The error says what was expected; the caller adds
/// the file, line and path.
pub fn parse_value(ty: &InputType, raw: &Value) -> Result<TypedValue, String> {
    match ty {
        InputType::Bool => raw
            .as_bool()
            .map(TypedValue::Bool)
            .ok_or_else(|| format!("expected true or false, found {}", describe(raw))),
        InputType::Int { min, max } => {
            let i = raw
                .as_i64()
                .ok_or_else(|| format!("expected an integer, found {}", describe(raw)))?;
            if let Some(min) = min {
                if i < *min {
                    return Err(format!("{i} is below the minimum {min}"));
                }
            }
            if let Some(max) = max {
                if i > *max {
                    return Err(format!("{i} is above the maximum {max}"));
                }
            }
            Ok(TypedValue::Int(i))
        }
        InputType::Enum { values } => {
            let s = raw.as_str().ok_or_else(|| {
                format!("expected one of {}, found {}", list(values), describe(raw))
            })?;
            if values.iter().any(|v| v == s) {
                Ok(TypedValue::Enum(s.to_owned()))
            } else {
                Err(format!("{} is not one of {}", describe(raw), list(values)))
            }
        }
        InputType::Noul => {
            if let Some(f) = failure(raw) {
                return f;
            }
            let p = match raw {
                Value::Object(obj) => {
                    check_keys(obj, &["type", "noul", "confidence"])?;
                    check_type_tag(obj, "noul")?;
                    obj.get("noul")
                        .ok_or("a noul answer needs a \"noul\" probability")?
                }
                other => other,
            };
            probability(p).map(TypedValue::Prob)
        }
        InputType::Choice { labels } => {
            if let Some(f) = failure(raw) {
                return f;
            }
            distribution(raw, "choice", labels.as_deref()).map(TypedValue::Choice)
        }
        InputType::Score { levels } => {
            if let Some(f) = failure(raw) {
                return f;
            }
            distribution(raw, "score", Some(levels)).map(TypedValue::Score)
        }
    }
}

fn failure(raw: &Value) -> Option<Result<TypedValue, String>> {
    let code = match raw {
        Value::String(s) => s.as_str(),
        Value::Object(obj) => obj.get("failure")?.as_str()?,
        _ => return None,
    };
    Some(
        MeasurementFailure::parse(code)
            .map(TypedValue::Failed)
            .ok_or_else(|| {
                format!(
                    "{} is not a measurement failure (UNAVAILABLE or INCOMPLETE_INPUT)",
                    describe(&Value::String(code.to_owned()))
                )
            }),
    )
}

fn probability(raw: &Value) -> Result<Probability, String> {
    let p = raw
        .as_f64()
        .ok_or_else(|| format!("expected a probability, found {}", describe(raw)))?;
    Probability::new(p).ok_or_else(|| format!("probability {p} is outside [0, 1]"))
}

fn check_keys(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown key {k:?} (expected {})",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

fn check_type_tag(obj: &Map<String, Value>, tag: &str) -> Result<(), String> {
    match obj.get("type") {
        None => Ok(()),
        Some(Value::String(t)) if t == tag => Ok(()),
        Some(other) => Err(format!("expected type {tag:?}, found {}", describe(other))),
    }
}

fn distribution(raw: &Value, tag: &str, labels: Option<&[String]>) -> Result<Distribution, String> {
    let obj = raw
        .as_object()
        .ok_or_else(|| format!("expected a {tag} answer object, found {}", describe(raw)))?;
    check_keys(obj, &["type", tag, "confidence", "probabilities"])?;
    check_type_tag(obj, tag)?;
    let probs = obj
        .get("probabilities")
        .and_then(Value::as_object)
        .ok_or_else(|| format!("a {tag} answer needs a \"probabilities\" object"))?;
    let order: Vec<String> = match labels {
        Some(labels) => {
            if let Some(k) = probs.keys().find(|k| !labels.contains(k)) {
                return Err(format!(
                    "probabilities: {k:?} is not one of {}",
                    list(labels)
                ));
            }
            if let Some(l) = labels.iter().find(|l| !probs.contains_key(*l)) {
                return Err(format!("probabilities: label {l:?} is missing"));
            }
            labels.to_vec()
        }
        None => {
            if probs.is_empty() {
                return Err("probabilities: expected at least one label".into());
            }
            probs.keys().cloned().collect()
        }
    };
    let mut ps = Vec::with_capacity(order.len());
    for l in &order {
        let p = probability(&probs[l]).map_err(|e| format!("probabilities.{l}: {e}"))?;
        ps.push(p.get());
    }
    let sum: f64 = ps.iter().sum();
    if (sum - 1.0).abs() > SUM_TOLERANCE {
        return Err(format!(
            "probabilities sum to {}, expected 1 ± {SUM_TOLERANCE}",
            (sum * 1e6).round() / 1e6
        ));
    }
    let reported_confidence = match obj.get("confidence") {
        None | Some(Value::Null) => None,
        Some(c) => Some(probability(c).map_err(|e| format!("confidence: {e}"))?),
    };
    let dist = Distribution {
        labels: order,
        probs: ps,
        reported_confidence,
    };
    if let Some(stated) = obj.get(tag) {
        let stated = stated
            .as_str()
            .ok_or_else(|| format!("{tag}: expected a label, found {}", describe(stated)))?;
        let Some(i) = dist.labels.iter().position(|l| l == stated) else {
            return Err(format!(
                "{tag}: {stated:?} is not one of {}",
                list(&dist.labels)
            ));
        };
        if dist.probs[i] < dist.p_max() {
            return Err(format!("{tag}: {stated:?} is not the most probable label"));
        }
    }
    Ok(dist)
}

/// A short description of a JSON value for error messages.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => {
            format!("a string of {} characters", s.chars().count())
        }
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn list(values: &[String]) -> String {
    let shown: Vec<&str> = values.iter().take(12).map(String::as_str).collect();
    let more = if values.len() > 12 { ", ..." } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn confidence_falls_back_to_normalised_margin() {
        let d = Distribution {
            labels: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            probs: vec![0.55, 0.15, 0.15, 0.15],
            reported_confidence: None,
        };
        assert!((d.confidence() - 0.4).abs() < 1e-12);
        assert_eq!(d.argmax_label(), "a");
    }

    #[test]
    fn argmax_ties_go_to_the_first_label() {
        let d = Distribution {
            labels: vec!["x".into(), "y".into()],
            probs: vec![0.5, 0.5],
            reported_confidence: None,
        };
        assert_eq!(d.argmax_label(), "x");
        assert_eq!(d.confidence(), 0.0);
    }

    #[test]
    fn distributions_are_checked() {
        let labels = vec!["a".to_string(), "b".to_string()];
        let ty = InputType::Choice {
            labels: Some(labels),
        };
        let e = parse_value(&ty, &json!({"probabilities": {"a": 0.5, "b": 0.3}})).unwrap_err();
        assert!(e.contains("sum to 0.8"), "{e}");
        let e = parse_value(&ty, &json!({"probabilities": {"a": 0.5, "z": 0.5}})).unwrap_err();
        assert!(e.contains("\"z\" is not one of"), "{e}");
        let e = parse_value(
            &ty,
            &json!({"choice": "b", "probabilities": {"a": 0.7, "b": 0.3}}),
        )
        .unwrap_err();
        assert!(e.contains("not the most probable"), "{e}");
        assert_eq!(
            parse_value(&ty, &json!("UNAVAILABLE")).unwrap(),
            TypedValue::Failed(MeasurementFailure::Unavailable)
        );
    }

    #[test]
    fn noul_accepts_number_or_answer_object() {
        assert_eq!(
            parse_value(&InputType::Noul, &json!({"type": "noul", "noul": 0.25})).unwrap(),
            TypedValue::Prob(Probability::new(0.25).unwrap())
        );
        let e = parse_value(&InputType::Noul, &json!(1.4)).unwrap_err();
        assert_eq!(e, "probability 1.4 is outside [0, 1]");
        assert!(parse_value(&InputType::Noul, &json!("0.3")).is_err());
    }
}
