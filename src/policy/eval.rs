//! The evaluator: every rule whose condition holds is a hit; the winner is the hit with the
//! highest priority (ties: file order); reasons come from every hit, obligations from the
//! winner alone when it is a denial. Fallback rules are tried in order only when nothing hits.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use super::model::*;
use crate::record::{Frame, Record};
use crate::value::TypedValue;

/// One value of one outcome dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutcomeValue {
    One(String),
    /// A units policy's combined unordered dimension: sorted, distinct.
    Set(Vec<String>),
    /// No value (a unit that selected nothing).
    Nothing,
}

impl OutcomeValue {
    pub fn to_json(&self) -> Value {
        match self {
            OutcomeValue::One(s) => Value::String(s.clone()),
            OutcomeValue::Set(v) => json!(v),
            OutcomeValue::Nothing => Value::Null,
        }
    }
    pub fn label(&self) -> String {
        match self {
            OutcomeValue::One(s) => s.clone(),
            OutcomeValue::Set(v) => format!("[{}]", v.join(",")),
            OutcomeValue::Nothing => "-".into(),
        }
    }
    fn as_str(&self) -> Option<&str> {
        match self {
            OutcomeValue::One(s) => Some(s),
            _ => None,
        }
    }
}

/// A decision with its explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// One value per outcome dimension, in declaration order.
    pub outcome: Vec<OutcomeValue>,
    pub matched_rule: String,
    pub suppressed_rules: Vec<String>,
    pub reason_codes: Vec<String>,
    pub obligations: Vec<String>,
    /// Per-unit decisions of a units policy, in unit order; empty otherwise.
    pub units: Vec<(String, Decision)>,
}

impl Decision {
    /// The outcome label: dimension values joined by `/` in declared order (`PERMIT/NONE`).
    pub fn label(&self) -> String {
        self.outcome
            .iter()
            .map(OutcomeValue::label)
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The decision as a JSON object: outcome dimensions as top-level keys, then the
    /// explanation (the `decide --format jsonl` shape without `policy`).
    pub fn to_json(&self, policy: &Policy) -> Map<String, Value> {
        let mut obj = Map::new();
        for (dim, v) in policy.dimensions.iter().zip(&self.outcome) {
            obj.insert(dim.name.clone(), v.to_json());
        }
        obj.insert("matched_rule".into(), json!(self.matched_rule));
        obj.insert("suppressed_rules".into(), json!(self.suppressed_rules));
        obj.insert("reason_codes".into(), json!(self.reason_codes));
        obj.insert("obligations".into(), json!(self.obligations));
        if let Some(units) = &policy.units {
            let list: Vec<Value> = self
                .units
                .iter()
                .map(|(name, d)| {
                    let mut o = Map::new();
                    o.insert(units.name.clone(), json!(name));
                    o.extend(d.to_json(policy));
                    Value::Object(o)
                })
                .collect();
            obj.insert("units".into(), Value::Array(list));
        }
        obj
    }
}

/// Decides `record` under `policy` with the given param values (one per declared param, in
/// order; see [`Policy::default_params`]).
pub fn decide(policy: &Policy, record: &Record, params: &[f64]) -> Decision {
    debug_assert_eq!(params.len(), policy.params.len());
    let Some(units) = &policy.units else {
        return decide_frame(policy, &record.frames[0], params);
    };
    let unit_decisions: Vec<(String, Decision)> = record
        .frames
        .iter()
        .filter_map(|f| f.unit.clone().map(|u| (u, decide_frame(policy, f, params))))
        .collect();
    if unit_decisions.is_empty() {
        let frame = record.frames.first();
        let mut d = resolve(
            policy,
            &units.empty,
            frame,
            params,
            Vec::new(),
            &[&units.empty],
        );
        // Combined unordered dimensions are sets, empty when there are no units.
        for (v, dim) in d.outcome.iter_mut().zip(&policy.dimensions) {
            if dim.across_units == Aggregate::Set {
                *v = OutcomeValue::Set(Vec::new());
            }
        }
        return d;
    }
    combine(policy, unit_decisions)
}

/// Combines unit decisions: ordered dimensions take the strictest (`max`) or least strict
/// (`min`) unit value, unordered ones the sorted set of values. The matched rule is that of the first unit reaching the primary
/// dimension's combined value.
fn combine(policy: &Policy, units: Vec<(String, Decision)>) -> Decision {
    let mut outcome = Vec::with_capacity(policy.dimensions.len());
    for (i, dim) in policy.dimensions.iter().enumerate() {
        let v = match dim.across_units {
            Aggregate::Set => {
                let mut set: Vec<String> = units
                    .iter()
                    .filter_map(|(_, d)| d.outcome[i].as_str().map(str::to_owned))
                    .collect();
                set.sort();
                set.dedup();
                OutcomeValue::Set(set)
            }
            Aggregate::Max | Aggregate::Min | Aggregate::None => {
                let rank = |v: &OutcomeValue| v.as_str().and_then(|s| dim.rank(s));
                let mut best: Option<&OutcomeValue> = None;
                for (_, d) in &units {
                    let v = &d.outcome[i];
                    let better = match best {
                        None => true,
                        Some(b) if dim.across_units == Aggregate::Min => rank(v) < rank(b),
                        Some(b) => rank(v) > rank(b),
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best.cloned().unwrap_or(OutcomeValue::Nothing)
            }
        };
        outcome.push(v);
    }
    let primary = policy.primary().unwrap_or(0);
    let decider = units
        .iter()
        .find(|(_, d)| d.outcome[primary] == outcome[primary])
        .map(|(_, d)| d.matched_rule.clone())
        .unwrap_or_default();
    let mut suppressed = Vec::new();
    let mut reasons = Vec::new();
    let mut obligations = Vec::new();
    for (_, d) in &units {
        extend_unique(&mut suppressed, &d.suppressed_rules);
        extend_unique(&mut reasons, &d.reason_codes);
        extend_unique(&mut obligations, &d.obligations);
    }
    Decision {
        outcome,
        matched_rule: decider,
        suppressed_rules: suppressed,
        reason_codes: reasons,
        obligations,
        units,
    }
}

fn decide_frame(policy: &Policy, frame: &Frame, params: &[f64]) -> Decision {
    if let Some(failure) = &policy.failure {
        let failed = policy
            .inputs
            .iter()
            .zip(&frame.values)
            .any(|(decl, v)| decl.is_measured() && matches!(v, Some(TypedValue::Failed(_))));
        if failed {
            // Rules that read no measurement (a failed validation) still decide first.
            let mut early: Vec<&Rule> = policy
                .rules
                .iter()
                .filter(|r| {
                    r.before_failure && r.when.as_ref().is_some_and(|c| holds(c, frame, params))
                })
                .collect();
            early.sort_by_key(|r| std::cmp::Reverse(r.priority));
            if let Some(winner) = early.first() {
                let suppressed = early[1..].iter().map(|r| r.id.clone()).collect();
                return resolve(policy, winner, Some(frame), params, suppressed, &early);
            }
            return resolve(policy, failure, Some(frame), params, Vec::new(), &[failure]);
        }
    }
    let mut hits: Vec<&Rule> = policy
        .rules
        .iter()
        .filter(|r| r.when.as_ref().is_none_or(|c| holds(c, frame, params)))
        .collect();
    // Stable: equal priorities keep file order.
    hits.sort_by_key(|r| std::cmp::Reverse(r.priority));
    if let Some(winner) = hits.first() {
        let suppressed = hits[1..].iter().map(|r| r.id.clone()).collect();
        return resolve(policy, winner, Some(frame), params, suppressed, &hits);
    }
    let fallback = policy
        .fallback
        .iter()
        .find(|r| r.when.as_ref().is_none_or(|c| holds(c, frame, params)))
        .unwrap_or_else(|| {
            // The loader guarantees the last fallback is unconditional.
            policy
                .fallback
                .last()
                .expect("loader requires a fallback rule")
        });
    resolve(
        policy,
        fallback,
        Some(frame),
        params,
        Vec::new(),
        &[fallback],
    )
}

/// Builds the decision of `winner` given all `hits` in priority order.
fn resolve(
    policy: &Policy,
    winner: &Rule,
    frame: Option<&Frame>,
    params: &[f64],
    suppressed_rules: Vec<String>,
    hits: &[&Rule],
) -> Decision {
    let outcome: Vec<OutcomeValue> = winner
        .outcome
        .iter()
        .map(|spec| outcome_value(policy, spec, frame, params))
        .collect();
    let mut reason_codes = Vec::new();
    for r in hits {
        extend_unique(&mut reason_codes, &r.reasons);
    }
    let denial = policy.primary().is_some_and(|p| {
        let dim = &policy.dimensions[p];
        outcome[p].as_str().and_then(|s| dim.rank(s)) == dim.values.as_ref().map(|v| v.len() - 1)
    });
    let obligations = if denial {
        winner.obligations.clone()
    } else {
        let mut all = Vec::new();
        for r in hits {
            extend_unique(&mut all, &r.obligations);
        }
        all
    };
    Decision {
        outcome,
        matched_rule: winner.id.clone(),
        suppressed_rules,
        reason_codes,
        obligations,
        units: Vec::new(),
    }
}

fn outcome_value(
    policy: &Policy,
    spec: &OutcomeSpec,
    frame: Option<&Frame>,
    params: &[f64],
) -> OutcomeValue {
    match spec {
        OutcomeSpec::Literal(s) => OutcomeValue::One(s.clone()),
        OutcomeSpec::Nothing => OutcomeValue::Nothing,
        OutcomeSpec::Route(i) => {
            let route = &policy.routes[*i];
            for (when, value) in &route.cases {
                let taken = match (when, frame) {
                    (None, _) => true,
                    (Some(c), Some(f)) => holds(c, f, params),
                    (Some(_), None) => false,
                };
                if taken {
                    return OutcomeValue::One(value.clone());
                }
            }
            OutcomeValue::Nothing
        }
        OutcomeSpec::FromInput { input, derive } => {
            match frame.and_then(|f| scalar(f, *input, *derive)) {
                Some(Scalar::Str(s)) => OutcomeValue::One(s.to_owned()),
                _ => OutcomeValue::Nothing,
            }
        }
    }
}

fn extend_unique(into: &mut Vec<String>, from: &[String]) {
    for x in from {
        if !into.contains(x) {
            into.push(x.clone());
        }
    }
}

/// A comparable value derived from an input.
#[derive(Debug, Clone, Copy)]
enum Scalar<'a> {
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(&'a str),
}

fn scalar(frame: &Frame, input: usize, derive: Derive) -> Option<Scalar<'_>> {
    let v = frame.values.get(input)?.as_ref()?;
    Some(match (v, derive) {
        (TypedValue::Bool(b), Derive::Value) => Scalar::Bool(*b),
        (TypedValue::Int(i), Derive::Value) => Scalar::Int(*i),
        (TypedValue::Enum(s), Derive::Value) => Scalar::Str(s),
        (TypedValue::Prob(p), Derive::Value) => Scalar::Num(p.get()),
        (TypedValue::Prob(p), Derive::Confidence) => Scalar::Num(p.get().max(1.0 - p.get())),
        (TypedValue::Prob(p), Derive::Answer) => {
            Scalar::Str(if p.get() >= 0.5 { "yes" } else { "no" })
        }
        (TypedValue::Choice(d) | TypedValue::Score(d), Derive::Argmax) => {
            Scalar::Str(d.argmax_label())
        }
        (TypedValue::Choice(d) | TypedValue::Score(d), Derive::PMax) => Scalar::Num(d.p_max()),
        (TypedValue::Choice(d) | TypedValue::Score(d), Derive::Confidence) => {
            Scalar::Num(d.confidence())
        }
        _ => return None,
    })
}

/// Whether condition `c` holds on `frame`. A comparison on a value that is missing or failed
/// (which the loader and the failure check rule out) is false, never a panic.
pub fn holds(c: &Condition, frame: &Frame, params: &[f64]) -> bool {
    match c {
        Condition::All(list) => list.iter().all(|c| holds(c, frame, params)),
        Condition::Any(list) => list.iter().any(|c| holds(c, frame, params)),
        Condition::Not(inner) => !holds(inner, frame, params),
        Condition::Compare(cmp) => compare(cmp, frame, params).unwrap_or(false),
    }
}

fn compare(cmp: &Comparison, frame: &Frame, params: &[f64]) -> Option<bool> {
    let left = scalar(frame, cmp.input, cmp.derive)?;
    if let Operand::Set(values) = &cmp.right {
        let Scalar::Str(s) = left else { return None };
        let member = values.iter().any(|v| v == s);
        return Some(if cmp.op == Op::In { member } else { !member });
    }
    let right = match &cmp.right {
        Operand::Number(f) => Scalar::Num(*f),
        Operand::Int(i) => Scalar::Int(*i),
        Operand::Bool(b) => Scalar::Bool(*b),
        Operand::Str(s) => Scalar::Str(s),
        Operand::Param(i) => Scalar::Num(*params.get(*i)?),
        Operand::Input { input, derive } => scalar(frame, *input, *derive)?,
        Operand::Set(_) => return None,
    };
    let ord = match (left, right) {
        (Scalar::Bool(a), Scalar::Bool(b)) => a.cmp(&b),
        (Scalar::Int(a), Scalar::Int(b)) => a.cmp(&b),
        (Scalar::Str(a), Scalar::Str(b)) => {
            // Strings only support equality; the loader rejects ordering operators on them.
            return match cmp.op {
                Op::Eq => Some(a == b),
                Op::Ne => Some(a != b),
                _ => None,
            };
        }
        (Scalar::Num(a), Scalar::Num(b)) => a.partial_cmp(&b)?,
        (Scalar::Int(a), Scalar::Num(b)) => (a as f64).partial_cmp(&b)?,
        (Scalar::Num(a), Scalar::Int(b)) => a.partial_cmp(&(b as f64))?,
        _ => return None,
    };
    Some(match cmp.op {
        Op::Eq => ord == Ordering::Equal,
        Op::Ne => ord != Ordering::Equal,
        Op::Lt => ord == Ordering::Less,
        Op::Le => ord != Ordering::Greater,
        Op::Gt => ord == Ordering::Greater,
        Op::Ge => ord != Ordering::Less,
        Op::In | Op::NotIn => return None,
    })
}

/// Every comparison of a record's values against a param, as `(param index, operator,
/// value)` with the value on the left: the only places where a decision can change as that
/// param moves (exact sweeps and the box-decomposition sweep rely on this).
pub fn param_comparisons(policy: &Policy, record: &Record) -> Vec<(usize, Op, f64)> {
    fn walk(c: &Condition, frame: &Frame, out: &mut Vec<(usize, Op, f64)>) {
        match c {
            Condition::All(list) | Condition::Any(list) => {
                list.iter().for_each(|c| walk(c, frame, out))
            }
            Condition::Not(inner) => walk(inner, frame, out),
            Condition::Compare(cmp) => {
                if let Operand::Param(p) = cmp.right {
                    match scalar(frame, cmp.input, cmp.derive) {
                        Some(Scalar::Num(v)) => out.push((p, cmp.op, v)),
                        Some(Scalar::Int(v)) => out.push((p, cmp.op, v as f64)),
                        _ => {}
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for frame in &record.frames {
        for rule in policy.rules.iter().chain(&policy.fallback) {
            if let Some(c) = &rule.when {
                walk(c, frame, &mut out);
            }
        }
        for route in &policy.routes {
            for (when, _) in &route.cases {
                if let Some(c) = when {
                    walk(c, frame, &mut out);
                }
            }
        }
    }
    out
}
