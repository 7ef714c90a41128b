//! The validated, typed form of a policy. Values of these types only come out of
//! [`super::load`], so every index points at something that exists and every comparison is
//! between compatible kinds.

use serde_json::Value;

use crate::value::TypedValue;

/// A policy after loading and validation.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub version: String,
    pub description: String,
    /// `sha256:` + hex SHA-256 of the policy document's RFC 8785 canonical form.
    pub digest: String,
    pub question_set: Option<QuestionSetRef>,
    pub units: Option<Units>,
    pub inputs: Vec<InputDecl>,
    pub params: Vec<ParamDecl>,
    pub dimensions: Vec<Dimension>,
    pub routes: Vec<Route>,
    pub rules: Vec<Rule>,
    pub fallback: Vec<Rule>,
    pub failure: Option<Rule>,
    /// The document as read, for `jev policy show`.
    pub document: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionSetRef {
    pub id: String,
    pub digest: String,
}

/// Policies that decide several independent units per case (one per tool category, say).
#[derive(Debug, Clone)]
pub struct Units {
    /// The placeholder name: `category` in `answers.pick_{category}`.
    pub name: String,
    /// Index of the per-unit input whose present keys name the units.
    pub discover: usize,
    /// The decision when a case has no units at all.
    pub empty: Rule,
}

/// Where in a record an input lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    Record,
    Answers,
    Context,
    History,
}

impl Section {
    pub const ALL: [Section; 4] = [
        Section::Record,
        Section::Answers,
        Section::Context,
        Section::History,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Section::Record => "record",
            Section::Answers => "answers",
            Section::Context => "context",
            Section::History => "history",
        }
    }
    pub fn parse(s: &str) -> Option<Section> {
        Section::ALL.into_iter().find(|sec| sec.name() == s)
    }
}

#[derive(Debug, Clone)]
pub struct InputDecl {
    /// The full path as declared: `record.provenance`, `answers.pick_{category}`.
    pub path: String,
    pub section: Section,
    /// The field name inside the section (may contain the unit placeholder).
    pub field: String,
    pub ty: InputType,
    pub presence: Presence,
    /// True when `field` contains the unit placeholder.
    pub per_unit: bool,
    pub description: String,
}

impl InputDecl {
    /// True for judge measurements, which may fail (`UNAVAILABLE`, `INCOMPLETE_INPUT`).
    pub fn is_measured(&self) -> bool {
        matches!(
            self.ty,
            InputType::Noul | InputType::Choice { .. } | InputType::Score { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum InputType {
    Bool,
    Int {
        min: Option<i64>,
        max: Option<i64>,
    },
    Enum {
        values: Vec<String>,
    },
    Noul,
    /// `labels: None` means the labels vary per case (tool ids); the answer brings them.
    Choice {
        labels: Option<Vec<String>>,
    },
    Score {
        levels: Vec<String>,
    },
}

impl InputType {
    pub fn name(&self) -> &'static str {
        match self {
            InputType::Bool => "bool",
            InputType::Int { .. } => "int",
            InputType::Enum { .. } => "enum",
            InputType::Noul => "noul",
            InputType::Choice { .. } => "choice",
            InputType::Score { .. } => "score",
        }
    }
}

#[derive(Debug, Clone)]
pub enum Presence {
    Required,
    Default(TypedValue),
    /// Recorded when present, never used by a condition (the loader enforces that).
    Optional,
}

#[derive(Debug, Clone)]
pub struct ParamDecl {
    pub name: String,
    pub description: String,
    pub default: f64,
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
}

#[derive(Debug, Clone)]
pub struct Dimension {
    pub name: String,
    pub ordered: bool,
    /// Declared values, least strict first for ordered dimensions. `None`: open (tool ids).
    pub values: Option<Vec<String>>,
    /// How a units policy combines its units' values on this dimension.
    pub across_units: Aggregate,
}

impl Dimension {
    pub fn rank(&self, value: &str) -> Option<usize> {
        self.values.as_ref()?.iter().position(|v| v == value)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Not a units policy.
    None,
    /// The strictest unit value (ordered dimensions).
    Max,
    /// The least strict unit value (ordered dimensions).
    Min,
    /// The sorted set of distinct values, absent values left out.
    Set,
}

/// A named value that depends on the state, such as the terminal route (REVIEW when a human
/// is available, else ABSTAIN). Cases are tried in order; the last has no condition.
#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub cases: Vec<(Option<Condition>, String)>,
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub priority: i64,
    /// `None`: always holds.
    pub when: Option<Condition>,
    /// One entry per dimension, in dimension order.
    pub outcome: Vec<OutcomeSpec>,
    pub reasons: Vec<String>,
    pub obligations: Vec<String>,
    /// Decided even when a measurement failed (its condition reads no measurement): a
    /// failed validation rejects whether or not the judge answered.
    pub before_failure: bool,
}

#[derive(Debug, Clone)]
pub enum OutcomeSpec {
    Literal(String),
    Route(usize),
    FromInput {
        input: usize,
        derive: Derive,
    },
    /// No value on this dimension (a unit that selects nothing).
    Nothing,
}

#[derive(Debug, Clone)]
pub enum Condition {
    All(Vec<Condition>),
    Any(Vec<Condition>),
    Not(Box<Condition>),
    Compare(Comparison),
}

#[derive(Debug, Clone)]
pub struct Comparison {
    pub input: usize,
    pub derive: Derive,
    pub op: Op,
    pub right: Operand,
}

/// A value computed from an input before comparing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Derive {
    /// The input itself.
    Value,
    /// Label with the highest probability (ties: first in label order).
    Argmax,
    /// The argmax label's probability.
    PMax,
    /// Reported confidence, else `(max_p − 1/n)/(1 − 1/n)`; for a noul, `max(p, 1−p)`.
    Confidence,
    /// A noul's answer: `yes` iff p ≥ 0.5.
    Answer,
}

impl Derive {
    pub fn name(self) -> &'static str {
        match self {
            Derive::Value => "value",
            Derive::Argmax => "argmax",
            Derive::PMax => "p_max",
            Derive::Confidence => "confidence",
            Derive::Answer => "answer",
        }
    }
    pub fn parse(s: &str) -> Option<Derive> {
        [
            Derive::Argmax,
            Derive::PMax,
            Derive::Confidence,
            Derive::Answer,
        ]
        .into_iter()
        .find(|d| d.name() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::In => "in",
            Op::NotIn => "not_in",
        }
    }
    pub fn parse(s: &str) -> Option<Op> {
        [
            Op::Eq,
            Op::Ne,
            Op::Lt,
            Op::Le,
            Op::Gt,
            Op::Ge,
            Op::In,
            Op::NotIn,
        ]
        .into_iter()
        .find(|o| o.symbol() == s)
    }
    /// True for operators that accept by ruling values out.
    pub fn is_exclusion(self) -> bool {
        matches!(self, Op::Ne | Op::NotIn)
    }
}

#[derive(Debug, Clone)]
pub enum Operand {
    Number(f64),
    Int(i64),
    Bool(bool),
    Str(String),
    Set(Vec<String>),
    Param(usize),
    Input { input: usize, derive: Derive },
}

impl Policy {
    /// `name@version`.
    pub fn reference(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// The dimension whose order defines strictness: the first ordered one.
    pub fn primary(&self) -> Option<usize> {
        self.dimensions.iter().position(|d| d.ordered)
    }

    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    pub fn input_index(&self, path: &str) -> Option<usize> {
        self.inputs.iter().position(|i| i.path == path)
    }

    pub fn default_params(&self) -> Vec<f64> {
        self.params.iter().map(|p| p.default).collect()
    }

    /// Paths of every input the policy requires (no default).
    pub fn required_inputs(&self) -> impl Iterator<Item = &InputDecl> {
        self.inputs
            .iter()
            .filter(|i| matches!(i.presence, Presence::Required))
    }
}
