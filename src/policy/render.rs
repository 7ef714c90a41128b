//! Human-readable text for conditions and outcomes (`jev policy show`). Returns strings;
//! printing is the CLI's business.

use super::model::*;

/// `record.sensitivity == "FAIL"`, `all(a, any(b, c))`, `not(...)`.
pub fn condition(policy: &Policy, c: &Condition) -> String {
    match c {
        Condition::All(list) | Condition::Any(list) => {
            let name = if matches!(c, Condition::All(_)) {
                "all"
            } else {
                "any"
            };
            let parts: Vec<String> = list.iter().map(|c| condition(policy, c)).collect();
            format!("{name}({})", parts.join(", "))
        }
        Condition::Not(inner) => format!("not({})", condition(policy, inner)),
        Condition::Compare(cmp) => {
            let left = operand_name(policy, cmp.input, cmp.derive);
            let right = match &cmp.right {
                Operand::Number(f) => f.to_string(),
                Operand::Int(i) => i.to_string(),
                Operand::Bool(b) => b.to_string(),
                Operand::Str(s) => format!("{s:?}"),
                Operand::Set(v) => format!("[{}]", v.join(", ")),
                Operand::Param(i) => format!("param {}", policy.params[*i].name),
                Operand::Input { input, derive } => operand_name(policy, *input, *derive),
            };
            format!("{left} {} {right}", cmp.op.symbol())
        }
    }
}

fn operand_name(policy: &Policy, input: usize, derive: Derive) -> String {
    let path = &policy.inputs[input].path;
    match derive {
        Derive::Value => path.clone(),
        d => format!("{}({path})", d.name()),
    }
}

/// `HOLD / route terminal`, `selected / argmax(answers.pick_{category})`.
pub fn outcome(policy: &Policy, rule: &Rule) -> String {
    rule.outcome
        .iter()
        .map(|spec| match spec {
            OutcomeSpec::Literal(s) => s.clone(),
            OutcomeSpec::Route(i) => format!("route {}", policy.routes[*i].name),
            OutcomeSpec::FromInput { input, derive } => operand_name(policy, *input, *derive),
            OutcomeSpec::Nothing => "-".into(),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// `required`, `default 4`, `optional`.
pub fn presence(decl: &InputDecl) -> String {
    match &decl.presence {
        Presence::Required => "required".into(),
        Presence::Default(v) => format!("default {}", v.to_json()),
        Presence::Optional => "optional (never gates)".into(),
    }
}

/// `enum [PASS, FAIL]`, `int >= 0`, `choice (labels per case)`.
pub fn input_type(decl: &InputDecl) -> String {
    match &decl.ty {
        InputType::Bool => "bool".into(),
        InputType::Int { min, max } => match (min, max) {
            (Some(lo), Some(hi)) => format!("int in [{lo}, {hi}]"),
            (Some(lo), None) => format!("int >= {lo}"),
            (None, Some(hi)) => format!("int <= {hi}"),
            (None, None) => "int".into(),
        },
        InputType::Enum { values } => format!("enum [{}]", values.join(", ")),
        InputType::Noul => "noul".into(),
        InputType::Choice { labels: Some(l) } => format!("choice [{}]", l.join(", ")),
        InputType::Choice { labels: None } => "choice (labels per case)".into(),
        InputType::Score { levels } => format!("score [{}]", levels.join(", ")),
    }
}
